"""One simulated cluster as the HTTP layer serves it: store, versions, faults, wake-ups.

`ServedCluster` bundles what every request handler of one cluster needs. Its `Notifier`
turns the store's synchronous change callbacks into an awaitable for watch streams: a
stream takes `notifier.waiter()` *before* reading the event log, so a change that lands
between the read and the wait still wakes it. The store must be changed from the event
loop's thread (the world half runs in the same loop).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from dra_mirror.service.model.kinds import (
    BY_KIND,
    BY_PLURAL,
    DRA_GROUP,
    DRA_VERSIONS,
    OPTIONAL,
    newest_first,
)
from dra_mirror.service.sim.discovery import ordered
from dra_mirror.service.sim.errors import ApiError
from dra_mirror.service.sim.faults import Faults
from dra_mirror.service.sim.garbage import GarbageCollector
from dra_mirror.service.sim.rbac import Access
from dra_mirror.service.sim.store import ClusterStore


class Notifier:
    """Wakes every waiting watch stream after a change."""

    def __init__(self) -> None:
        self._event = asyncio.Event()

    def wake(self) -> None:
        event, self._event = self._event, asyncio.Event()
        event.set()

    def waiter(self) -> asyncio.Event:
        return self._event


@dataclass
class ServedCluster:
    """A store plus how it is served."""

    store: ClusterStore
    versions: tuple[str, ...] = DRA_VERSIONS
    # The Kubernetes minor version: /version reports it (35 when None) and, when given, the
    # versions 1.<kubernetes> has of each optional kind (`kinds.OPTIONAL`) are served (none
    # when None, as an alpha or beta API switched off).
    kubernetes: int | None = None
    # optional kind -> the versions of it served; a kind not named: those of `kubernetes`
    optional_versions: dict[str, tuple[str, ...]] = field(default_factory=dict)
    faults: Faults = field(default_factory=Faults)
    bookmark_interval: float = 60.0  # kube-apiserver sends bookmarks about once a minute
    default_watch_timeout: float = 1800.0  # --min-request-timeout
    notifier: Notifier = field(default_factory=Notifier)
    namespace_purge_delay: float = 0.2  # Terminating -> gone
    closing: bool = False
    drops: int = 0  # `dropWatches` actions so far: a stream ends when this moves
    open_watches: int = 0
    requests: int = 0
    port: int = 0
    access: Access = field(default_factory=Access)  # tokens and RBAC (rbac.py)

    def __post_init__(self) -> None:
        unknown = set(self.versions) - set(DRA_VERSIONS)
        if unknown:
            raise ValueError(f"unknown resource.k8s.io versions {sorted(unknown)}")
        self.versions = tuple(ordered(self.versions))
        unknown = self.optional_versions.keys() - OPTIONAL
        if unknown:
            raise ValueError(f"not optional kinds: {sorted(unknown)}")
        minor = self.kubernetes
        for kind in sorted(OPTIONAL):
            served = self.optional_versions.get(kind)
            if served is None:
                served = BY_KIND[kind].versions_at(minor) if minor is not None else ()
            self.optional_versions[kind] = tuple(newest_first(served))
        self.store.add_waker(self.notifier.wake)
        self.store.add_listener(self._namespace_controller)
        self.garbage = GarbageCollector(self.store)

    def _namespace_controller(self, event_type: str, plural: str, obj: dict) -> None:
        """Finish deleting a Terminating namespace shortly after, as kube-controller-manager
        does (so `kubectl delete -f` can still delete the namespace's objects one by one)."""
        if plural != "namespaces" or event_type != "MODIFIED":
            return
        if not obj["metadata"].get("deletionTimestamp"):
            return
        name = obj["metadata"]["name"]
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.store.purge_namespace(name)
            return
        loop.call_later(self.namespace_purge_delay, self.store.purge_namespace, name)

    @property
    def name(self) -> str:
        return self.store.name

    def served_versions(self, group: str = DRA_GROUP) -> list[str]:
        """Every version of `group` some kind is served at, newest first."""
        hidden = self.faults.hidden_versions() if group == DRA_GROUP else set()
        own = {v for kind, versions in self.optional_versions.items()
               if BY_KIND[kind].group == group for v in versions}  # fmt: skip
        dra = set(self.versions) if group == DRA_GROUP else set()
        return [v for v in newest_first(dra | own) if v not in hidden]

    def served_groups(self) -> dict[str, list[str]]:
        """Every API group other than the core one with a version served: its versions."""
        groups = {DRA_GROUP} | {BY_KIND[kind].group for kind in self.optional_versions}
        found = {group: self.served_versions(group) for group in sorted(groups)}
        return {group: versions for group, versions in found.items() if versions}

    def serves(self, plural: str, version: str) -> bool:
        """Whether resource.k8s.io/<version> serves `plural` (an optional kind at the versions
        of its own it is served at; the other kinds at every version of `versions`)."""
        resource = BY_PLURAL[plural]
        if resource.is_dra and version in self.faults.hidden_versions():
            return False
        if resource.optional:
            return version in self.optional_versions.get(resource.kind, ())
        return version in self.versions

    def check_version(self, version: str, group: str = DRA_GROUP) -> None:
        if version not in self.served_versions(group):
            raise ApiError(
                404,
                "NotFound",
                f"the server could not find the requested resource ({group}/{version})",
            )

    def apply_faults(self, changes: dict[str, Any]) -> None:
        """Merge fault settings; perform a requested restart or watch drop at once."""
        restart = self.faults.update(changes)
        if restart:
            self.store.restart(base=int(restart.get("base", 1)))
        if changes.get("dropWatches"):
            self.drops += 1
            self.notifier.wake()

    def close(self) -> None:
        """End every open watch (server shutdown)."""
        self.closing = True
        self.notifier.wake()

    def status(self) -> dict[str, Any]:
        store = self.store
        return {
            "cluster": store.name,
            "port": self.port,
            "resourceVersion": str(store.resource_version),
            "oldestWatchableResourceVersion": str(store.floor),
            "restarts": store.epoch,
            "versions": self.served_versions(),
            "counts": {plural: store.count(plural) for plural in BY_PLURAL},
            "openWatches": self.open_watches,
            "requests": self.requests,
            "faults": self.faults.settings,
        }
