"""Watchers under leases: this replica runs a cluster's reactor only while it holds its lease.

`watch_leased(connections, store=RedisStore, sinks=...)` starts `hold_leases` (service.stores.
lease) for every cluster and returns a `LeasedReactors` group the app treats like
`service.reactor.Reactors` (ready / not_ready / wait_synced / stop). Promises:

* on taking a cluster's lease: the store is given the fencing token (`store.fence`), and a
  FRESH reactor starts (a new index, so it lists every kind: after a takeover or a Redis
  restart the cluster is rebuilt from a relist, and the store sweeps what vanished);
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
from collections.abc import Sequence
from typing import Any

from dra_mirror.service.reactor.heap import SyncGc
from dra_mirror.service.reactor.reactor import Reactor, ReactorSettings
from dra_mirror.service.stores.lease import LeaseSettings, hold_leases
from dra_mirror.service.stores.redis import Fenced, RedisStore

log = logging.getLogger(__name__)


def _fenced_ok(sink: Any, cluster: str) -> Any:
    async def deliver(value: Any) -> None:
        try:
            await sink(value)
        except Fenced:
            log.info("write refused: the lease moved on; dropping it", extra={"cluster": cluster})

    return deliver


class LeasedReactors:
    """The reactors of the clusters whose leases this replica holds; see the module docstring."""

    def __init__(
        self,
        connections: Sequence[Any],
        *,
        store: RedisStore,
        sinks: Sequence[Any] = (),
        lease_settings: LeaseSettings | None = None,
        reactor_settings: ReactorSettings | None = None,
        holder: str | None = None,
    ) -> None:
        self.connections = {c.name: c for c in connections}
        self.store = store
        self.sinks = list(sinks)
        self.lease_settings = lease_settings or LeaseSettings()
        self.reactor_settings = reactor_settings
        self.holder = holder
        self.by_name: dict[str, Reactor] = {}
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
        reactor = Reactor(
            self.connections[cluster],
            sinks=[_fenced_ok(self.store.apply, cluster), *self.sinks],
            status_sink=_fenced_ok(self.store.set_status, cluster),
            settings=self.reactor_settings,
        )
        self.by_name[cluster] = reactor
        reactor.start()
        self._taken.set()

    async def _lost(self, cluster: str) -> None:
        self.store.fence(cluster, "lost")  # matches no fence: nothing in flight can write
        reactor = self.by_name.pop(cluster, None)
        if reactor is not None:
            await reactor.stop()

    async def _end_sync_gc(self, sync_gc: SyncGc) -> None:
        try:
            await self.wait_synced()
        except asyncio.CancelledError:
            sync_gc.done(freeze=False)
            raise
        sync_gc.done()

    def holding(self) -> list[str]:
        return sorted(self.by_name)

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
        reactors = list(self.by_name.values())
        self.by_name.clear()
        await asyncio.gather(*(r.stop() for r in reactors), return_exceptions=True)
        for task in (self._task, self._gc_task):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        self._task = self._gc_task = None


def watch_leased(
    connections: Sequence[Any],
    *,
    store: RedisStore,
    sinks: Sequence[Any] = (),
    lease_settings: LeaseSettings | None = None,
) -> LeasedReactors:
    group = LeasedReactors(connections, store=store, sinks=sinks, lease_settings=lease_settings)
    group.start()
    return group
