"""The in-memory state store (embedded default): the reactors' own indexes, read in place.

It implements `service.stores.protocols.StateStore` and promises:

* it keeps no index of its own: `open_index(cluster)` makes the cluster's `ClusterIndex`, the
  one the cluster's reactor folds its events into, and readers read that very index (through
  `index(cluster)`, typed read-only). Records, reverse maps, device statuses and idle marks
  are there exactly as the model derived them — nothing is derived or stored again here;
* `apply(changes)` only publishes the batch's live events (`Changes.events`) on the
  in-process bus, once the batch is visible: the reactor folded it before handing it out;
* a reader never sees a half-applied batch: the index folds a batch without awaiting;
* every read is batched (one call per DataLoader batch) and answers in the order of its keys;
  lists come sorted by key, so Relay cursors over them are stable: they are read-only
  sequences over the order each index keeps (service.model.ordering), so that a page of one
  costs the page, and they keep showing the state of the moment they were asked;
* keys may arrive as plain tuples or lists (e.g. decoded from a GraphQL cursor);
* relations keyed by uuid or device name answer across clusters, the others within the
  cluster named by the key's first element;
* `subscribe(cluster, after=)` yields the cluster's live events from now on, or from just after
  the id a subscriber last saw (service.stores.bus).
"""

from __future__ import annotations

import builtins
from collections.abc import AsyncIterator, Hashable, Sequence
from heapq import merge
from typing import Any

from msgspec.structs import replace

from dra_mirror.service.diagnostics.cel import rule_selector_matches
from dra_mirror.service.model.changes import Changes
from dra_mirror.service.model.index import ClusterIndex
from dra_mirror.service.model.ordering import Chained, bisect_left
from dra_mirror.service.model.records import DeviceEntry, DeviceKey, ObjectKey, Record
from dra_mirror.service.model.relations import ACROSS_CLUSTERS, Relation
from dra_mirror.service.model.taint_rules import SelectorMatcher
from dra_mirror.service.model.view import IndexView
from dra_mirror.service.stores.bus import Delivery, InProcessBus
from dra_mirror.service.stores.protocols import (
    DEVICES,
    ClusterStatus,
    Page,
    Selection,
    UuidHolders,
    composed_holders,
)
from dra_mirror.service.stores.selecting import entry_key, page_of, record_key, selected


def _as_key(key: Any) -> Any:
    return tuple(key) if isinstance(key, list) else key


