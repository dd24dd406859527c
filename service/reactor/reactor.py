"""The reactors of every cluster: start them, wait for their first sync, stop them cleanly.

`run_reactors(connections, sinks=..., status_sink=..., open_index=...)` starts one `Reactor`
(service.reactor.cluster) per connection and returns a `Reactors` group: await
`wait_synced()` (or read `ready`/`not_ready()` for /readyz), then `stop()` (cancels the
watches, then applies what was already received). `open_index(cluster)` says which index each
cluster's reactor folds into: the in-memory store's `open_index` (it serves that very index),
or a fresh `ClusterIndex` by default. While the clusters sync the garbage collector runs with
a raised threshold (`SyncGc`, unless `tune_gc=False`).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Iterator, Mapping, Sequence

from dra_mirror.service.clusters.config import ClusterConnection
from dra_mirror.service.model.index import ClusterIndex
from dra_mirror.service.reactor.clock import Clock, Sleep, utc_now
from dra_mirror.service.reactor.cluster import Reactor, ReactorSettings
from dra_mirror.service.reactor.heap import SyncGc, end_after
from dra_mirror.service.stores.protocols import ChangeSink, ClusterStatus, StatusSink

__all__ = ["Reactor", "ReactorSettings", "Reactors", "run_reactors"]


class Reactors:
    """The reactors of every cluster: readiness, statuses and a clean stop."""

    def __init__(self, reactors: Sequence[Reactor], *, sync_gc: SyncGc | None = None) -> None:
        self.by_name: Mapping[str, Reactor] = {reactor.name: reactor for reactor in reactors}
        self._sync_gc = sync_gc
        self._gc_waiter: asyncio.Task[None] | None = None
        if sync_gc is not None:
            self._gc_waiter = asyncio.create_task(self._end_sync_gc(), name="reactors gc")

    async def _end_sync_gc(self) -> None:
        assert self._sync_gc is not None
        await end_after(self._sync_gc, self.wait_synced())

    def __iter__(self) -> Iterator[Reactor]:
        return iter(self.by_name.values())

    @property
    def clusters(self) -> list[str]:
        """Every cluster of the group."""
        return sorted(self.by_name)

    @property
    def ready(self) -> bool:
        """Every cluster synced once (for /readyz)."""
        return all(r.synced.is_set() for r in self.by_name.values())

    def not_ready(self) -> list[str]:
        """Why not ready: one line per cluster that has not synced yet."""
        reasons = []
        for reactor in self.by_name.values():
            if reactor.synced.is_set():
                continue
            waiting = [k for k in reactor.kinds if k not in reactor.listed]
            detail = f"; error: {reactor.status.error}" if reactor.status.error else ""
            reasons.append(f"{reactor.name}: not synced (waiting for {', '.join(waiting)}){detail}")
        return reasons

    def statuses(self) -> list[ClusterStatus]:
        return [reactor.status for reactor in self.by_name.values()]

    async def wait_synced(self) -> None:
        """Return once every cluster has synced once."""
        await asyncio.gather(*(r.synced.wait() for r in self.by_name.values()))

    async def stop(self) -> None:
        if self._gc_waiter is not None:
            self._gc_waiter.cancel()
            await asyncio.gather(self._gc_waiter, return_exceptions=True)
        if self._sync_gc is not None:
            # a waiter cancelled before it first ran never reaches its own clean-up
            self._sync_gc.done(freeze=False)
        await asyncio.gather(*(reactor.stop() for reactor in self.by_name.values()))

    async def __aenter__(self) -> Reactors:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()


async def run_reactors(
    connections: Sequence[ClusterConnection],
    *,
    sinks: Sequence[ChangeSink],
    status_sink: StatusSink,
    open_index: Callable[[str], ClusterIndex] = ClusterIndex,
    settings: ReactorSettings | None = None,
    clock: Clock = utc_now,
    sleep: Sleep = asyncio.sleep,
    rng: random.Random | None = None,
    tune_gc: bool = True,
) -> Reactors:
    """Start one reactor per cluster and return them (stop them with `await reactors.stop()`,
    or use the result as an async context manager). `tune_gc`: see `SyncGc`."""
    reactors = [
        Reactor(
            connection,
            index=open_index(connection.name),
            sinks=sinks,
            status_sink=status_sink,
            settings=settings,
            clock=clock,
            sleep=sleep,
            rng=rng,
        )
        for connection in connections
    ]
    sync_gc = SyncGc() if tune_gc else None
    for reactor in reactors:
        await reactor.push_status(force=True)
        reactor.start()
    return Reactors(reactors, sync_gc=sync_gc)
