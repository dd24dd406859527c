"""Per-request DataLoaders: every relation of the graph is one batched store call.

A `Loaders` is created fresh for each GraphQL request (its caches must not outlive the
request: the state changes between requests). Each loader's batch function receives every key
asked for in one tick of the event loop and returns the results in key order, so a page of 500
devices asking for their allocations costs one `lookup(DEVICE_ALLOCATIONS, keys)`.

Pool facts (highest generation, completeness, shared counter sets) come from the slices of the
node the pool is seen from when those form a complete generation (one batched node lookup),
otherwise from the cluster's slices, read once per cluster per request.

`record(cls, key)` and `records_of(cls, keys)` load through `records` and keep only records of
the type asked for: an object key's kind is a string, so this is where a resolver's record is
typed (a key of another kind reads as missing).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Sequence
from functools import cached_property
from typing import Any, NamedTuple, TypeVar

from strawberry.dataloader import DataLoader

from dra_mirror.service.model.pools import valid_pool
from dra_mirror.service.model.records import (
    DEVICE_CLASS,
    RESOURCE_SLICE,
    CounterSet,
    DeviceClassRecord,
    DeviceEntry,
    DeviceKey,
    ObjectKey,
    Record,
    SliceRecord,
)
from dra_mirror.service.stores.protocols import Relation

from .reader import ScopedReader

R = TypeVar("R", bound=Record)

PoolKey = tuple[str, str, str]  # (cluster, driver, pool)
PoolLookup = tuple[str, str, str, str | None]  # (cluster, driver, pool, node it is seen from)


class PoolFacts(NamedTuple):
    """What the slices of one pool say, at its highest generation (older generations are
    being replaced by the driver and do not count)."""

    generation: int
    slices: int  # slices present at that generation
    resource_slice_count: int  # slices the driver said the generation has
    counter_sets: dict[str, CounterSet]  # sharedCounters of that generation, by set name
    complete: bool  # as `service.model.pools.valid_pool` decides it


def pool_facts(slices: Sequence[SliceRecord]) -> dict[PoolKey, PoolFacts]:
    """Group slices into pools; only the highest `pool.generation` counts for inventory."""
    by_pool: dict[PoolKey, list[SliceRecord]] = defaultdict(list)
    for slice_ in slices:
        by_pool[(slice_.meta.cluster, slice_.driver, slice_.pool.name)].append(slice_)
    facts: dict[PoolKey, PoolFacts] = {}
    for key, members in by_pool.items():
        pool = valid_pool(key[0], members)
        sets = {cs.name: cs for cs in pool.counter_sets}
        facts[key] = PoolFacts(
            pool.generation, pool.slice_count, pool.expected_slices, sets, pool.complete
        )
    return facts


class Loaders:
    """The DataLoaders of one request, all reading through the request's `ScopedReader`."""

    def __init__(self, reader: ScopedReader) -> None:
        self.reader = reader
        self._relations: dict[Relation, DataLoader[Hashable, list[Any]]] = {}
        # Per-request memo for derived values other modules compute (device states…).
        self.memo: dict[Hashable, Any] = {}

    # Each loader is made on first use: a request uses two or three of them.

    @cached_property
    def records(self) -> DataLoader[ObjectKey, Record | None]:
        return DataLoader(self._records)

    async def record(self, cls: type[R], key: ObjectKey) -> R | None:
        """The record under `key` if it is a `cls` (None: missing, hidden or another kind)."""
        found = await self.records.load(key)
        return found if isinstance(found, cls) else None

    async def records_of(self, cls: type[R], keys: Sequence[ObjectKey]) -> list[R]:
        """The `cls` records under `keys`, in key order; missing and hidden ones left out."""
        found = await self.records.load_many(keys)
        return [r for r in found if isinstance(r, cls)]

    @cached_property
    def devices(self) -> DataLoader[DeviceKey, DeviceEntry | None]:
        return DataLoader(self._devices)

    @cached_property
    def idle_since(self) -> DataLoader[ObjectKey, str | None]:
        return DataLoader(self._idle_since)

    @cached_property
    def cluster_slices(self) -> DataLoader[str, list[SliceRecord]]:
        return DataLoader(self._slices)

    @cached_property
    def cluster_classes(self) -> DataLoader[str, list[DeviceClassRecord]]:
        return DataLoader(self._classes)

    @cached_property
    def pools(self) -> DataLoader[PoolLookup, PoolFacts | None]:
        return DataLoader(self._pools)

    @cached_property
    def device_status(self) -> DataLoader[DeviceKey, str | None]:
        return DataLoader(self._device_status)

    def relation(self, relation: Relation) -> DataLoader[Hashable, list[Any]]:
        """The loader of one indexed relation (see `Relation` for each key type)."""
        loader = self._relations.get(relation)
        if loader is None:

            async def load(keys: list[Hashable]) -> list[list[Any]]:
                return await self.reader.lookup(relation, keys)

            loader = self._relations[relation] = DataLoader(load)
        return loader

    async def _records(self, keys: list[ObjectKey]) -> list[Record | None]:
        return await self.reader.get(keys)

    async def _devices(self, keys: list[DeviceKey]) -> list[DeviceEntry | None]:
        return await self.reader.devices(keys)

    async def _device_status(self, keys: list[DeviceKey]) -> list[str | None]:
        return await self.reader.device_status(keys)

    async def _idle_since(self, keys: list[ObjectKey]) -> list[str | None]:
        return await self.reader.idle_since(keys)

    async def _slices(self, clusters: list[str]) -> list[list[SliceRecord]]:
        found: list[list[SliceRecord]] = []
        for cluster in clusters:
            found.append(list(await self.reader.list(RESOURCE_SLICE, cluster=cluster)))
        return found

    async def _classes(self, clusters: list[str]) -> list[list[DeviceClassRecord]]:
        found: list[list[DeviceClassRecord]] = []
        for cluster in clusters:
            found.append(list(await self.reader.list(DEVICE_CLASS, cluster=cluster)))
        return found

    async def _pools(self, keys: list[PoolLookup]) -> list[PoolFacts | None]:
        # A node-local pool's slices normally all sit on its node: read that node's slices
        # first (one batched lookup) and trust them when they form a complete generation.
        # Otherwise (network-attached pools, incomplete or spread pools) read the cluster's.
        facts: dict[PoolLookup, PoolFacts] = {}
        nodes = sorted({(c, n) for c, _, _, n in keys if n})
        if nodes:
            slice_keys = await self.relation(Relation.NODE_SLICES).load_many(nodes)
            on_nodes = await self.records.load_many([k for ks in slice_keys for k in ks])
            by_node: dict[tuple[str, str], list[SliceRecord]] = defaultdict(list)
            for record in on_nodes:
                if isinstance(record, SliceRecord) and record.node_name:
                    by_node[(record.meta.cluster, record.node_name)].append(record)
            for key in keys:
                cluster, driver, pool, node = key
                if node:
                    local = pool_facts(by_node.get((cluster, node), [])).get(
                        (cluster, driver, pool)
                    )
                    if local is not None and local.complete:
                        facts[key] = local
        missing = [k for k in keys if k not in facts]
        clusters = sorted({cluster for cluster, _, _, _ in missing})
        by_pool: dict[PoolKey, PoolFacts] = {}
        for slices in await self.cluster_slices.load_many(clusters):
            by_pool.update(pool_facts(slices))
        for key in missing:
            found = by_pool.get(key[:3])
            if found is not None:
                facts[key] = found
        return [facts.get(key) for key in keys]
