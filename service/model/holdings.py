"""What is taken in one cluster, as every capacity answer reads it: the claims' holds on each
device and the valid generation of each pool.

`Taken` is that reading. The cluster's index answers it (`ClusterIndex`: kept by the reactor,
batch after batch, the holds it links per device); `Holdings` answers it for a cluster read
once from a store kept outside this process, and for the simulator's scheduler. Both derive a
claim's holds with `holds.holds_of` and a pool's devices and counter sets with `pools`, so
they agree; what follows from the holds — a device's status, the capacity a shareable device
has left, what a pool's counters have left — is `inventory`'s, computed over either.

    holds(device)        every claim's hold on the device (AllocationRef; admin access too)
    taken(device)        whether a hold takes it (held or shared: admin access observes only)
    pool(driver, pool)   the pool's valid generation: its devices and shared counter sets
    claim_holds(claim)   the devices a claim's allocation holds, with its hold on each

Promises: pure; `Holdings` changes only through `set_claim`; a query costs O(holds of the
device), `pool` a dictionary lookup.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from dra_mirror.service.model.holds import HoldId, holds_of
from dra_mirror.service.model.pools import (
    EMPTY_POOL,
    PoolKey,
    ValidPool,
    pool_key,
    valid_generation,
)
from dra_mirror.service.model.records import (
    AllocationRef,
    ClaimRecord,
    DeviceEntry,
    DeviceKey,
    ObjectKey,
    SliceRecord,
    key_of,
)


class Taken(Protocol):
    """What is taken in one cluster (see the module docstring)."""

    def holds(self, key: DeviceKey) -> list[AllocationRef]: ...

    def taken(self, key: DeviceKey) -> bool: ...

    def pool(self, driver: str, pool: str) -> ValidPool: ...

    def claim_holds(self, claim: ObjectKey) -> list[tuple[DeviceKey, AllocationRef]]: ...


class Holdings:
    """`Taken` of one cluster from its records: devices, claims and slices read at once."""

    def __init__(self) -> None:
        self._on: dict[DeviceKey, dict[HoldId, AllocationRef]] = {}
        self._of: dict[ObjectKey, list[tuple[DeviceKey, HoldId]]] = {}
        self._taking: dict[DeviceKey, int] = {}  # holds that take the device (not admin)
        self._pools: dict[PoolKey, ValidPool] = {}

    @classmethod
    def build(
        cls,
        devices: Iterable[DeviceEntry],
        claims: Iterable[ClaimRecord],
        *,
        slices: Iterable[SliceRecord] = (),
    ) -> Holdings:
        """The holds of every allocated claim; each pool's devices as given (the valid ones,
        as the index or `pools.valid_devices` finds them), with the shared counter sets of its
        valid generation among `slices` (none given: no counter set is published)."""
        holdings = cls()
        members: dict[PoolKey, dict[DeviceKey, DeviceEntry]] = {}
        for entry in devices:
            members.setdefault(PoolKey(entry.key.driver, entry.key.pool), {})[entry.key] = entry
        by_pool: dict[PoolKey, list[SliceRecord]] = {}
        for slice_ in slices:
            by_pool.setdefault(pool_key(slice_), []).append(slice_)
        for pk in members.keys() | by_pool.keys():
            generation, valid = valid_generation(by_pool.get(pk, ()))
            counts = {s.pool.resource_slice_count for s in valid}
            holdings._pools[pk] = ValidPool(
                generation=generation,
                complete=len(counts) == 1 and len(valid) == max(counts),
                devices=members.get(pk, {}),
                counter_sets=tuple(cs for s in valid for cs in s.shared_counters),
                slice_count=len(valid),
                expected_slices=max(counts, default=0),
            )
        on, of, taking = holdings._on, holdings._of, holdings._taking
        for claim in claims:  # set_claim, for claims seen once each
            if claim.allocation is None:
                continue
            key = key_of(claim)
            held = of[key] = []
            for (device, hold_id), (ref, _) in holds_of(key.cluster, key, claim).items():
                found = on.get(device)
                if found is None:
                    on[device] = {hold_id: ref}
                else:
                    found[hold_id] = ref
                if not ref.admin_access:
                    taking[device] = taking.get(device, 0) + 1
                held.append((device, hold_id))
        return holdings

    def set_claim(self, key: ObjectKey, claim: ClaimRecord | None) -> None:
        """The claim's holds are now those of `claim` (None, or unallocated: none)."""
        for device, hold_id in self._of.pop(key, ()):
            on = self._on[device]
            if not on.pop(hold_id).admin_access:
                self._count(device, -1)
            if not on:
                del self._on[device]
        found = holds_of(key.cluster, key, claim)
        if not found:
            return
        of = self._of[key] = []
        for (device, hold_id), (ref, _) in found.items():
            self._on.setdefault(device, {})[hold_id] = ref
            if not ref.admin_access:
                self._count(device, +1)
            of.append((device, hold_id))

    def _count(self, device: DeviceKey, sign: int) -> None:
        left = self._taking.get(device, 0) + sign
        if left:
            self._taking[device] = left
        else:
            del self._taking[device]

    def holds(self, key: DeviceKey) -> list[AllocationRef]:
        on = self._on.get(key)
        return [on[k] for k in sorted(on)] if on else []

    def taken(self, key: DeviceKey) -> bool:
        return key in self._taking

    def pool(self, driver: str, pool: str) -> ValidPool:
        return self._pools.get(PoolKey(driver, pool), EMPTY_POOL)

    def claim_holds(self, claim: ObjectKey) -> list[tuple[DeviceKey, AllocationRef]]:
        return [(device, self._on[device][hold_id]) for device, hold_id in self._of.get(claim, ())]