class MemoryStore:
    """Current state of every cluster, in this process."""

    def __init__(
        self,
        *,
        live: InProcessBus | None = None,
        selector_matcher: SelectorMatcher = rule_selector_matches,
    ) -> None:
        """`selector_matcher`: the CEL of 1.33/1.34 DeviceTaintRules (service.model.taint_rules)."""
        self._selector_matcher = selector_matcher
        self._indexes: dict[str, ClusterIndex] = {}
        self._statuses: dict[str, ClusterStatus] = {}
        self.live = live or InProcessBus()

    def open_index(self, cluster: str, *, transitions: bool = True) -> ClusterIndex:
        """A fresh index for `cluster`, served from now on: the writer (the cluster's reactor)
        folds its events into it; it replaces what an earlier writer of this process left.
        `transitions=False`: nothing records history, so the index derives no transitions."""
        index = ClusterIndex(
            cluster,
            link_deltas=False,
            transitions=transitions,
            selector_matcher=self._selector_matcher,
            # history records which classes select each device (device_classified)
            class_members=transitions,
        )
        self._indexes[cluster] = index
        return index

    def index(self, cluster: str) -> IndexView | None:
        """The cluster's index, to read in place (None: no writer opened one)."""
        return self._indexes.get(cluster)

    def _sorted_indexes(self, cluster: str | None = None) -> list[ClusterIndex]:
        if cluster is not None:
            index = self._indexes.get(cluster)
            return [index] if index is not None else []
        return [self._indexes[name] for name in sorted(self._indexes)]

    # --- StateWriter ----------------------------------------------------------------------------

    async def apply(self, changes: Changes) -> None:
        if changes.cluster not in self._indexes:
            # The state lives in the index the writer folded into: one this store did not
            # open is served by no one (run the reactors with open_index=store.open_index).
            raise LookupError(
                f"cluster {changes.cluster}: its reactor folds into an index this store did "
                "not open, so nothing would serve it (open it with MemoryStore.open_index)"
            )
        self.live.publish(changes.events)

    async def cluster_started(self, cluster: str, at: str) -> None:
        """Nothing to do: the cluster's new index is opened by its writer."""

    async def record_gap(self, cluster: str, start: str, end: str) -> None:
        """Nothing to do: state has no gaps, only history does."""

    async def cluster_watched(self, cluster: str, until: str) -> None:
        """Nothing to do: state has no gaps, only history does."""

    async def set_status(self, status: ClusterStatus) -> None:
        self._statuses[status.name] = replace(status, malformed=dict(status.malformed))

    # --- StateReader ----------------------------------------------------------------------------

    async def clusters(self) -> list[ClusterStatus]:
        names = sorted(self._statuses.keys() | self._indexes.keys())
        return [self._statuses.get(name) or ClusterStatus(name=name) for name in names]

    async def get(self, keys: Sequence[ObjectKey]) -> list[Record | None]:
        out: list[Record | None] = []
        for key in keys:
            key = _as_key(key)
            index = self._indexes.get(key[0])
            out.append(index.get(key) if index is not None else None)
        return out

    async def list(
        self, kind: str, *, cluster: str | None = None, namespace: str | None = None
    ) -> Sequence[Record]:
        """In key order, from the order each index keeps: nothing is sorted or copied here, a
        page of the answer costs the page (service.model.ordering)."""
        parts = [
            index.order.records_in_order(kind, namespace=namespace)
            for index in self._sorted_indexes(cluster)
        ]
        return parts[0] if len(parts) == 1 else Chained(parts)

    async def devices(self, keys: Sequence[DeviceKey]) -> builtins.list[DeviceEntry | None]:
        out: list[DeviceEntry | None] = []
        for key in keys:
            key = _as_key(key)
            index = self._indexes.get(key[0])
            out.append(index.device(key) if index is not None else None)
        return out

    async def list_devices(
        self,
        *,
        cluster: str | None = None,
        driver: str | None = None,
        published: bool | None = True,
    ) -> Sequence[DeviceEntry]:
        parts: list[Sequence[DeviceEntry]] = []
        for index in self._sorted_indexes(cluster):
            if published is None:  # both kept orders, merged
                both = (
                    index.order.devices_in_order(published=which, driver=driver)
                    for which in (True, False)
                )
                parts.append(list(merge(*both, key=lambda e: e.key)))
            else:
                parts.append(index.order.devices_in_order(published=published, driver=driver))
        return parts[0] if len(parts) == 1 else Chained(parts)

    async def lookup(
        self, relation: Relation | str, keys: Sequence[Hashable]
    ) -> builtins.list[builtins.list[Any]]:
        relation = Relation(relation)
        out: list[list[Any]] = []
        for key in keys:
            key = _as_key(key)
            if relation in ACROSS_CLUSTERS:
                found: list[Any] = []
                for index in self._sorted_indexes():
                    found.extend(index.lookup(relation, key))
                out.append(found)
                continue
            within = self._indexes.get(key[0]) if isinstance(key, tuple) and key else None
            out.append(within.lookup(relation, key) if within is not None else [])
        return out

    async def holders_by_uuid(self, uuid: str) -> UuidHolders:
        return await composed_holders(self, uuid)

    async def idle_since(self, claims: Sequence[ObjectKey]) -> builtins.list[str | None]:
        out: list[str | None] = []
        for key in claims:
            key = _as_key(key)
            index = self._indexes.get(key[0])
            out.append(index.idle_since(key) if index is not None else None)
        return out

    async def select(
        self, selections: Sequence[Selection], *, after: tuple[str, ...] | None, first: int
    ) -> Page:
        """From each cluster's index (service.stores.selecting): a page of an unfiltered list
        costs a bisect and the page; filters a pass over the candidates."""
        parts: list[Sequence[Any]] = []
        for selection in selections:
            index = self._indexes.get(selection.cluster)
            if index is not None:
                parts.append(selected(_InIndex(index), selection, self._selector_matcher))
        devices = bool(selections) and selections[0].kind == DEVICES
        return page_of(parts, entry_key if devices else record_key, after, first)

    async def namespaces(self, kind: str, cluster: str) -> builtins.list[str]:
        """From the kind's kept order: one bisect per namespace."""
        index = self._indexes.get(cluster)
        if index is None:
            return []
        keys = index.order.records(kind)
        out: list[str] = []
        at = 0
        while at < len(keys):
            namespace = keys[at].namespace
            out.append(namespace)
            at = bisect_left(keys, (cluster, kind, namespace + "\0"))
        return out

    async def device_status(self, keys: Sequence[DeviceKey]) -> builtins.list[str | None]:
        """free | held | shared | blocked per device (None: not in a valid pool)."""
        out: list[str | None] = []
        indexes = self._indexes
        for key in keys:  # a tuple looks a DeviceKey up as well (a NamedTuple hashes as one)
            key = _as_key(key)
            index = indexes.get(key[0])
            out.append(index.device_status(key) if index is not None else None)
        return out

    def subscribe(self, cluster: str, *, after: str | None = None) -> AsyncIterator[Delivery]:
        return self.live.subscribe(cluster, after=after)

    async def close(self) -> None:
        self._indexes.clear()
        self._statuses.clear()


class _InIndex:
    """A cluster's index as `selecting.selected` reads it."""

    __slots__ = ("_index", "device", "device_status", "get", "holds", "idle_since", "lookup")

    def __init__(self, index: ClusterIndex) -> None:
        self._index = index
        self.get = index.get
        self.device = index.device
        self.lookup = index.lookup
        self.holds = index.holds
        self.device_status = index.device_status
        self.idle_since = index.idle_since

    def records_in_order(self, kind: str, namespace: str | None) -> Sequence[Record]:
        return self._index.order.records_in_order(kind, namespace=namespace)

    def devices_in_order(self, published: bool, driver: str | None) -> Sequence[DeviceEntry]:
        return self._index.order.devices_in_order(published=published, driver=driver)
