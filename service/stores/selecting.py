"""Filtered lists read from state held in the process: the in-memory store's `select`.

`selected(source, selection, matcher)` is one cluster's part of a `Selection` (protocols.py) as
the cluster's index (or anything answering like it, `Source`) holds it, in key order;
`page_of(parts, after, first)` cuts one page of the parts, one per cluster in cluster order,
and counts them. Promises:

* the same answers as the Redis store's indexes (tests/stores/test_select_oracle.py compares
  them on random states): every filter is the model's — claim `state` from the record, `idle`
  the index's idle mark, a device's `status` the index's (for a device held and published by
  no slice, `inventory.device_status` of its holds: the index keeps statuses of valid devices
  only), `class_name` through `class_members.class_accepts`, `uses_devices` through
  `pods.uses_devices`;
* without filters the part is the index's kept order itself (a page costs a bisect and the
  page); each filter costs a pass over the candidates, as the graph's filters always did in
  memory; `node` starts from the node's reverse map (the node's own objects only).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Hashable, Iterable, Sequence
from heapq import merge
from typing import Any, Protocol

from dra_mirror.service.model.class_members import class_accepts
from dra_mirror.service.model.inventory import device_status
from dra_mirror.service.model.ordering import Chained
from dra_mirror.service.model.pods import uses_devices
from dra_mirror.service.model.records import (
    DEVICE_CLASS,
    POD,
    RESOURCE_CLAIM,
    AllocationRef,
    ClaimRecord,
    DeviceClassRecord,
    DeviceEntry,
    DeviceKey,
    ObjectKey,
    PodRecord,
    Record,
)
from dra_mirror.service.model.relations import NODE_DEVICES, NODE_PODS, Relation
from dra_mirror.service.model.taint_rules import SelectorMatcher
from dra_mirror.service.stores.protocols import DEVICES, Page, Selection


class Source(Protocol):
    """What `selected` reads of one cluster (a `ClusterIndex` answers it)."""

    def get(self, key: ObjectKey) -> Record | None: ...

    def device(self, key: DeviceKey) -> DeviceEntry | None: ...

    def lookup(self, relation: Relation, key: Hashable) -> list[Any]: ...

    def holds(self, key: Hashable) -> list[AllocationRef]: ...

    def device_status(self, key: DeviceKey) -> str | None: ...

    def idle_since(self, claim: ObjectKey) -> str | None: ...

    def records_in_order(self, kind: str, namespace: str | None) -> Sequence[Record]: ...

    def devices_in_order(self, published: bool, driver: str | None) -> Sequence[DeviceEntry]: ...


def record_key(record: Record) -> tuple[str, str, str]:
    meta = record.meta
    return (meta.cluster, meta.namespace, meta.name)


def entry_key(entry: DeviceEntry) -> tuple[str, ...]:
    return tuple(entry.key)


def status_of(source: Source, entry: DeviceEntry) -> str | None:
    """The status the graph shows: the index's for a valid device, else derived from the
    holds (a device held and published by no slice shares no counters)."""
    if entry.published:
        return source.device_status(entry.key)
    return device_status(entry, source.holds(entry.key))


def selected(
    source: Source, selection: Selection, matcher: SelectorMatcher
) -> Sequence[Record] | Sequence[DeviceEntry]:
    """One cluster's part of the selection, in key order (see the module docstring)."""
    if selection.kind == DEVICES:
        return _devices(source, selection, matcher)
    s = selection
    records: Sequence[Record]
    if s.kind == POD and s.node is not None:
        keys = source.lookup(NODE_PODS, (s.cluster, s.node))
        found = (source.get(k) for k in keys)
        records = [r for r in found if r is not None and _in(s.namespaces, r.meta.namespace)]
    elif s.namespaces is None:
        records = source.records_in_order(s.kind, None)
    else:
        parts = [source.records_in_order(s.kind, ns) for ns in sorted(set(s.namespaces))]
        records = parts[0] if len(parts) == 1 else Chained(parts)  # none: an empty Chained
    if s.kind == RESOURCE_CLAIM:
        if s.state is not None:
            records = [r for r in records if isinstance(r, ClaimRecord) and r.state == s.state]
        if s.idle is not None:
            records = [r for r in records if _idle(source, r) == s.idle]
    if s.kind == POD and s.uses_devices is not None:
        records = [
            r for r in records if isinstance(r, PodRecord) and uses_devices(r) == s.uses_devices
        ]
    return records


def _in(namespaces: tuple[str, ...] | None, namespace: str) -> bool:
    return namespaces is None or namespace in namespaces


def _idle(source: Source, record: Record) -> bool:
    meta = record.meta
    key = ObjectKey(meta.cluster, RESOURCE_CLAIM, meta.namespace, meta.name)
    return source.idle_since(key) is not None


def _devices(source: Source, s: Selection, matcher: SelectorMatcher) -> Sequence[DeviceEntry]:
    entries: Sequence[DeviceEntry]
    if s.node is not None:
        keys = sorted(source.lookup(NODE_DEVICES, (s.cluster, s.node)))
        found = (source.device(k) for k in keys)
        entries = [
            e
            for e in found
            if e is not None
            and (s.driver is None or e.key.driver == s.driver)
            and (s.published is None or e.published == s.published)
        ]
    elif s.published is None:
        both: Iterable[Sequence[DeviceEntry]] = (
            source.devices_in_order(which, s.driver) for which in (True, False)
        )
        entries = list(merge(*both, key=lambda e: e.key))
    else:
        entries = source.devices_in_order(s.published, s.driver)
    if s.class_name is not None:
        found_class = source.get(ObjectKey(s.cluster, DEVICE_CLASS, "", s.class_name))
        if not isinstance(found_class, DeviceClassRecord):
            return []
        entries = [e for e in entries if class_accepts(found_class, e, matcher)]
    if s.status is not None:
        entries = [e for e in entries if status_of(source, e) == s.status]
    return entries


def page_of(
    parts: Sequence[Sequence[Any]],
    key: Callable[[Any], tuple[str, ...]],
    after: tuple[str, ...] | None,
    first: int,
) -> Page:
    """The page of `parts` (in key order, one after the other) after `after`, and counts."""
    items: Sequence[Any] = parts[0] if len(parts) == 1 else Chained(parts)
    start = bisect_right(items, after, key=key) if after else 0
    size = len(items)
    return Page(
        items=list(items[start : start + first]),
        total=size,
        has_previous=start > 0,
        has_next=start + first < size,
    )
