"""`IndexView`: a cluster's index as its readers see it — read-only, synchronous, in place.

The in-memory store serves the very `ClusterIndex` its cluster's reactor writes into; readers
(the store's batched reads, the diagnostics, the metrics of a watching process) are handed it
typed as this Protocol, which has no way to change it. It is also what is taken in its
cluster (`service.model.holdings.Taken`): the allocator's ledger reads it in place. Every
answer is the state as of the last batch the index settled (a batch is folded without
awaiting, so no reader sees half of one).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Iterator, Sequence
from fractions import Fraction
from typing import Any, Protocol

from dra_mirror.service.model.physical import Unit
from dra_mirror.service.model.pools import ValidPool
from dra_mirror.service.model.records import (
    AllocationRef,
    DeviceEntry,
    DeviceKey,
    ObjectKey,
    Record,
)
from dra_mirror.service.model.relations import Relation


class OrderView(Protocol):
    """The sorted keys the index keeps (service.model.ordering), read-only."""

    def records(self, kind: str) -> Sequence[ObjectKey]:
        """The keys of every record of `kind`, sorted (namespace, then name)."""
        ...

    def devices(self, *, published: bool = True) -> Sequence[DeviceKey]:
        """The keys of the published devices (or the held, unpublished ones), sorted."""
        ...


class IndexView(Protocol):
    @property
    def cluster(self) -> str: ...

    @property
    def order(self) -> OrderView:
        """Records and devices in key order, kept as batches settle: a page of a list costs
        a bisect plus the page."""
        ...

    def get(self, key: ObjectKey) -> Record | None: ...

    def records(self, kind: str) -> Iterable[Record]:
        """Every record of a kind, in no particular order."""
        ...

    def count(self, kind: str) -> int: ...

    def device(self, key: DeviceKey) -> DeviceEntry | None: ...

    def devices(self) -> Iterable[DeviceEntry]:
        """Every device of the valid generation of its pool, in no particular order."""
        ...

    def unit(self, key: DeviceKey) -> Unit:
        """The device's physical unit (service.model.physical)."""
        ...

    def unpublished_devices(self) -> Iterable[DeviceEntry]:
        """Every device held by a claim and published by no slice, in no particular order."""
        ...

    def lookup(self, relation: Relation, key: Hashable) -> list[Any]: ...

    def holds(self, key: Hashable) -> list[AllocationRef]: ...

    def held(self, key: DeviceKey) -> bool: ...

    def taken(self, key: DeviceKey) -> bool:
        """Whether a hold takes the device (held or shared; admin access observes only)."""
        ...

    def pool(self, driver: str, pool: str) -> ValidPool:
        """The pool's valid generation: its devices and shared counter sets."""
        ...

    def claim_holds(self, claim: ObjectKey) -> list[tuple[DeviceKey, AllocationRef]]:
        """The devices a claim's allocation holds, with its hold on each."""
        ...

    def device_status(self, key: DeviceKey) -> str | None: ...

    def counters_free(self, driver: str, pool: str) -> dict[str, dict[str, Fraction]]: ...

    def idle_since(self, claim: ObjectKey) -> str | None: ...

    def idle_claims(self) -> Iterator[ObjectKey]: ...
