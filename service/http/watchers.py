"""What the app needs of the watchers the runtime hands it (`AppState.reactors`).

`Watchers` is satisfied by `service.reactor.Reactors` (every cluster of the process), by
`service.reactor.leased.LeasedReactors` (the clusters whose leases this replica holds) and
by the runtime's `WatchedClusters` around either: the clusters they are configured for and
the statuses of those they watch now for `/readyz`, a clean stop for the lifespan, and the
reactors by cluster name for `/metrics` (each cluster's status and failed attempts, and its
index — what it writes to the state store — for the DRA series).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from dra_mirror.service.model.view import IndexView
from dra_mirror.service.stores.protocols import ClusterStatus


class WatchedCluster(Protocol):
    @property
    def status(self) -> ClusterStatus: ...

    @property
    def errors(self) -> Mapping[str, int]:
        """Failed list/watch attempts by kind."""
        ...

    @property
    def index(self) -> IndexView: ...


class Watchers(Protocol):
    @property
    def clusters(self) -> Sequence[str]:
        """Every cluster these watchers are configured to watch (held now or not)."""
        ...

    @property
    def ready(self) -> bool:
        """Every cluster these watchers watch has synced once."""
        ...

    def not_ready(self) -> list[str]:
        """Why not ready: one line per cluster not synced yet."""
        ...

    @property
    def by_name(self) -> Mapping[str, WatchedCluster]: ...

    async def stop(self) -> None: ...
