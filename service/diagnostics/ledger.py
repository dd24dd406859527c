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
too); releasing a claim drops them until it is committed again; a commit or release costs
O(its results), a query O(holds of the device), counters O(devices of the pool) once per pool
and ledger (the base does not change while a ledger is read).
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from typing import NamedTuple

from dra_mirror.service.model import inventory
from dra_mirror.service.model.holdings import Holdings, Taken
from dra_mirror.service.model.holds import HoldId, allocation_holds
from dra_mirror.service.model.pools import PoolKey
from dra_mirror.service.model.records import (
    Allocation,
    AllocationRef,
    DeviceEntry,
    DeviceKey,
    ObjectKey,
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
        self._added_taking: dict[DeviceKey, int] = {}  # imagined holds that take the device
        self._hidden: set[ObjectKey] = set()  # claims whose base holds no longer count
        self._hidden_on: dict[DeviceKey, int] = {}  # their devices (base holds of them)
        # Counters: what the base leaves of each pool's sets (read once per pool: the base
        # does not change while a ledger is read), and what imagined holds moved since.
        self._base_free: dict[PoolKey, dict[str, dict[str, Fraction]]] = {}
        self._moved: dict[PoolKey, dict[str, dict[str, Fraction]]] = {}
        self._grouped: dict[PoolKey, bool] = {}  # pools with a device declaring groups
        # Whether a hold takes the device: the base's answer as it is, until a commit or a
        # release imagines otherwise.
        self.taken: Callable[[DeviceKey], bool] = self.base.taken

    # --- imagined holds ----------------------------------------------------------------------

    def commit(self, claim: ObjectKey, allocation: Allocation) -> None:
        """Count a claim's allocation (replacing any earlier one of the same claim)."""
        self.release(claim)
        found = allocation_holds(claim.cluster, claim, allocation)
        was = {device: self.taken(device) for device, _ in found}
        added = self._added[claim] = []
        for (device, hold_id), (ref, _) in found.items():
            self._added_on.setdefault(device, {})[hold_id] = ref
            if not ref.admin_access:
                _count(self._added_taking, device, +1)
            added.append((device, hold_id))
        self.taken = self._taken
        self._shifted(was)

    def release(self, claim: ObjectKey) -> None:
        """Stop counting a claim's holds (deallocated, deleted, or imagined away)."""
        added = self._added.pop(claim, [])
        held = self.base.claim_holds(claim) if claim not in self._hidden else []
        if not added and not held:
            return
        was = {device: self.taken(device) for device, _ in (*added, *held)}
        for device, hold_id in added:
            on = self._added_on[device]
            if not on.pop(hold_id).admin_access:
                _count(self._added_taking, device, -1)
            if not on:
                del self._added_on[device]
        if held:
            self._hidden.add(claim)
            for device, _ in held:
                _count(self._hidden_on, device, +1)
        self.taken = self._taken
        self._shifted(was)

    def _shifted(self, was: dict[DeviceKey, bool]) -> None:
        """Move the counters of the devices whose being taken changed."""
        for device, before in was.items():
            now = self._taken(device)
            if now == before:
                continue
            entry = self.base.pool(device.driver, device.pool).devices.get(device)
            if entry is None:
                continue  # not in the pool's valid generation: consumes no counter
            moved = self._moved.setdefault(PoolKey(device.driver, device.pool), {})
            for consumption in entry.device.consumes_counters:
                counters = moved.setdefault(consumption.counter_set, {})
                for name, value in consumption.counters.items():
                    amount = inventory.amount(value)
                    counters[name] = counters.get(name, Fraction(0)) + (amount if now else -amount)

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
        if key in self._added_taking:
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
        base = self._base_free.get(pk)
        if base is None:
            valid, taken = self.base.pool(key.driver, key.pool), self.base.taken
            base = self._base_free[pk] = inventory.counters_free(
                valid.counter_sets, (e.device for k, e in valid.devices.items() if taken(k))
            )
        left = base.get(key.counter_set)
        used = self._moved.get(pk, {}).get(key.counter_set)
        if left is None or not used:
            return None if left is None else dict(left)
        return {name: amount - used.get(name, Fraction(0)) for name, amount in left.items()}

    def declares_groups(self, driver: str, pool: str) -> bool:
        """Whether a device of the pool declares compatibility groups (KEP-5963; read once per
        pool and ledger)."""
        pk = PoolKey(driver, pool)
        found = self._grouped.get(pk)
        if found is None:
            devices = self.base.pool(driver, pool).devices.values()
            found = self._grouped[pk] = any(
                c.compatibility_groups for e in devices for c in e.device.consumes_counters
            )
        return found

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


def _count(counts: dict[DeviceKey, int], device: DeviceKey, sign: int) -> None:
    left = counts.get(device, 0) + sign
    if left:
        counts[device] = left
    else:
        del counts[device]
