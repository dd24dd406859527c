"""The Redis state store: current state of every cluster, shared by any number of replicas.

`RedisStore.from_url(url, prefix=...)` implements `service.stores.protocols.StateStore` and
answers exactly as the in-memory store does (the same contract tests run against both). The key
layout is in `service.stores.redis_keys` and docs/redis.md. Promises:

* writes: each `apply(changes)` writes what the Changes says — records, the model's derived
  delta, live events — as one `MULTI … EXEC` per cluster (redis_writes.py); the store keeps
  no index. When the store holds a fencing token for the cluster (`fence(cluster, token)`,
  given by the lease), the transaction runs only while that token is the cluster's current
  fence (WATCHed), else `Fenced` is raised; without a token it writes unfenced (one writer,
  e.g. tests);
* a failed or refused write keeps its batch pending and raises (`StoreUnavailable`,
  `Fenced`); the next `apply` writes the pending batches first, in order, in the same
  transaction (the reactor's retry of the same Changes is not written twice). A new fence
  (a new holding of the lease) forgets what an earlier holding left pending;
* `held(cluster)` is what the store holds of a cluster — records, idle marks, and which kinds
  they are complete for — to seed a new writer's index (service.model.index, rule 8), so its
  relists turn what vanished while nobody wrote into ordinary deletes;
* reads (`service.stores.redis_reads.RedisReader`, which this store is) are batched (one round
  trip per call), answer in key order, and sort lists as the in-memory store does; relations
  keyed by uuid or device name answer across clusters;
* every Redis error (refused, reset, timeout, loading, read-only replica) becomes
  `StoreUnavailable`, raised from the original error; nothing else leaves this module;
* `subscribe(cluster, after=)` yields the cluster's live events from its Redis stream, resuming
  after an id a subscriber saw (service.stores.redis_live).

On a Redis Cluster (`redis+cluster://` URLs, `service.stores.redis_connect`) nothing else
changes: a cluster's keys share its `{cluster}` hash tag, so its transaction (fence included)
goes to the master of its slot and is re-routed after a failover (a write that failed there
stays pending, like any other); each transaction is followed by `WAIT 1 …` on its connection
(`wait_replicas`; the timeout grows with the batch: `wait_timeout` plus `wait_per_mib` for
every MiB of the transaction, service.stores.redis_wait): a batch is written once the master's
replica holds it too, so a master
killed right after a write loses nothing its promoted replica should have had (when no
replica answers, writes go on without waiting for `wait_backoff` seconds, logged); live events are the cluster's stream (XADD inside
the transaction, XREAD); reads are pipelines the cluster client splits by node. The one
untagged key, the clusters set, is only ever written outside a transaction.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

from redis.asyncio.cluster import RedisCluster
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff

from dra_mirror.service.diagnostics.cel import rule_selector_matches
from dra_mirror.service.model.changes import Changes, Seed
from dra_mirror.service.model.index import ClusterIndex
from dra_mirror.service.model.kinds import KINDS
from dra_mirror.service.model.records import (
    RESOURCE_CLAIM,
    ObjectKey,
    Record,
    key_of,
)
from dra_mirror.service.model.taint_rules import SelectorMatcher
from dra_mirror.service.model.view import IndexView
from dra_mirror.service.stores import bus, redis_index, redis_live
from dra_mirror.service.stores.protocols import ClusterStatus
from dra_mirror.service.stores.redis_connect import (
    Client,
    connect,
    ping,
)
from dra_mirror.service.stores.redis_keys import (
    DEFAULT_PREFIX,
    LAYOUT,
    clusters_key,
    encode,
    entry_decoder,
    record_decoder,
    split_object_field,
    status_decoder,
)
from dra_mirror.service.stores.redis_reads import RedisReader
from dra_mirror.service.stores.redis_wait import MS_PER_MIB, Wait
from dra_mirror.service.stores.redis_writes import Fenced, Ops, send_batch

__all__ = ["Fenced", "RedisStore"]

log = logging.getLogger(__name__)

SEED_SCAN = 1000  # records read at a time when seeding a new writer's index (HSCAN COUNT)


class RedisStore(RedisReader):
    """See the module docstring."""

    def __init__(
        self,
        client: Client,
        *,
        prefix: str = DEFAULT_PREFIX,
        wait_replicas: int | None = None,
        wait_timeout: float = 0.5,
        wait_per_mib: float = MS_PER_MIB / 1000,
        wait_backoff: float = 30.0,
        selector_matcher: SelectorMatcher = rule_selector_matches,
    ) -> None:
        super().__init__(client, prefix=prefix, matcher=selector_matcher)
        self._selector_matcher = selector_matcher  # DeviceTaintRules' and DeviceClasses' CEL
        cluster = isinstance(client, RedisCluster)
        self.wait_replicas = (1 if cluster else 0) if wait_replicas is None else wait_replicas
        self.wait_ms = max(1, int(wait_timeout * 1000))
        self.wait_ms_per_mib = int(wait_per_mib * 1000)
        self.wait_backoff = wait_backoff
        self._unreplicated_until = float("-inf")  # loop time until which writes do not WAIT
        self._pending: dict[str, list[Changes]] = {}  # batches not written yet, in order
        self._registered: set[str] = set()  # clusters this store added to the clusters set
        self._locks: dict[str, asyncio.Lock] = {}
        self._tokens: dict[str, str] = {}
        self._indexes: dict[str, ClusterIndex] = {}  # the index each writer folds into
        # Clusters whose indexes must be rebuilt before the marker says they are whole: the
        # index keys to drop first (service.stores.redis_index).
        self._rebuild: dict[str, list[str]] = {}

    @classmethod
    def from_url(cls, url: str, *, prefix: str = DEFAULT_PREFIX, **options: Any) -> RedisStore:
        options.setdefault("socket_connect_timeout", 2.0)
        options.setdefault("socket_timeout", 30.0)
        options.setdefault("retry", Retry(ExponentialBackoff(cap=0.5, base=0.05), 2))
        options.setdefault("health_check_interval", 10)
        return cls(connect(url, **options), prefix=prefix)

    def _lock(self, cluster: str) -> asyncio.Lock:
        return self._locks.setdefault(cluster, asyncio.Lock())

    # --- fencing and seeding (service.stores.lease, service.reactor.leased) -------------------

    def fence(self, cluster: str, token: str) -> None:
        """Write `cluster` only while `token` is its fence; forget what an earlier holding left
        pending (the new holder relists)."""
        self._tokens[cluster] = token
        self._pending.pop(cluster, None)
        self._rebuild.pop(cluster, None)

    async def held(self, cluster: str) -> Seed:
        """What the store holds of `cluster`, to seed a new writer's index: every record, the
        idle marks, the kinds those records are complete for (every kind once the cluster
        was reported synced; else the kinds with records, each first written as one batch),
        and the uuids of held devices no slice publishes. Records are read `SEED_SCAN` at a
        time (HSCAN) and decoded as they come: the raw values of a large cluster are never
        held at once. Nobody writes the cluster meanwhile (the earlier holder is fenced)."""
        keys = self.keys(cluster)
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.sadd(clusters_key(self.prefix), cluster)
            pipe.get(keys.status)
            pipe.hgetall(keys.idle)
            pipe.hvals(keys.unpublished)
            pipe.get(keys.layout)
            pipe.smembers(keys.classes)
            _, status, idle, unpublished, layout, classes = await self._call(pipe.execute())
        self._registered.add(cluster)
        self._names = None
        if layout != LAYOUT + b":" + self._tokens.get(cluster, "").encode():
            # Written by an older writer (or by another since): the indexes are rebuilt from
            # the seeded index at the first write (docs/redis.md, "Upgrades").
            names = [c.decode() for c in classes]
            self._rebuild[cluster] = redis_index.index_keys(keys, names)
        records: list[Record] = []
        for kind in KINDS:
            found: dict[Any, Record] = {}  # HSCAN may return a field twice
            cursor = 0
            while True:
                cursor, page = await self._call(
                    self.redis.hscan(keys.objects(kind), cursor, count=SEED_SCAN)
                )
                assert isinstance(page, dict)  # field -> value, without no_values
                found.update((f, record_decoder.decode(raw)) for f, raw in page.items())  # type: ignore[arg-type]
                del page
                if not cursor:
                    break
            records.extend(found.values())
        synced = status is not None and status_decoder.decode(status).synced
        listed = frozenset(KINDS) if synced else frozenset(key_of(r).kind for r in records)
        marks = {}
        for field, since in idle.items():
            namespace, name = split_object_field(field)
            marks[ObjectKey(cluster, RESOURCE_CLAIM, namespace, name)] = since.decode()
        held = (entry_decoder.decode(raw) for raw in unpublished)
        uuids = {e.key: e.device.uuid for e in held if e.device.uuid}
        return Seed(records, marks, listed, uuids)

    # --- StateWriter --------------------------------------------------------------------------

    def open_index(self, cluster: str) -> ClusterIndex:
        """A fresh index: this store persists the Changes of its writer (with the classes
        each device is in: the readers' class filter), not the index. It is read once, to
        rebuild the indexes of a cluster an older writer wrote (`held`)."""
        index = ClusterIndex(cluster, selector_matcher=self._selector_matcher, class_members=True)
        self._indexes[cluster] = index
        return index

    async def apply(self, changes: Changes) -> None:
        cluster = changes.cluster
        async with self._lock(cluster):
            pending = self._pending.setdefault(cluster, [])
            if not pending or pending[-1] is not changes:  # a retry of the same batch: once
                pending.append(changes)
            await self._flush(cluster)

    async def cluster_started(self, cluster: str, at: str) -> None:
        """Nothing to do: the state of a cluster has no history."""

    async def record_gap(self, cluster: str, start: str, end: str) -> None:
        """Nothing to do: the state of a cluster has no history."""

    async def cluster_watched(self, cluster: str, until: str) -> None:
        """Nothing to do: the state of a cluster has no history."""

    async def set_status(self, status: ClusterStatus) -> None:
        async with self._lock(status.name):
            await self._flush(status.name, status=encode(status))

    async def _flush(self, cluster: str, *, status: bytes | None = None) -> None:
        pending = self._pending.get(cluster) or []
        if not pending and status is None:
            return
        if cluster not in self._registered:
            # The untagged clusters set lives in another slot: not part of the transaction.
            await self._call(self.redis.sadd(clusters_key(self.prefix), cluster))
            self._registered.add(cluster)
            self._names = None  # its own lookups find the cluster at once
        keys = self.keys(cluster)
        ops = Ops(keys)
        token = self._tokens.get(cluster, "")
        rebuild = self._rebuild.get(cluster)
        index = self._indexes.get(cluster)
        if rebuild is not None and index is not None:
            ops.rebuild(redis_index.snapshot(index, index.members), rebuild)
        for changes in pending:
            ops.batch(changes)
        if status is not None:
            ops.add(b"SET", keys.status, [status])
        if rebuild is None or index is not None:  # the indexes are whole once this is written
            ops.add(b"SET", keys.layout, [LAYOUT + b":" + token.encode()])
        loop = asyncio.get_running_loop()
        wait = None
        if self.wait_replicas > 0 and loop.time() >= self._unreplicated_until:
            wait = Wait(self.wait_replicas, self.wait_ms, self.wait_ms_per_mib)
        replicas = await self._call(send_batch(self.redis, token, ops, wait=wait))
        if rebuild is not None and index is not None:
            log.info("state store: the indexes of %s rebuilt (key layout %s)", cluster,
                     LAYOUT.decode())  # fmt: skip
            self._rebuild.pop(cluster, None)
        if replicas is not None and replicas < self.wait_replicas:
            self._unreplicated_until = loop.time() + self.wait_backoff
            log.warning(
                "state store: a batch of %s reached %d of %d replicas within its timeout "
                "(%d ms and %d ms a MiB); writing without waiting for replicas for %.0fs",
                cluster, replicas, self.wait_replicas, self.wait_ms, self.wait_ms_per_mib,
                self.wait_backoff,
            )  # fmt: skip
        self._pending.pop(cluster, None)

    # --- live ---------------------------------------------------------------------------------

    def index(self, cluster: str) -> IndexView | None:
        """None: the state lives in Redis, not in this process."""
        return None

    async def subscribe(
        self, cluster: str, *, after: str | None = None
    ) -> AsyncIterator[bus.Delivery]:
        """The cluster's live events from now on, or from just after `after` (the cluster's
        Redis stream, see service.stores.redis_live)."""
        key = self.keys(cluster).events
        async for delivery in redis_live.deliveries(
            self.redis, key, cluster, self._call, after=after
        ):
            yield delivery

    async def ping(self) -> None:
        await self._call(ping(self.redis))

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            await self.redis.aclose()
