"""What has been announced, kept where the next holder of a cluster finds it: the alert ledger.

An alert announced in Slack is a message someone reads. When the process that announced it
stops (a restart, a rollout, or its cluster's lease moving to another watcher), the next
process that evaluates the cluster must neither announce a condition that still holds a second
time nor leave the first message unresolved when the condition ends. The engine
(`service.alerts.engine`) therefore writes each alert it has announced to a ledger, with the
receipt of its message, and forgets it once its end has been announced; a process taking up a
cluster reads the cluster's entries before it announces anything there.

* `AlertLedger` is the seam: `announced(cluster)` lists the entries, `record(entry)` keeps one
  (replacing an earlier one of the same alert), `forget(cluster, key)` drops one. Each raises
  `LedgerUnavailable` when the ledger cannot be reached; the engine then holds the cluster's
  announcements back (it never announces what it could not check) and tries again at the next
  evaluation.
* `RedisAlertLedger` keeps one hash per cluster, `<prefix>:{<cluster>}:alerts` (the cluster's
  hash tag, so on a Redis Cluster it lives in the slot of the cluster's other keys), a field per
  alert (`rule/namespace/name`, JSON), its entry as the value (msgspec JSON).
* Without a ledger (state in memory: one process, nothing outlives it) the engine keeps what it
  announced in the process only.
"""

from __future__ import annotations

from typing import Any, Protocol

import msgspec

from .rules import Condition

AlertKey = tuple[str, str, str, str]  # (rule, cluster, namespace, name), Condition.key


class LedgerUnavailable(Exception):
    """The ledger could not be read or written (its store is down)."""


class AnnouncedAlert(msgspec.Struct, frozen=True):
    """One announced alert: its condition as announced, when it fired, and the receipt its
    notifier needs to resolve the message (Slack: channel and ts; None: nothing was posted)."""

    rule: str
    cluster: str
    namespace: str
    name: str
    summary: str
    fired_at: str
    since: str | None = None
    details: dict[str, Any] = {}
    receipt: list[Any] | None = None

    @property
    def key(self) -> AlertKey:
        return (self.rule, self.cluster, self.namespace, self.name)

    def condition(self) -> Condition:
        return Condition(
            rule=self.rule,
            cluster=self.cluster,
            namespace=self.namespace,
            name=self.name,
            summary=self.summary,
            since=self.since,
            details=dict(self.details),
        )


def announced_alert(condition: Condition, *, fired_at: str, receipt: Any) -> AnnouncedAlert:
    return AnnouncedAlert(
        rule=condition.rule,
        cluster=condition.cluster,
        namespace=condition.namespace,
        name=condition.name,
        summary=condition.summary,
        fired_at=fired_at,
        since=condition.since,
        details=dict(condition.details),
        receipt=list(receipt) if receipt is not None else None,
    )


class AlertLedger(Protocol):
    async def announced(self, cluster: str) -> list[AnnouncedAlert]: ...

    async def record(self, entry: AnnouncedAlert) -> None: ...

    async def forget(self, cluster: str, key: AlertKey) -> None: ...


_ENCODE = msgspec.json.Encoder()
_DECODE = msgspec.json.Decoder(AnnouncedAlert)


def _field(key: AlertKey) -> bytes:
    return _ENCODE.encode([key[0], key[2], key[3]])


class RedisAlertLedger:
    """The ledger in the mirror's Redis (see the module docstring); `client` is redis-py's
    asyncio client (a single server or a Redis Cluster)."""

    def __init__(self, client: Any, *, prefix: str) -> None:
        self.redis = client
        self.prefix = prefix

    def key(self, cluster: str) -> str:
        return f"{self.prefix}:{{{cluster}}}:alerts"

    async def _call(self, awaitable: Any) -> Any:
        from redis.exceptions import RedisError

        try:
            return await awaitable
        except (RedisError, OSError) as error:
            raise LedgerUnavailable(f"alert ledger: {error or type(error).__name__}") from error

    async def announced(self, cluster: str) -> list[AnnouncedAlert]:
        raw = await self._call(self.redis.hgetall(self.key(cluster)))
        entries = []
        for value in raw.values():
            try:
                entries.append(_DECODE.decode(value))
            except msgspec.DecodeError:
                continue  # not an entry this version wrote: ignored, never fatal
        return sorted(entries, key=lambda e: e.key)

    async def record(self, entry: AnnouncedAlert) -> None:
        await self._call(
            self.redis.hset(self.key(entry.cluster), _field(entry.key), _ENCODE.encode(entry))
        )

    async def forget(self, cluster: str, key: AlertKey) -> None:
        await self._call(self.redis.hdel(self.key(cluster), _field(key)))
