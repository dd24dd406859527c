"""`AlertEngine`: the rules of every watched cluster evaluated continuously; alerts fired once,
resolved once.

Every `interval` seconds, and soon after a batch of changes (`ChangeSink.apply` wakes it; at
most once a second), the engine evaluates the configured rules (`rules.evaluate`) over the
index of each cluster its `sources()` give — the reactors of this process: with leased
watchers only the clusters whose lease this replica holds. A condition becomes an alert once it
has held for its rule's duration (from the data's `since`, else from the first evaluation
that saw it); an alert is identified by `(rule, cluster, namespace, name)` and notified once
(de-duplicated); when its condition no longer holds it is resolved (notified once more). When
a cluster leaves `sources()` (its lease moved to another replica) its alerts are dropped here
without a resolved message: the new holder takes them up.

What has been announced outlives the process when there is a `ledger`
(`service.alerts.ledger`; the mirror's Redis in the production shapes): each announced alert
is recorded with its message's receipt and forgotten once its end is announced. Before it
announces anything in a cluster, the engine reads that cluster's entries: a condition that
still holds is not announced again, and one that ended meanwhile is resolved — the earlier
process's message is updated. While the ledger cannot be read, the cluster's announcements
wait (its series are exported meanwhile); a record or a forget that fails is retried at the
next evaluation. Without a ledger, what was announced is known to the process only: after a
restart a condition that still holds is announced once more.

`held-not-busy` reads what the engine cannot derive from an index: after each evaluation it
asks `not_busy(cluster)` (the utilisation source's held-not-busy claims) for every cluster,
for the next evaluation to read (so a slow source delays no other alert), keeping a
cluster's last answer when the source cannot answer.

Notifying goes through a `Notifier` (the Slack one, or none); a notification that fails is
retried at the next evaluation, never lost, never repeated once it succeeded.

Promises: the rules never see an index mid-batch (evaluation has no `await`); the clock and
sleep are injected (tests use fake time).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from dra_mirror.service.model.changes import Changes
from dra_mirror.service.model.view import IndexView
from dra_mirror.service.questions.utilization import NotBusyRow

from .config import AlertsConfig
from .ledger import AlertKey, AlertLedger, LedgerUnavailable, announced_alert
from .rules import HELD_NOT_BUSY, SEVERITY, Condition, evaluate

log = logging.getLogger(__name__)

Clock = Callable[[], datetime]
WAKE_GAP = 1.0


@dataclass
class Alert:
    condition: Condition
    fired_at: datetime
    notified: bool = False
    resolved: bool = False
    recorded: bool = False  # in the ledger (when the engine has one)
    receipt: Any = None  # what the notifier needs to resolve it (channel, ts)

    @property
    def severity(self) -> str:
        return SEVERITY[self.condition.rule]


class Notifier(Protocol):
    async def fire(self, alert: Alert) -> Any:
        """Announce an alert; returns a receipt for `resolve`. Raises on failure."""
        ...

    async def resolve(self, alert: Alert) -> None: ...


def _parse(moment: str | None) -> datetime | None:
    if not moment:
        return None
    try:
        return datetime.fromisoformat(moment.replace("Z", "+00:00"))
    except ValueError:
        return None


@dataclass
class _Seen:
    first: datetime
    condition: Condition


@dataclass
class AlertEngine:
    config: AlertsConfig
    sources: Callable[[], Mapping[str, IndexView]]
    notifier: Notifier | None = None
    clock: Clock = field(default=lambda: datetime.now(UTC))
    ledger: AlertLedger | None = None
    firing: dict[tuple[str, str, str, str], Alert] = field(default_factory=dict)
    pending_resolved: list[Alert] = field(default_factory=list)
    notifications: dict[str, int] = field(default_factory=lambda: {"sent": 0, "failed": 0})
    # held-not-busy: the claims of a cluster held, not busy (the utilisation source's answer)
    not_busy: Callable[[str], Awaitable[Sequence[NotBusyRow]]] | None = None
    _not_busy: dict[str, list[NotBusyRow]] = field(default_factory=dict)
    _seen: dict[tuple[str, str, str, str], _Seen] = field(default_factory=dict)
    _adopted: set[str] = field(default_factory=set)  # clusters whose ledger entries are read
    _to_forget: dict[AlertKey, str] = field(default_factory=dict)  # resolved, still recorded
    _wake: asyncio.Event = field(default_factory=asyncio.Event)
    _task: asyncio.Task[None] | None = None

    # --- as a sink of the reactors: a batch of changes wakes the engine ------------------

    async def apply(self, changes: Changes) -> None:
        self._wake.set()

    async def cluster_started(self, cluster: str, at: str) -> None:
        return None

    async def record_gap(self, cluster: str, start: str, end: str) -> None:
        return None

    async def cluster_watched(self, cluster: str, until: str) -> None:
        return None  # nothing changed: no condition starts or ends

    # --- evaluation --------------------------------------------------------------------------

    def evaluate(self) -> tuple[list[Alert], list[Alert]]:
        """One evaluation: (alerts that start firing, alerts that ended). No await inside."""
        now = self.clock()
        holding: dict[tuple[str, str, str, str], Condition] = {}
        indexes = dict(self.sources())
        self._adopted &= set(indexes)  # a cluster taken up again reads the ledger again
        for name, index in indexes.items():
            for condition in evaluate(index, self.config.rules, self._not_busy.get(name, ())):
                holding[condition.key] = condition
        started: list[Alert] = []
        for key, condition in holding.items():
            seen = self._seen.get(key)
            if seen is None:
                seen = self._seen[key] = _Seen(now, condition)
            seen.condition = condition
            if key in self.firing:
                self.firing[key].condition = condition
                continue
            since = _parse(condition.since) or seen.first
            if (now - since).total_seconds() >= self.config.rules[condition.rule]:
                alert = Alert(condition, fired_at=now)
                self.firing[key] = alert
                started.append(alert)
        ended: list[Alert] = []
        for key in [k for k in self._seen if k not in holding]:
            del self._seen[key]
        for key in [k for k in self.firing if k not in holding]:
            alert = self.firing.pop(key)
            if alert.condition.cluster not in indexes:
                continue  # the cluster is no longer watched here: not resolved, dropped
            alert.resolved = True
            ended.append(alert)
        return started, ended

    async def tick(self) -> None:
        """Evaluate, then notify what changed (and retry what failed before)."""
        keeping = self.ledger is not None and self.notifier is not None
        if keeping:
            await self._adopt()
        _, ended = self.evaluate()
        self.pending_resolved.extend(a for a in ended if a.notified)
        await self._ask_not_busy()  # for the next evaluation: a slow source delays no alert
        if self.notifier is None:
            return
        if keeping:
            await self._forget_resolved()
        for alert in [a for a in self.firing.values() if not a.notified]:
            if keeping and alert.condition.cluster not in self._adopted:
                continue  # its cluster's ledger is not read yet: it may have been announced
            try:
                alert.receipt = await self.notifier.fire(alert)
                alert.notified = True
                self.notifications["sent"] += 1
            except Exception as error:  # the next evaluation tries again
                self.notifications["failed"] += 1
                log.warning("alert %s: notifying failed (%s); retrying at the next evaluation",
                            "/".join(alert.condition.key), error)  # fmt: skip
        if keeping:
            await self._record_announced()
        for alert in list(self.pending_resolved):
            try:
                await self.notifier.resolve(alert)
                self.pending_resolved.remove(alert)
                self.notifications["sent"] += 1
            except Exception as error:
                self.notifications["failed"] += 1
                log.warning("alert %s: resolving failed (%s); retrying at the next evaluation",
                            "/".join(alert.condition.key), error)  # fmt: skip
                continue
            if keeping and alert.recorded:
                self._to_forget[alert.condition.key] = alert.condition.cluster
        if keeping:
            await self._forget_resolved()

    async def _ask_not_busy(self) -> None:
        """Ask the utilisation source which claims are held, not busy (`held-not-busy`),
        cluster by cluster; a cluster it cannot answer now keeps its last answer (its alerts
        neither fire nor resolve on a failed query)."""
        if self.not_busy is None or HELD_NOT_BUSY not in self.config.rules:
            return
        clusters = set(self.sources())
        self._not_busy = {c: rows for c, rows in self._not_busy.items() if c in clusters}
        for cluster in sorted(clusters):
            try:
                self._not_busy[cluster] = list(await self.not_busy(cluster))
            except Exception as error:
                log.warning("held-not-busy: the utilisation of %s is unknown now (%s)",
                            cluster, error)  # fmt: skip

    # --- the ledger: what was announced, across processes ------------------------------------

    async def _adopt(self) -> None:
        """Read the entries of every cluster taken up since the last evaluation."""
        assert self.ledger is not None
        for cluster in sorted(set(self.sources()) - self._adopted):
            try:
                entries = await self.ledger.announced(cluster)
            except LedgerUnavailable as error:
                log.warning("alerts of %s wait: %s; trying again at the next evaluation",
                            cluster, error)  # fmt: skip
                continue
            for entry in entries:
                receipt = tuple(entry.receipt) if entry.receipt is not None else None
                fired_at = _parse(entry.fired_at) or self.clock()
                alert = self.firing.get(entry.key)
                if alert is None:
                    alert = self.firing[entry.key] = Alert(entry.condition(), fired_at=fired_at)
                elif alert.notified:
                    continue  # announced by this process since (not yet recorded)
                alert.notified = alert.recorded = True
                alert.receipt, alert.fired_at = receipt, fired_at
            self._adopted.add(cluster)

    async def _record_announced(self) -> None:
        assert self.ledger is not None
        for alert in [a for a in self.firing.values() if a.notified and not a.recorded]:
            entry = announced_alert(
                alert.condition, fired_at=alert.fired_at.isoformat(), receipt=alert.receipt
            )
            try:
                await self.ledger.record(entry)
            except LedgerUnavailable as error:
                log.warning("alert %s: recording it failed (%s); retrying at the next "
                            "evaluation", "/".join(alert.condition.key), error)  # fmt: skip
                continue
            alert.recorded = True
            self._to_forget.pop(entry.key, None)  # fired again: the new entry stays

    async def _forget_resolved(self) -> None:
        assert self.ledger is not None
        for key, cluster in list(self._to_forget.items()):
            if key in self.firing and self.firing[key].recorded:
                del self._to_forget[key]  # fired again and recorded anew: keep that entry
                continue
            try:
                await self.ledger.forget(cluster, key)
            except LedgerUnavailable as error:
                log.warning("alert %s: forgetting it failed (%s); retrying at the next "
                            "evaluation", "/".join(key), error)  # fmt: skip
                return
            del self._to_forget[key]

    # --- running -----------------------------------------------------------------------------

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="alerts")

    async def _run(self) -> None:
        while True:
            try:
                await self.tick()
            except Exception:
                log.exception("alert evaluation failed; trying again at the next interval")
            try:
                async with asyncio.timeout(self.config.interval):
                    await self._wake.wait()
                await asyncio.sleep(WAKE_GAP)  # a burst of batches: one evaluation
            except TimeoutError:
                pass
            self._wake.clear()

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
