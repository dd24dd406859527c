"""What a cluster's index answers, read in place: records, devices and their holds, derived state.

`IndexReads` is the reading half of `service.model.index.ClusterIndex` (which folds the events
and keeps the attributes declared here); readers get it typed as `service.model.view.IndexView`,
and the allocator's ledger as what is taken in the cluster (`service.model.holdings.Taken`:
`holds`, `taken`, `pool`, `claim_holds`).

Promises: nothing here writes; every answer is the state as of the last settled batch; a
device's holds cost O(its holds), a claim's O(its allocation results), the rest a lookup.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Iterator, Mapping
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from dra_mirror.service.model.holds import device_holds
from dra_mirror.service.model.links import Links
from dra_mirror.service.model.physical import Unit, lone_unit, lone_unit_of_key
from dra_mirror.service.model.pools import ValidPool
from dra_mirror.service.model.records import (
    RESOURCE_CLAIM,
    AllocationRef,
    ClaimRecord,
    DeviceEntry,
    DeviceKey,
    ObjectKey,
    PodRecord,
    Record,
)
from dra_mirror.service.model.relations import DEVICE_ALLOCATIONS, Relation

if TYPE_CHECKING:
    from dra_mirror.service.model.claims_index import ClaimTracker
    from dra_mirror.service.model.devices_index import DeviceTracker


class IndexReads:
    """Reading one cluster's index (see the module docstring)."""

    cluster: str
    links: Links
    _objects: dict[str, dict[ObjectKey, Record]]
    _devices: DeviceTracker
    _claims: ClaimTracker

    def get(self, key: ObjectKey) -> Record | None:
        objects = self._objects.get(key[1])
        return objects.get(key) if objects is not None else None

    def records(self, kind: str) -> Iterable[Record]:
        return self._objects[kind].values()

    def count(self, kind: str) -> int:
        return len(self._objects[kind])

    def device(self, key: DeviceKey) -> DeviceEntry | None:
        """The device's entry: published, or held and published by no slice."""
        found = self._devices.devices.get(key)
        return found if found is not None else self._devices.unpublished.get(key)

    def devices(self) -> Iterable[DeviceEntry]:
        """Every device of the valid generation of its pool."""
        return self._devices.devices.values()

    def unit(self, key: DeviceKey) -> Unit:
        """The device's physical unit (service.model.physical): the GPU it is part of, its
        type and GPU-equivalent weight; a device no valid pool publishes is its own."""
        found = self._devices.units.get(key)
        if found is not None:
            return found
        entry = self.device(key)
        return lone_unit(entry) if entry is not None else lone_unit_of_key(key)

    def unpublished_devices(self) -> Iterable[DeviceEntry]:
        """Every device held by a claim and published by no slice (`DeviceEntry.published`)."""
        return self._devices.unpublished.values()

    def lookup(self, relation: Relation, key: Hashable) -> list[Any]:
        """The values a relation maps `key` to, sorted (holds: see `holds`)."""
        if relation == DEVICE_ALLOCATIONS:
            return self.holds(key)
        values: Iterable[Any] = self.links.get(relation, key)  # keys of one type: sortable
        return sorted(values)

    def holds(self, key: Hashable) -> list[AllocationRef]:
        """Every claim's hold on a device (by DeviceKey), in (claim, request, shareID) order."""
        holds: Mapping[Any, AllocationRef] = self.links.get(DEVICE_ALLOCATIONS, key)
        return [holds[k] for k in sorted(holds)]

    def held(self, key: DeviceKey) -> bool:
        """Whether any claim holds the device."""
        return bool(self.links.get(DEVICE_ALLOCATIONS, key))

    def taken(self, key: DeviceKey) -> bool:
        """Whether a hold takes the device (held or shared; admin access observes only)."""
        return self._devices.taken(key)

    def claim_holds(self, claim: ObjectKey) -> list[tuple[DeviceKey, AllocationRef]]:
        """The devices a claim's allocation holds, with its hold on each (holdings.Taken)."""
        return device_holds(self.cluster, claim, self._objects[RESOURCE_CLAIM].get(claim))

    def pool(self, driver: str, pool: str) -> ValidPool:
        return self._devices.pool(driver, pool)

    def counters_free(self, driver: str, pool: str) -> dict[str, dict[str, Fraction]]:
        """What is left of a pool's shared counters after its allocated devices."""
        return self._devices.counters_free(driver, pool)

    def device_status(self, key: DeviceKey) -> str | None:
        """free | held | shared | blocked, or None for a device not in a valid pool."""
        return self._devices.statuses.get(key)

    def idle_since(self, claim: ObjectKey) -> str | None:
        """When the claim last became idle (allocated, no consumer pod Running), or None."""
        return self._claims.idle_since.get(claim)

    def idle_claims(self) -> Iterator[ObjectKey]:
        return iter(self._claims.idle_since)

    def consumers(self, claim: ClaimRecord) -> tuple[PodRecord, ...]:
        """The pods consuming a claim now (service.model.consumers), by key."""
        return self._claims.consumer_pods(claim, None)
