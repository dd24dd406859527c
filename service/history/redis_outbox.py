"""The production history outbox: one Redis stream per deployment, drained by a consumer group.

    watchers ─XADD─▶ PREFIX:{history}:outbox ─XREADGROUP (group "writers")─▶ HistoryWriter

Promises:

* `append` is one XADD; the entry lives in Redis until a writer's batch holding it committed
  to SQL and was acknowledged (XACK + XDEL, so the stream holds exactly the backlog and does
  not grow forever; `maxlen` additionally caps it with `MAXLEN ~` — a cap that drops the
  oldest entries, acknowledged or not: off by default).
* A SQL outage or a writer restart loses nothing: entries handed out and never acknowledged
  stay in the group's pending list. A restarted writer with the same consumer name gets its
  own back (XREADGROUP `0`, `pending()`); entries of a consumer that stopped (another pod
  name) are taken over with XAUTOCLAIM by the next lease holder, before any new entry.
* Per cluster, entries must reach SQL in order (an interval's close written before its open
  is lost). Several processes may drain, but only the holder of the drain lease
  (`PREFIX:{history}:outbox:drainer`, renewed on every read) is handed entries; the others
  stand by and take over within `lease_ttl` seconds when it stops. Replays at a takeover are
  harmless (the writer is idempotent).
* Consumers do not pile up: at a takeover, whenever it claims entries, and at least every
  `claim_idle` while draining, the lease holder removes (XGROUP DELCONSUMER) every other
  consumer with no pending entry that was idle longer than `claim_idle`; never one with
  pending entries.
* Fenced appends: a watcher holding a cluster's lease gives the outbox the lease's token
  (`fence(cluster, token)`, kept in `PREFIX:{history}:outbox:fences`, field = cluster); from
  then on each entry of that cluster is appended by one script only while that field still
  holds the token. Another replica that took the cluster over wrote its own token there, and a
  Redis that came back empty holds none: an append of a watcher that lost the cluster (or
  whose outbox lost its entries, and with them the mark history would count a gap from) is
  refused with `OutboxFenced` — so it can never move history's mark of the cluster past
  entries that were lost, and the gap the next start records covers them
  (`OutboxFenced.lost`: no token at all, the outbox's data is gone).
* Every Redis failure leaves this module as `StoreUnavailable` (a `StoreError`): the reactor
  retries an append that raised it with the same batch, so a watch keeps its position while
  Redis is down; the history runtime restarts its writer after one.
* `backlog()` is XLEN (acknowledged entries are deleted); `pending_count()` is XPENDING's
  total, the entries handed out and not yet acknowledged.

Redis Cluster: `from_url("redis+cluster://host:port")` (or `rediss+cluster://`) connects to
a cluster through that seed node. Every key here carries the `{history}` hash tag, so the
stream, its lease and its consumer group live in one slot and every script and transaction
stays on one node. Replication to replicas is asynchronous: a master that crashes right after
an XADD may take the entry with it when its replica is promoted. `wait_replicas=N` (1 by
default on a cluster) makes `append` send WAIT N after its XADD on the same connection, so it
returns only once N replicas hold the entry (or after `wait_timeout` plus `wait_per_mib` for
every MiB of the entry: an initial sync's entries are megabytes, service.stores.redis_wait);
when fewer answer —
no replica left after a failover — the append goes on without waiting for `wait_backoff`
seconds (logged), rather than stalling every watch.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Sequence
from typing import Any, TypeVar

from redis import asyncio as aioredis
from redis.asyncio.cluster import RedisCluster
from redis.exceptions import RedisClusterException, ResponseError

from dra_mirror.service.history import outbox_replies as replies
from dra_mirror.service.history.outbox_replies import OutboxFenced
from dra_mirror.service.stores.protocols import StoreUnavailable
from dra_mirror.service.stores.redis_calls import redis_call
from dra_mirror.service.stores.redis_connect import connect
from dra_mirror.service.stores.redis_keys import DEFAULT_PREFIX
from dra_mirror.service.stores.redis_wait import MS_PER_MIB, Wait

log = logging.getLogger(__name__)
T = TypeVar("T")

GROUP = "writers"

# Take the drain lease if free, or extend it if this consumer holds it: 1 when held after.
_LEASE = """
local holder = redis.call('GET', KEYS[1])
if holder == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
if not holder then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
return 0
"""

# Remove the group's consumers other than ARGV[2] that hold no pending entry and were idle
# (no read or claim) longer than ARGV[3] ms; returns their names. One script, so no consumer
# can be handed an entry between the check and XGROUP DELCONSUMER (which would drop that
# entry from the pending list: it would never be delivered again).
_PRUNE = """
local removed = {}
for _, consumer in ipairs(redis.call('XINFO', 'CONSUMERS', KEYS[1], ARGV[1])) do
  local info = {}
  for i = 1, #consumer, 2 do info[consumer[i]] = consumer[i + 1] end
  if info['name'] ~= ARGV[2] and info['pending'] == 0 and info['idle'] > tonumber(ARGV[3]) then
    redis.call('XGROUP', 'DELCONSUMER', KEYS[1], ARGV[1], info['name'])
    removed[#removed + 1] = info['name']
  end
end
return removed
"""


def stream_key(prefix: str = DEFAULT_PREFIX) -> str:
    """The deployment's outbox stream; hash-tagged so Redis Cluster keeps it (and its lease)
    on one slot."""
    return f"{prefix}:{{history}}:outbox"


__all__ = ["GROUP", "OutboxFenced", "RedisStreamOutbox", "stream_key"]


class RedisStreamOutbox:
    """An `Outbox` (service.history.outbox) on a Redis stream; see the module docstring."""

    durable = True  # entries outlive the process: shutdown need not wait for SQL

    def __init__(
        self,
        redis: aioredis.Redis | RedisCluster,
        *,
        stream_key: str,
        group: str = GROUP,
        consumer: str,
        maxlen: int | None = None,
        claim_idle: float = 30.0,
        lease_ttl: float = 15.0,
        wait_replicas: int | None = None,
        wait_timeout: float = 0.5,
        wait_per_mib: float = MS_PER_MIB / 1000,
        wait_backoff: float = 30.0,
    ) -> None:
        self.redis = redis
        self.cluster = isinstance(redis, RedisCluster)
        self.wait_replicas = (1 if self.cluster else 0) if wait_replicas is None else wait_replicas
        self.wait_timeout_ms = max(1, int(wait_timeout * 1000))
        self.wait_ms_per_mib = int(wait_per_mib * 1000)
        self.wait_backoff = wait_backoff
        self._unreplicated_until = float("-inf")  # loop time until which appends do not WAIT
        self.name = stream_key
        self.group = group
        self.consumer = consumer
        self.maxlen = maxlen
        self.claim_idle_ms = int(claim_idle * 1000)
        self.lease_key = f"{stream_key}:drainer"
        self.fences_key = f"{stream_key}:fences"
        self._tokens: dict[str, str] = {}  # cluster -> the token its appends are fenced with
        self.lease_ms = int(lease_ttl * 1000)
        self._lease = redis.register_script(_LEASE)
        self._prune = redis.register_script(_PRUNE)
        # XREADGROUP's reply as the server sent it: redis-py would otherwise build a dict per
        # entry, only for `replies.pairs` to take one field out of it (a batch is thousands of entries)
        redis.set_response_callback("XREADGROUP", replies.unparsed)
        self._pruned_at = float("-inf")  # loop time of the last pruning of dead consumers
        self._group_ready = False
        # ids this object handed out and not yet acknowledged: never claimed back from itself
        self._handed_out: set[str] = set()
        self._holding = False
        self._took_over = False  # the lease was just acquired: claim every pending entry

    @classmethod
    def from_url(
        cls, url: str, *, prefix: str = DEFAULT_PREFIX, **kwargs: Any
    ) -> RedisStreamOutbox:
        client = connect(url, socket_connect_timeout=2.0, socket_timeout=30.0)
        return cls(client, stream_key=stream_key(prefix), **kwargs)

    async def _call(self, awaitable: Awaitable[T]) -> T:
        try:
            return await redis_call(awaitable, "redis outbox")
        except RedisClusterException as error:  # e.g. a slot no master serves (a failover)
            raise StoreUnavailable(f"redis outbox: {error}") from error

    async def _ensure_group(self) -> None:
        """XGROUP CREATE … MKSTREAM from the stream's start; again after Redis lost it (a
        restarted Redis without persistence comes back empty)."""
        if self._group_ready:
            return
        try:
            await self._call(self.redis.xgroup_create(self.name, self.group, id="0", mkstream=True))
        except StoreUnavailable as error:
            if not isinstance(error.__cause__, ResponseError) or "BUSYGROUP" not in str(error):
                raise
        self._group_ready = True

    async def _guarded(self, awaitable_factory: Any) -> Any:
        """Run a group command; NOGROUP (Redis restarted empty) recreates the group once."""
        await self._ensure_group()
        try:
            return await self._call(awaitable_factory())
        except StoreUnavailable as error:
            self._group_ready = False
            if "NOGROUP" not in str(error):
                raise
            await self._ensure_group()
            return await self._call(awaitable_factory())

    # --- fencing (service.reactor.leased) ----------------------------------------------------

    async def fence(self, cluster: str, token: str) -> None:
        """Append `cluster`'s entries only while `token` is its fence here (the lease's token,
        given when this process takes the cluster's lease)."""
        await self._call(self.redis.hset(self.fences_key, cluster, token))
        self._tokens[cluster] = token

    def unfence(self, cluster: str) -> None:
        """This process lost `cluster`: its appends still in flight are refused."""
        if cluster in self._tokens:
            self._tokens[cluster] = "lost"  # matches no token a lease hands out

    def _append(self, client: Any, payload: bytes, cluster: str | None) -> Any:
        token = self._tokens.get(cluster) if cluster is not None else None
        if token is None:  # not fenced: one writer (tests), or no lease
            return client.xadd(self.name, {"e": payload}, maxlen=self.maxlen, approximate=True)
        maxlen = "" if self.maxlen is None else str(self.maxlen)
        return client.eval(
            replies.FENCED_APPEND, 2, self.name, self.fences_key, cluster, token, payload, maxlen
        )

    # --- the Outbox protocol -----------------------------------------------------------------

    async def append(self, payload: bytes, *, cluster: str | None = None) -> str:
        loop = asyncio.get_running_loop()
        if self.wait_replicas <= 0 or loop.time() < self._unreplicated_until:
            entry_id = await self._call(self._append(self.redis, payload, cluster))
            return replies.appended(entry_id, cluster)
        # XADD then WAIT on one connection (a pipeline to the stream's node): WAIT counts the
        # replicas that hold every write of *this* connection
        pipe = self.redis.pipeline(transaction=False)
        self._append(pipe, payload, cluster)
        target = {}
        if isinstance(self.redis, RedisCluster):
            await self._call(self.redis.initialize())  # the slot map, once
            target = {"target_nodes": self.redis.get_node_from_key(self.name)}
        wait = Wait(self.wait_replicas, self.wait_timeout_ms, self.wait_ms_per_mib)
        timeout_ms = wait.timeout_ms(len(payload))
        pipe.execute_command("WAIT", self.wait_replicas, timeout_ms, **target)
        entry_id, replicas = await self._call(pipe.execute())
        entry_id = replies.appended(entry_id, cluster)
        if int(replicas) < self.wait_replicas:
            self._unreplicated_until = loop.time() + self.wait_backoff
            log.warning(
                "history outbox: entry %s reached %s of %d replicas within %d ms; appending "
                "without waiting for replicas for %.0fs", replies.entry_id(entry_id), replicas,
                self.wait_replicas, timeout_ms, self.wait_backoff,
            )  # fmt: skip
        return replies.entry_id(entry_id)

    async def holds_lease(self) -> bool:
        held = bool(
            await self._call(
                self._lease(keys=[self.lease_key], args=[self.consumer, self.lease_ms])
            )
        )
        if held and not self._holding:
            self._took_over = True
        self._holding = held
        return held

    async def read(self, count: int, block: float) -> list[tuple[str, bytes]]:
        if not await self.holds_lease():
            await asyncio.sleep(block)  # another process drains; stand by
            return []
        claimed = await self._claim(count)
        if claimed:
            return claimed
        reply = await self._guarded(
            lambda: self.redis.xreadgroup(
                self.group,
                self.consumer,
                {self.name: ">"},
                count=count,
                block=max(1, int(block * 1000)),
            )
        )
        # `>` gives only entries added since the group last read: none of them is deleted yet.
        entries, _ = replies.split(replies.entries(reply))
        return self._hand_out(entries)

    async def pending(self, count: int) -> list[tuple[str, bytes]]:
        """This consumer's entries handed out before and never acknowledged (a restart)."""
        if not await self.holds_lease():
            return []
        while True:
            reply = await self._guarded(
                lambda: self.redis.xreadgroup(
                    self.group, self.consumer, {self.name: "0"}, count=count
                )
            )
            entries, gone = replies.split(replies.entries(reply))
            if gone:  # deleted from the stream (trimmed) but still pending: nothing to replay
                await self.ack(gone)
                if not entries:
                    continue
            return self._hand_out(entries)

    async def _claim(self, count: int) -> list[tuple[str, bytes]]:
        """XAUTOCLAIM entries of other consumers (or this one's from before a restart) not
        handed out by this object: all of them right after the lease was acquired (their
        holder stopped renewing it a whole TTL ago, and they are older than anything `>`
        would give), else those idle for `claim_idle` (a safety net)."""
        min_idle = 0 if self._took_over else self.claim_idle_ms
        self._took_over = False
        claimed: list[tuple[str, bytes]] = []
        start = "0-0"
        while len(claimed) < count:
            reply = await self._guarded(
                lambda start=start: self.redis.xautoclaim(
                    self.name,
                    self.group,
                    self.consumer,
                    min_idle,
                    start_id=start,
                    count=count,
                )
            )
            next_start = reply[0].decode() if isinstance(reply[0], bytes) else str(reply[0])
            entries, gone = replies.split(replies.pairs(reply[1]))
            if len(reply) > 2 and reply[2]:  # Redis 7: ids deleted from the stream
                gone.extend(replies.entry_id(raw) for raw in reply[2])
            if gone:
                await self.ack(gone)
            claimed.extend(e for e in entries if e[0] not in self._handed_out)
            if next_start == "0-0":
                break
            start = next_start
        if claimed:
            log.info("history outbox: %s took over %d pending entries", self.consumer, len(claimed))
        handed = self._hand_out(claimed)
        now = asyncio.get_running_loop().time()
        if min_idle == 0 or claimed or now - self._pruned_at > self.claim_idle_ms / 1000:
            self._pruned_at = now
            await self._remove_dead_consumers()
        return handed

    async def _remove_dead_consumers(self) -> None:
        """XGROUP DELCONSUMER every other consumer with no pending entry left, idle longer
        than `claim_idle`: consumer names are pod names, new on every restart, and the group
        would otherwise keep them forever. One with pending entries stays until they are
        claimed. A consumer removed while it stands by is created again by its next read.
        Housekeeping only: a failure is logged and the claimed entries are still handed out."""
        try:
            removed = await self._call(
                self._prune(keys=[self.name], args=[self.group, self.consumer, self.claim_idle_ms])
            )
        except StoreUnavailable as error:
            log.warning("history outbox: removing dead consumers failed: %s", error)
            return
        if removed:
            log.info(
                "history outbox: %s removed idle consumers %s",
                self.consumer,
                ", ".join(sorted(replies.entry_id(name) for name in removed)),
            )

    def _hand_out(self, entries: list[tuple[str, bytes]]) -> list[tuple[str, bytes]]:
        self._handed_out.update(entry_id for entry_id, _ in entries)
        return entries

    async def ack(self, ids: Sequence[str]) -> None:
        if not ids:
            return
        ids = list(ids)
        pipe = self.redis.pipeline(transaction=True)
        pipe.xack(self.name, self.group, *ids)
        pipe.xdel(self.name, *ids)
        await self._call(pipe.execute())
        self._handed_out.difference_update(ids)

    async def backlog(self) -> int:
        return int(await self._call(self.redis.xlen(self.name)))

    async def pending_count(self) -> int:
        """Entries handed out to some consumer and not yet acknowledged (XPENDING)."""
        summary = await self._guarded(lambda: self.redis.xpending(self.name, self.group))
        return int(summary["pending"])

    async def release(self) -> None:
        """Give the drain lease up at once (a clean shutdown): another drainer takes over
        without waiting for the lease to expire."""
        script = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0"
        await self._call(self.redis.eval(script, 1, self.lease_key, self.consumer))

    async def close(self) -> None:
        await self.redis.aclose()
