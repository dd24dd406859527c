"""Watching every cluster of a kubeconfig into a state store: the one place that decides how.

`watch_clusters(kubeconfig, contexts, store=..., sinks=...)` connects to every cluster
(kubeconfig contexts, or in-cluster) and starts their reactors, feeding the state store first
and then each extra sink (the history outbox), in that order. How depends on the store's type:

* `MemoryStore` — one reactor per cluster (`run_reactors`), each folding into the index the
  store opened for it (`open_index`): the store serves that very index;
* `RedisStore` — shared by replicas: each cluster is watched only under its lease, writes are
  fenced with the lease's token, and each new holder's index is seeded with what Redis holds
  (`watch_leased`, `lease` is its `LeaseSettings`).

`transitions=False` (no sink records history) lets the in-memory store's indexes derive no
transitions: they are history's alone, and an initial sync of 5,000 nodes would build ~160,000
of them (with each device's attributes as JSON) only to drop them.

`writer` is the store as the reactors write it (e.g. timed by the app's metrics); it must be
that same store. `settings` are the reactors' (`reactor_settings(Settings)`: the watch's
bookmark interval and stall rule come from the command's settings). The result,
`WatchedClusters`, is the app's `Watchers`; `stop()` stops the reactors, then closes the
connections.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from dra_mirror.service.clusters.config import ClusterConnection, close_all, connect
from dra_mirror.service.clusters.watching import WatchSettings
from dra_mirror.service.reactor.cluster import Reactor, ReactorSettings
from dra_mirror.service.reactor.reactor import Reactors, run_reactors
from dra_mirror.service.settings import Settings
from dra_mirror.service.stores.memory import MemoryStore
from dra_mirror.service.stores.protocols import ChangeSink, StateSink

if TYPE_CHECKING:  # the Redis client and the leases load only for a RedisStore
    from dra_mirror.service.reactor.leased import LeasedReactors
    from dra_mirror.service.stores.lease import LeaseSettings
    from dra_mirror.service.stores.redis import RedisStore


class WatchedClusters:
    """The reactors of every cluster plus the API connections they use; `stop` ends both
    (and `after_sync`, a task the caller started to run once every cluster synced)."""

    def __init__(
        self, reactors: Reactors | LeasedReactors, connections: Sequence[ClusterConnection]
    ) -> None:
        self.reactors = reactors
        self.connections = connections
        self.after_sync: asyncio.Task[None] | None = None
        # what runs beside the reactors (the alert engine), stopped first
        self.also_stop: list[Callable[[], Awaitable[None]]] = []

    @property
    def clusters(self) -> list[str]:
        return self.reactors.clusters

    @property
    def ready(self) -> bool:
        return self.reactors.ready

    def not_ready(self) -> list[str]:
        return self.reactors.not_ready()

    @property
    def by_name(self) -> Mapping[str, Reactor]:
        return self.reactors.by_name

    async def wait_synced(self) -> None:
        await self.reactors.wait_synced()

    async def stop(self) -> None:
        for stop in self.also_stop:
            await stop()
        if self.after_sync is not None:
            self.after_sync.cancel()
            await asyncio.gather(self.after_sync, return_exceptions=True)
        try:
            await self.reactors.stop()
        finally:
            await close_all(self.connections)


async def watch_clusters(
    kubeconfig: str | None,
    contexts: Sequence[str],
    *,
    store: MemoryStore | RedisStore,
    writer: StateSink | None = None,
    sinks: Sequence[ChangeSink] = (),
    lease: LeaseSettings | None = None,
    transitions: bool = True,
    settings: ReactorSettings | None = None,
) -> WatchedClusters:
    """See the module docstring."""
    connections = await connect(kubeconfig, list(contexts) or None)
    state = writer if writer is not None else store
    reactors: Reactors | LeasedReactors
    try:
        if isinstance(store, MemoryStore):
            reactors = await run_reactors(
                connections,
                sinks=[state, *sinks],
                status_sink=state,
                open_index=functools.partial(store.open_index, transitions=transitions),
                settings=settings,
            )
        else:  # a RedisStore, shared by replicas: one watcher per cluster
            from dra_mirror.service.reactor.leased import watch_leased

            reactors = watch_leased(
                connections,
                store=store,
                writer=state,
                sinks=sinks,
                lease_settings=lease,
                reactor_settings=settings,
            )
    except BaseException:
        await close_all(connections)
        raise
    return WatchedClusters(reactors, connections)


def reactor_settings(settings: Settings) -> ReactorSettings:
    """The reactors' settings from the command's: the watch's bookmark interval and stall rule,
    and the idle grace of a starting consumer pod."""
    clusters = settings.clusters
    watch = WatchSettings(
        bookmark_interval=clusters.bookmark_interval, stall_intervals=clusters.stall_intervals
    )
    return ReactorSettings(watch=watch, idle_grace=clusters.idle_grace)
