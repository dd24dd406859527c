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
* the other sinks (the history outbox) are fenced with the same token (`fence(cluster, token)`
  on every sink that has it, before the reactor starts): the history of a cluster is appended
  only by its holder, so an old holder can never move history's mark of the cluster past what
  a Redis restart or a takeover lost, and the gap the next start records covers it;
* on losing it: the store's token for the cluster becomes one that never matches (and the
  sinks are `unfence`d), so nothing this replica still has in flight can write; then the
  reactor stops. Batches and hooks refused with `Fenced` are dropped (the new holder relists
  and records the gap), never retried. A refusal saying the history outbox lost its entries
  while the lease held (`OutboxFenced.lost`: on a Redis Cluster the outbox's master lost its
  data) makes this replica give the lease up and take the cluster again afresh, so that
  history records the gap;
* a replica that holds no lease for a cluster is ready for it (a standby): readiness says
  whether the clusters THIS replica watches have synced.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from dra_mirror.service.clusters.config import ClusterConnection
from dra_mirror.service.model.changes import Changes
from dra_mirror.service.reactor.cluster import Reactor, ReactorSettings
from dra_mirror.service.reactor.heap import SyncGc, end_after
from dra_mirror.service.stores.lease import LeaseSettings, hold_leases
from dra_mirror.service.stores.protocols import ChangeSink, ClusterStatus, StateSink
from dra_mirror.service.stores.redis import Fenced, RedisStore

log = logging.getLogger(__name__)


class FencedDropped:
    """A sink as a lease holder's reactor hands it batches and hooks (the state store, the
    history outbox): a call refused because the lease moved on (`Fenced`) is dropped, never
    retried (the new holder relists). A refusal that says the history outbox lost its data
    (`lost`) sets `resign`: the holder starts the cluster afresh."""

    def __init__(self, store: Any, cluster: str, *, resign: asyncio.Event | None = None) -> None:
        self.store = store
        self.resign = resign
        self._log = {"cluster": cluster}

    def __repr__(self) -> str:
        return f"{type(self.store).__name__} (fenced)"

    def _refused(self, what: str, error: Fenced) -> None:
        if getattr(error, "lost", False) and self.resign is not None:
            if not self.resign.is_set():
                log.warning("%s refused: %s; starting the cluster afresh", what, error,
                            extra=self._log)  # fmt: skip
            self.resign.set()
            return
        log.info("%s refused: the lease moved on (%s); dropping it", what, error, extra=self._log)

    async def apply(self, changes: Changes) -> None:
        try:
            await self.store.apply(changes)
        except Fenced as error:
            self._refused("write", error)

    async def cluster_started(self, cluster: str, at: str) -> None:
        try:
            await self.store.cluster_started(cluster, at)
        except Fenced as error:
            self._refused("start", error)

    async def record_gap(self, cluster: str, start: str, end: str) -> None:
        try:
            await self.store.record_gap(cluster, start, end)
        except Fenced as error:
            self._refused("gap", error)

    async def cluster_watched(self, cluster: str, until: str) -> None:
        try:
            await self.store.cluster_watched(cluster, until)
        except Fenced as error:
            self._refused("watched mark", error)

    async def set_status(self, status: ClusterStatus) -> None:
        try:
            await self.store.set_status(status)
        except Fenced as error:
            self._refused("status", error)


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
        # set by a sink whose outbox lost its data: the lease is given up and taken afresh
        self._resign = {name: asyncio.Event() for name in self.connections}

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
                resign=self._resign,
            ),
            name="leases",
        )

    async def _acquired(self, cluster: str, token: str) -> None:
        self.store.fence(cluster, token)
        for sink in self.sinks:  # the history outbox appends under the same token
            fence = getattr(sink, "fence", None)
            if fence is not None:
                await fence(cluster, token)
        state = FencedDropped(self.writer, cluster)
        resign = self._resign[cluster]
        others = [FencedDropped(sink, cluster, resign=resign) for sink in self.sinks]
        reactor = Reactor(
            self.connections[cluster],
            index=self.store.open_index(cluster),
            seed_from=self.store,
            sinks=[state, *others],
            status_sink=state,
            settings=self.reactor_settings,
        )
        self._reactors[cluster] = reactor
        reactor.start()
        self._taken.set()

    async def _lost(self, cluster: str) -> None:
        self.store.fence(cluster, "lost")  # matches no fence: nothing in flight can write
        for sink in self.sinks:
            unfence = getattr(sink, "unfence", None)
            if unfence is not None:
                unfence(cluster)
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
