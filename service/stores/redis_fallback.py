"""A selection answered without the writer's indexes: for a cluster whose indexes are not whole.

An API replica of this version reads a cluster whose layout marker does not name its current
fence (an older writer holds it, or a writer of this version has not rebuilt the indexes yet:
docs/redis.md, "Upgrades") as older versions read every cluster: the kinds the selection needs
are read whole, and `selecting.selected` — the in-memory store's own filters — picks the part.
Correct, at the old cost (the whole kind in the replica's memory for the request).
"""

from __future__ import annotations

import builtins
from collections.abc import Hashable, Sequence
from typing import TYPE_CHECKING, Any

from dra_mirror.service.model.records import (
    DEVICE_CLASS,
    AllocationRef,
    ClaimRecord,
    DeviceEntry,
    DeviceKey,
    ObjectKey,
    Record,
    key_of,
)
from dra_mirror.service.model.relations import DEVICE_ALLOCATIONS, NODE_DEVICES, NODE_PODS, Relation
from dra_mirror.service.stores.protocols import DEVICES, Selection
from dra_mirror.service.stores.selecting import selected

if TYPE_CHECKING:
    from dra_mirror.service.stores.redis_reads import RedisReader


class _Read:
    """What one selection needs of a cluster, read beforehand (a `selecting.Source`)."""

    def __init__(self) -> None:
        self.records: dict[ObjectKey, Record] = {}
        self.entries: dict[DeviceKey, DeviceEntry] = {}
        self.links: dict[tuple[Relation, Hashable], list[Any]] = {}
        self.holding: dict[DeviceKey, list[AllocationRef]] = {}
        self.statuses: dict[DeviceKey, str | None] = {}
        self.idle: dict[ObjectKey, str | None] = {}
        self.ordered: dict[tuple[str, str | None], list[Record]] = {}
        self.devices: dict[tuple[bool, str | None], list[DeviceEntry]] = {}

    def get(self, key: ObjectKey) -> Record | None:
        return self.records.get(ObjectKey(*key))

    def device(self, key: DeviceKey) -> DeviceEntry | None:
        return self.entries.get(key)

    def lookup(self, relation: Relation, key: Hashable) -> list[Any]:
        return self.links.get((relation, key), [])

    def holds(self, key: Hashable) -> list[AllocationRef]:
        return self.holding.get(key, [])  # type: ignore[call-overload]

    def device_status(self, key: DeviceKey) -> str | None:
        return self.statuses.get(key)

    def idle_since(self, claim: ObjectKey) -> str | None:
        return self.idle.get(claim)

    def records_in_order(self, kind: str, namespace: str | None) -> Sequence[Record]:
        return self.ordered.get((kind, namespace), [])

    def devices_in_order(self, published: bool, driver: str | None) -> Sequence[DeviceEntry]:
        return self.devices.get((published, driver), [])


async def part(reader: RedisReader, s: Selection) -> builtins.list[Any]:
    """One cluster's part of the selection, in key order, from whole reads."""
    read = _Read()
    cluster = s.cluster
    if s.kind == DEVICES:
        entries: list[DeviceEntry] = []
        if s.node is not None:
            [keys] = await reader.lookup(NODE_DEVICES, [(cluster, s.node)])
            read.links[(NODE_DEVICES, (cluster, s.node))] = keys
            found = await reader.devices(keys)
            read.entries.update((e.key, e) for e in found if e is not None)
            entries = list(read.entries.values())
        else:
            for which in (True, False) if s.published is None else (s.published,):
                listed = list(await reader.list_devices(cluster=cluster, driver=s.driver,
                                                        published=which))  # fmt: skip
                read.devices[(which, s.driver)] = listed
                entries += listed
        if s.class_name is not None:
            key = ObjectKey(cluster, DEVICE_CLASS, "", s.class_name)
            [found_class] = await reader.get([key])
            if found_class is not None:
                read.records[key] = found_class
        if s.status is not None:
            keys = [e.key for e in entries]
            statuses = await reader.device_status(keys)
            read.statuses.update(zip(keys, statuses, strict=True))
            held = [e.key for e in entries if not e.published]
            holds = await reader.lookup(DEVICE_ALLOCATIONS, held)
            read.holding.update(zip(held, holds, strict=True))
    else:
        if s.node is not None:
            [keys] = await reader.lookup(NODE_PODS, [(cluster, s.node)])
            read.links[(NODE_PODS, (cluster, s.node))] = keys
            found_records = await reader.get(keys)
            read.records.update((key_of(r), r) for r in found_records if r is not None)
        namespaces: list[str | None] = [None]
        if s.namespaces is not None:
            namespaces = [*sorted(set(s.namespaces))]
        for namespace in namespaces:
            read.ordered[(s.kind, namespace)] = list(
                await reader.list(s.kind, cluster=cluster, namespace=namespace)
            )
        if s.idle is not None:
            claims = [key_of(r) for rs in read.ordered.values() for r in rs
                      if isinstance(r, ClaimRecord)]  # fmt: skip
            read.idle.update(zip(claims, await reader.idle_since(claims), strict=True))
    return list(selected(read, s, reader.matcher))
