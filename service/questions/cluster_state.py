"""One cluster's state as the diagnostics read it: every list they need, in one consistent read.

`read_cluster(reader, cluster, scope=...)` gives a `ClusterState` (classes, devices, claims,
pods, nodes, slices). Promises:

* reads go through the `StateReader` methods only — the store's batched reads, or, for a
  store that keeps the cluster's index in this process (`reader.index(cluster)`: the
  in-memory store), that index read in place: unsorted (the diagnostics need no order, and
  sorting 40,000 pods and claims per question cost more than the question itself), with no
  `await` in between, so a question sees one state;
* the reader's `Visibility` (a request's access scope) is applied per namespace present,
  asking it once per namespace and copying nothing when it hides nothing; a scope that may
  hide objects marks the state incomplete (`complete=False`), which the ledger cache never
  mixes with the whole cluster's;
* `read_whole_cluster(reader, cluster)` reads every namespace of a cluster the scope names:
  facts (device status, capacity, counters, placement) are derived from the whole cluster,
  never from what a scope lets through — a device held by a hidden claim is held; the caller
  withholds the names;
* `local_statuses(reader, entries)` answers device statuses straight from in-process indexes
  (None where there is none), without the batched call's copies.

`ScopedState` is what the questions take: a `StateReader` with its `scope` and the `store`
behind it (the GraphQL context's `ScopedReader`); a whole store is read with no scope.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

from dra_mirror.service.model.records import (
    DEVICE_CLASS,
    NODE,
    POD,
    RESOURCE_CLAIM,
    RESOURCE_SLICE,
    ClaimRecord,
    DeviceClassRecord,
    DeviceEntry,
    NodeRecord,
    ObjectKey,
    PodRecord,
    Record,
    SliceRecord,
    key_of,
)
from dra_mirror.service.model.view import IndexView
from dra_mirror.service.stores.protocols import StateReader

R = TypeVar("R", bound=Record)


class Visibility(Protocol):
    """What a reader may see (a request's access scope)."""

    def allows(self, cluster: str, namespace: str = "") -> bool:
        """May objects of `cluster` in `namespace` ("" = cluster-scoped) be seen?"""
        ...

    def may_hide(self) -> bool:
        """Whether `allows` can say no at all (a scope that sees everything cannot)."""
        ...


class ScopedState(StateReader, Protocol):
    """A state reader seen through a scope (`schema.reader.ScopedReader`)."""

    @property
    def scope(self) -> Visibility: ...

    @property
    def store(self) -> StateReader:
        """The store behind the scope (what per-store caches are kept for)."""
        ...

    @property
    def whole(self) -> StateReader:
        """The store behind the scope, unfiltered (errors answered as the reader answers
        them): what the facts of a whole cluster are derived from."""
        ...


class ClaimsByKey(Mapping[ObjectKey, ClaimRecord]):
    """A cluster's claims as the mapping the pure code takes, without building 40,000 key
    tuples per question: a lookup asks the cluster's in-process index when there is one, else
    a name index built the first time a claim is looked up."""

    def __init__(self, records: list[ClaimRecord], index: IndexView | None = None) -> None:
        self.records = records
        self._index = index
        self._by_name: dict[str, ClaimRecord] | None = None

    def __getitem__(self, key: ObjectKey) -> ClaimRecord:
        if self._index is not None:
            found = self._index.get(ObjectKey(*key))
            if isinstance(found, ClaimRecord):
                return found
            raise KeyError(key)
        if self._by_name is None:
            self._by_name = {name_of(c): c for c in self.records}
        return self._by_name[f"{key[2]}/{key[3]}"]

    def __iter__(self) -> Iterator[ObjectKey]:
        return (key_of(c) for c in self.records)

    def __len__(self) -> int:
        return len(self.records)


def name_of(record: Record) -> str:
    return f"{record.meta.namespace}/{record.meta.name}"


@dataclass
class ClusterState:
    """What the diagnostics read of one cluster, as plain records."""

    cluster: str
    classes: dict[str, DeviceClassRecord]
    devices: list[DeviceEntry]
    claims: ClaimsByKey
    pods: list[PodRecord]
    nodes: list[NodeRecord]
    slices: list[SliceRecord]
    complete: bool = True  # False: the reader's scope hid some of the cluster's objects


_KINDS = (DEVICE_CLASS, RESOURCE_CLAIM, POD, NODE, RESOURCE_SLICE)


async def read_cluster(
    reader: StateReader, cluster: str, *, scope: Visibility | None = None
) -> ClusterState:
    """One cluster's classes, devices, claims, pods, nodes and slices (one store call each, or
    the in-process index read in place); see the module docstring."""
    narrowed = scope if scope is not None and scope.may_hide() else None
    index = reader.index(cluster)
    claims_index = None
    if index is not None:
        everything = {kind: list(index.records(kind)) for kind in _KINDS}
        lists = {kind: _scoped(narrowed, cluster, records) for kind, records in everything.items()}
        allowed = narrowed is None or narrowed.allows(cluster, "")
        devices = list(index.devices()) if allowed else []
        complete = allowed and all(lists[k] is everything[k] for k in _KINDS)
        claims_index = index if complete else None
    else:
        lists = {kind: list(await reader.list(kind, cluster=cluster)) for kind in _KINDS}
        devices = list(await reader.list_devices(cluster=cluster))
        complete = narrowed is None
    return ClusterState(
        cluster=cluster,
        classes={c.meta.name: c for c in _only(DeviceClassRecord, lists[DEVICE_CLASS])},
        devices=devices,
        claims=ClaimsByKey(_only(ClaimRecord, lists[RESOURCE_CLAIM]), claims_index),
        pods=_only(PodRecord, lists[POD]),
        nodes=_only(NodeRecord, lists[NODE]),
        slices=_only(SliceRecord, lists[RESOURCE_SLICE]),
        complete=complete,
    )


async def read_whole_cluster(reader: ScopedState, cluster: str) -> ClusterState | None:
    """The whole cluster's state, for deriving its facts (what is held, free, blocked, where a
    claim fits) — every namespace, whatever the reader's scope hides — or None when the scope
    does not name the cluster at all. Callers show only the names the scope allows."""
    if not reader.scope.allows(cluster, ""):
        return None
    return await read_cluster(reader.whole, cluster)


def _only(kind: type[R], records: list[Record]) -> list[R]:
    return [r for r in records if isinstance(r, kind)]


def _scoped(scope: Visibility | None, cluster: str, records: list[Record]) -> list[Record]:
    """The records the scope allows, asking it once per namespace present, and copying
    nothing when it allows them all."""
    if scope is None:
        return records
    namespaces = {r.meta.namespace for r in records}
    hidden = {ns for ns in namespaces if not scope.allows(cluster, ns)}
    if not hidden:
        return records
    return [r for r in records if r.meta.namespace not in hidden]


def local_statuses(reader: StateReader, entries: Sequence[DeviceEntry]) -> list[str | None]:
    """Device statuses read straight from in-process indexes, which keep them derived
    (None where there is none: a store outside the process)."""
    out: list[str | None] = []
    answer = out.append
    cluster: str | None = None
    index: IndexView | None = None
    for entry in entries:
        key = entry.key
        if key.cluster != cluster:
            cluster = key.cluster
            index = reader.index(cluster)
        answer(index.device_status(key) if index is not None else None)
    return out
