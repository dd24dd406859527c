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
without a resolved message: the new holder evaluates the cluster afresh (and may announce a
firing alert once more).

Notifying goes through a `Notifier` (the Slack one, or none); a notification that fails is
retried at the next evaluation, never lost, never repeated once it succeeded.

Promises: the rules never see an index mid-batch (evaluation has no `await`); the clock and
sleep are injected (tests use fake time).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from dra_mirror.service.model.changes import Changes
from dra_mirror.service.model.view import IndexView

from .config import AlertsConfig
from .rules import SEVERITY, Condition, evaluate

log = logging.getLogger(__name__)

Clock = Callable[[], datetime]
WAKE_GAP = 1.0


@dataclass
class Alert:
    condition: Condition
    fired_at: datetime
    notified: bool = False
    resolved: bool = False
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
    firing: dict[tuple[str, str, str, str], Alert] = field(default_factory=dict)
    pending_resolved: list[Alert] = field(default_factory=list)
    notifications: dict[str, int] = field(default_factory=lambda: {"sent": 0, "failed": 0})
    _seen: dict[tuple[str, str, str, str], _Seen] = field(default_factory=dict)
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
        for index in indexes.values():
            for condition in evaluate(index, self.config.rules):
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
        _, ended = self.evaluate()
        self.pending_resolved.extend(a for a in ended if a.notified)
        if self.notifier is None:
            return
        for alert in [a for a in self.firing.values() if not a.notified]:
            try:
                alert.receipt = await self.notifier.fire(alert)
                alert.notified = True
                self.notifications["sent"] += 1
            except Exception as error:  # the next evaluation tries again
                self.notifications["failed"] += 1
                log.warning("alert %s: notifying failed (%s); retrying at the next evaluation",
                            "/".join(alert.condition.key), error)  # fmt: skip
        for alert in list(self.pending_resolved):
            try:
                await self.notifier.resolve(alert)
                self.pending_resolved.remove(alert)
                self.notifications["sent"] += 1
            except Exception as error:
                self.notifications["failed"] += 1
                log.warning("alert %s: resolving failed (%s); retrying at the next evaluation",
                            "/".join(alert.condition.key), error)  # fmt: skip

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
