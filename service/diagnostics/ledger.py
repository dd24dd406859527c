"""What is taken, as the allocator reads it: the model's holds, and those a placement imagines.

kube-scheduler's structured allocator decides whether a device can still be given to a claim
from three kinds of use: exclusive holders (a device without `allowMultipleAllocations`
belongs to at most one claim; admin-access results observe, they do not hold), shares (what a
shareable device has left is its capacity minus every share's consumedCapacity) and counters (a
partitionable device fits while its consumption fits what its taken siblings left of their
pool's counter sets). Each of these is derived once, in the model: the holds by the cluster's
index (`service.model.holdings.Taken`), what follows from them by `service.model.inventory`.

`Ledger(base)` reads them from `base` — the cluster's index, which the reactor keeps current
with every batch, or `Holdings` derived the same way from one read of a store kept elsewhere —
and never writes it. What an allocation that is only imagined takes (the pods of a plan, the
simulator's scheduler trying a node) is `commit`ted to the ledger and `release`d again: those
holds live in the ledger alone, on top of the base, and are gone with it.

Promises: the base is never written; committing a claim replaces its earlier holds (the base's
too); releasing a claim drops them until it is committed again; a query costs O(holds of the
device), counters O(devices of the pool) once per pool until a commit or release moves it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from fractions import Fraction
from typing import NamedTuple

from dra_mirror.service.model import inventory
from dra_mirror.service.model.holdings import Holdings, Taken
from dra_mirror.service.model.holds import HoldId, allocation_holds
from dra_mirror.service.model.pools import PoolKey
from dra_mirror.service.model.records import (
    Allocation,
    AllocationRef,
    ClaimRecord,
    DeviceEntry,
    DeviceKey,
    ObjectKey,
    SliceRecord,
)


class CounterSetKey(NamedTuple):
    cluster: str
    driver: str
    pool: str
    counter_set: str


class Ledger:
    """The allocator's view of what is taken in one cluster (see the module docstring)."""

    def __init__(self, base: Taken | None = None) -> None:
        self.base: Taken = base if base is not None else Holdings()
        self._added: dict[ObjectKey, list[tuple[DeviceKey, HoldId]]] = {}
        self._added_on: dict[DeviceKey, dict[HoldId, AllocationRef]] = {}
        self._hidden: set[ObjectKey] = set()  # claims whose base holds no longer count
        self._hidden_on: dict[DeviceKey, int] = {}  # their devices (base holds of them)
        self._free: dict[PoolKey, dict[str, dict[str, Fraction]]] = {}  # counters left
        # Whether a hold takes the device: the base's answer as it is, until a commit or a
        # release imagines otherwise.
        self.taken: Callable[[DeviceKey], bool] = self.base.taken

    @classmethod
    def build(
        cls,
        devices: Iterable[DeviceEntry],
        claims: Iterable[ClaimRecord],
        *,
        slices: Iterable[SliceRecord] = (),
    ) -> Ledger:
        """A ledger over `Holdings` of these records. `slices` supply the `sharedCounters`
        that partitionable devices consume; without them such devices cannot be placed."""
        return cls(Holdings.build(devices, claims, slices=slices))

    # --- imagined holds ----------------------------------------------------------------------

    def commit(self, claim: ObjectKey, allocation: Allocation) -> None:
        """Count a claim's allocation (replacing any earlier one of the same claim)."""
        self.release(claim)
        added = self._added[claim] = []
        for (device, hold_id), (ref, _) in allocation_holds(
            claim.cluster, claim, allocation
        ).items():
            self._added_on.setdefault(device, {})[hold_id] = ref
            added.append((device, hold_id))
            self._moved(device)
        self.taken = self._taken

    def release(self, claim: ObjectKey) -> None:
        """Stop counting a claim's holds (deallocated, deleted, or imagined away)."""
        for device, hold_id in self._added.pop(claim, ()):
            on = self._added_on[device]
            del on[hold_id]
            if not on:
                del self._added_on[device]
            self._moved(device)
        if claim not in self._hidden:
            held = self.base.claim_holds(claim)
            if held:
                self._hidden.add(claim)
                for device, _ in held:
                    self._hidden_on[device] = self._hidden_on.get(device, 0) + 1
                    self._moved(device)
                self.taken = self._taken

    def _moved(self, device: DeviceKey) -> None:
        self._free.pop(PoolKey(device.driver, device.pool), None)

    # --- queries -----------------------------------------------------------------------------

    def holds(self, key: DeviceKey) -> list[AllocationRef]:
        """Every hold on a device that counts now (admin-access ones included)."""
        holds = self.base.holds(key)
        if key in self._hidden_on:
            hidden = self._hidden
            holds = [h for h in holds if h.claim not in hidden]
        added = self._added_on.get(key)
        return [*holds, *added.values()] if added else holds

    def _taken(self, key: DeviceKey) -> bool:
        added = self._added_on.get(key)
        if added and inventory.consumes(added.values()):
            return True
        if key in self._hidden_on:
            hidden = self._hidden
            return inventory.consumes(h for h in self.base.holds(key) if h.claim not in hidden)
        return self.base.taken(key)

    def holders(self, device: DeviceKey) -> list[ObjectKey]:
        """Claims holding a device now (exclusively or by a share), sorted."""
        return sorted({h.claim for h in inventory.consuming(self.holds(device))})

    def remaining_capacity(self, entry: DeviceEntry) -> dict[str, Fraction]:
        """Each capacity of a device minus what its shares consumed."""
        return inventory.remaining(entry, self.holds(entry.key))

    def counters_free(self, key: CounterSetKey) -> dict[str, Fraction] | None:
        """What is left of a counter set; None when no slice of the pool publishes it."""
        pk = PoolKey(key.driver, key.pool)
        free = self._free.get(pk)
        if free is None:
            valid = self.base.pool(key.driver, key.pool)
            taken = self.taken
            free = self._free[pk] = inventory.counters_free(
                valid.counter_sets, (e.device for k, e in valid.devices.items() if taken(k))
            )
        return free.get(key.counter_set)

    def counter_blockers(self, entry: DeviceEntry) -> list[ObjectKey]:
        """Claims holding sibling devices that consume the same counter sets as `entry`."""
        sets = {c.counter_set for c in entry.device.consumes_counters}
        if not sets:
            return []
        found: set[ObjectKey] = set()
        for key, sibling in self.base.pool(entry.key.driver, entry.key.pool).devices.items():
            if sets & {c.counter_set for c in sibling.device.consumes_counters}:
                found.update(self.holders(key))
        return sorted(found)
