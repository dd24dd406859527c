"""Watchers under leases: this replica runs a cluster's reactor only while it holds its lease.

`watch_leased(connections, store=RedisStore, sinks=...)` starts `hold_leases` (service.stores.
lease) for every cluster and returns a `LeasedReactors` group the app treats like
`service.reactor.Reactors` (ready / not_ready / wait_synced / stop / by_name). It takes the
Redis store by its own type: leases and fencing tokens are that store's capability, so the
composition root that built it is the one place that decides on leased watching. Promises:

* on taking a cluster's lease: the store is given the fencing token (`store.fence`), and a
  FRESH reactor starts: a new index, seeded with what the store holds of the cluster
  (`store.held`: an earlier holder's records and idle marks), that lists every kind — so after
  a takeover its relists turn what vanished meanwhile into deletes; after a Redis restart the
  store holds nothing and the cluster is rebuilt from the lists;
* on losing it: the store's token for the cluster becomes one that never matches, so nothing
  this replica still has in flight can write; then the reactor stops. Batches refused with
  `Fenced` are dropped (the new holder relists), never retried;
* a replica that holds no lease for a cluster is ready for it (a standby): readiness says
  whether the clusters THIS replica watches have synced.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping, Sequence

from dra_mirror.service.clusters.config import ClusterConnection
from dra_mirror.service.model.changes import Changes
from dra_mirror.service.reactor.cluster import Reactor, ReactorSettings
from dra_mirror.service.reactor.heap import SyncGc, end_after
from dra_mirror.service.stores.lease import LeaseSettings, hold_leases
from dra_mirror.service.stores.protocols import ChangeSink, ClusterStatus, StateSink
from dra_mirror.service.stores.redis import Fenced, RedisStore

log = logging.getLogger(__name__)


class FencedDropped:
    """The state store as a lease holder's reactor writes it: a write refused because the
    lease moved on (`Fenced`) is dropped, never retried (the new holder relists)."""

    def __init__(self, store: StateSink, cluster: str) -> None:
        self.store = store
        self._log = {"cluster": cluster}

    async def apply(self, changes: Changes) -> None:
        try:
            await self.store.apply(changes)
        except Fenced:
            log.info("write refused: the lease moved on; dropping it", extra=self._log)

    async def cluster_started(self, cluster: str, at: str) -> None:
        await self.store.cluster_started(cluster, at)

    async def record_gap(self, cluster: str, start: str, end: str) -> None:
        await self.store.record_gap(cluster, start, end)

    async def cluster_watched(self, cluster: str, until: str) -> None:
        await self.store.cluster_watched(cluster, until)

    async def set_status(self, status: ClusterStatus) -> None:
        try:
            await self.store.set_status(status)
        except Fenced:
            log.info("status refused: the lease moved on; dropping it", extra=self._log)


class LeasedReactors:
    """The reactors of the clusters whose leases this replica holds; see the module docstring."""

    def __init__(
        self,
        connections: Sequence[ClusterConnection],
        *,
        store: RedisStore,
        writer: StateSink | None = None,
        sinks: Sequence[ChangeSink] = (),
        lease_settings: LeaseSettings | None = None,
        reactor_settings: ReactorSettings | None = None,
        holder: str | None = None,
    ) -> None:
        self.connections = {c.name: c for c in connections}
        self.store = store
        self.writer = writer or store  # the store as the reactors write it (e.g. timed)
        self.sinks = list(sinks)
        self.lease_settings = lease_settings or LeaseSettings()
        self.reactor_settings = reactor_settings
        self.holder = holder
        self._reactors: dict[str, Reactor] = {}
        self._task: asyncio.Task[None] | None = None
        self._taken = asyncio.Event()
        self._gc_task: asyncio.Task[None] | None = None

    def start(self) -> None:
        # As run_reactors does: a raised GC threshold until this replica's clusters synced.
        sync_gc = SyncGc()
        self._gc_task = asyncio.create_task(self._end_sync_gc(sync_gc), name="leases gc")
        self._task = asyncio.create_task(
            hold_leases(
                self.store,
                list(self.connections),
                on_acquired=self._acquired,
                on_lost=self._lost,
                settings=self.lease_settings,
                holder=self.holder,
            ),
            name="leases",
        )

    async def _acquired(self, cluster: str, token: str) -> None:
        self.store.fence(cluster, token)
        state = FencedDropped(self.writer, cluster)
        reactor = Reactor(
            self.connections[cluster],
            index=self.store.open_index(cluster),
            seed_from=self.store,
            sinks=[state, *self.sinks],
            status_sink=state,
            settings=self.reactor_settings,
        )
        self._reactors[cluster] = reactor
        reactor.start()
        self._taken.set()

    async def _lost(self, cluster: str) -> None:
        self.store.fence(cluster, "lost")  # matches no fence: nothing in flight can write
        reactor = self._reactors.pop(cluster, None)
        if reactor is not None:
            await reactor.stop()

    async def _end_sync_gc(self, sync_gc: SyncGc) -> None:
        await end_after(sync_gc, self.wait_synced())

    @property
    def by_name(self) -> Mapping[str, Reactor]:
        """The reactors of the clusters whose leases this replica holds now."""
        return self._reactors

    @property
    def clusters(self) -> list[str]:
        """Every cluster this replica may watch (whether it holds its lease now or not)."""
        return sorted(self.connections)

    def holding(self) -> list[str]:
        return sorted(self._reactors)

    @property
    def ready(self) -> bool:
        return all(r.synced.is_set() for r in list(self.by_name.values()))

    def not_ready(self) -> list[str]:
        return [
            f"{name}: not synced (holding its lease)"
            for name, reactor in sorted(self.by_name.items())
            if not reactor.synced.is_set()
        ]

    async def wait_synced(self) -> None:
        """Return once this replica holds a lease and its reactors have synced."""
        while True:
            reactors = list(self.by_name.values())
            if not reactors:
                self._taken.clear()
                await self._taken.wait()
                continue
            await asyncio.gather(*(r.synced.wait() for r in reactors))
            if self.by_name and self.ready:
                return

    async def stop(self) -> None:
        """Stop the reactors while still holding their leases (their last batches land), then
        release the leases so a successor takes over at once."""
        reactors = list(self._reactors.values())
        self._reactors.clear()
        await asyncio.gather(*(r.stop() for r in reactors), return_exceptions=True)
        for task in (self._task, self._gc_task):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        self._task = self._gc_task = None


def watch_leased(
    connections: Sequence[ClusterConnection],
    *,
    store: RedisStore,
    writer: StateSink | None = None,
    sinks: Sequence[ChangeSink] = (),
    lease_settings: LeaseSettings | None = None,
    reactor_settings: ReactorSettings | None = None,
) -> LeasedReactors:
    """`writer`: the store as the reactors write it (the store itself by default)."""
    group = LeasedReactors(
        connections,
        store=store,
        writer=writer,
        sinks=sinks,
        lease_settings=lease_settings,
        reactor_settings=reactor_settings,
    )
    group.start()
    return group
