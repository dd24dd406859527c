"""Derived state of devices: free, held, shared or blocked, and what capacity is left.

Rules (a device is `(cluster, driver, pool, device)`; only the valid slices of a pool count,
`service.model.pools`):

* a device with no allocation is `free`, unless it consumes counters of a shared counter set
  (a MIG partition of a GPU) and those counters no longer fit because sibling partitions of the
  same set are allocated: then it is `blocked`;
* a device held by claims is `shared` when it allows multiple allocations
  (`allowMultipleAllocations`, each hold carrying a shareID and consumedCapacity), otherwise
  `held` (exclusive);
* an admin-access hold consumes nothing: claims with adminAccess "ignore all ordinary claims to
  the device with respect to access modes and any resource allocations" (resource/v1
  DeviceRequest.adminAccess), and kube-scheduler does not count their results as allocated. A
  device only admin-access claims hold is free (or blocked) as if unheld; they stay its holders;
* counters are a pool resource: the counter sets of a pool's valid generation minus what every
  allocated device of that pool consumes (a device held several times consumes once);
* remaining capacity of a device: each capacity's value minus the consumedCapacity of every
  consuming hold; an exclusive hold consumes everything. consumedCapacity names a capacity as
  the claim's writer spelled it: an unqualified name is in the driver's domain (QualifiedName),
  so both sides compare qualified. Results keep the format of the capacity value.

All functions are pure and take records, so the index, the stores, the schema and the
simulator compute the same answers. What they are computed over — the holds on each device and
each pool's valid generation — is `holdings.Taken` (the cluster's index, or `Holdings` of one
read); the allocator's ledger (`service.diagnostics.ledger`) reads both and adds only the
holds a placement imagines.

Physical capacity — a GPU and its partitions (the devices that consume one counter set, or a
static MIG device's parent), each device's GPU-equivalent weight and what each hold takes of
it — is `service.model.physical`, computed from a pool's valid generation (its devices and
counter sets) and kept by the index beside the devices.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from fractions import Fraction

from dra_mirror.service.model.metadata import qualify
from dra_mirror.service.model.quantity import format_quantity, parse_quantity
from dra_mirror.service.model.records import (
    BLOCKED,
    FREE,
    HELD,
    SHARED,
    AllocationRef,
    CounterSet,
    Device,
    DeviceEntry,
)

CountersFree = Mapping[str, Mapping[str, Fraction]]  # counter set -> counter -> amount left
TAKEN = frozenset({HELD, SHARED})  # the statuses of a device a hold takes


def amount(quantity: str) -> Fraction:
    """A counter's or a capacity's quantity (0 for one that does not parse)."""
    try:
        return parse_quantity(quantity)
    except ValueError:
        return Fraction(0)  # the API server validated it; a bad string consumes nothing


def counters_free(
    counter_sets: Iterable[CounterSet], allocated: Iterable[Device]
) -> dict[str, dict[str, Fraction]]:
    """What is left of a pool's shared counters once `allocated` devices took theirs."""
    left = {
        cs.name: {name: amount(value) for name, value in cs.counters.items()} for cs in counter_sets
    }
    for device in allocated:
        for consumption in device.consumes_counters:
            counters = left.get(consumption.counter_set)
            if counters is None:
                continue
            for name, value in consumption.counters.items():
                if name in counters:
                    counters[name] -= amount(value)
    return left


def counters_fit(device: Device, free: CountersFree | None) -> bool:
    """True when every counter the device consumes is still available in `free`."""
    if not device.consumes_counters or free is None:
        return True
    for consumption in device.consumes_counters:
        counters = free.get(consumption.counter_set)
        if counters is None:
            continue  # the counter set is not published (yet): nothing blocks
        for name, value in consumption.counters.items():
            if name in counters and counters[name] < amount(value):
                return False
    return True


def consuming(holds: Iterable[AllocationRef]) -> list[AllocationRef]:
    """The holds that take the device: every hold but admin-access ones."""
    return [h for h in holds if not h.admin_access]


def consumes(holds: Iterable[AllocationRef]) -> bool:
    """Whether any of the holds takes the device (is not admin access)."""
    return any(not h.admin_access for h in holds)


def device_status(
    entry: DeviceEntry | Device,
    holds: Sequence[AllocationRef],
    *,
    counters_free: CountersFree | None = None,
) -> str:
    """free | held | shared | blocked. `counters_free` is the pool's (see `counters_free()`)."""
    device = entry.device if isinstance(entry, DeviceEntry) else entry
    if consumes(holds):
        return SHARED if device.shareable else HELD
    if not counters_fit(device, counters_free):
        return BLOCKED
    return FREE


def consumed_by(holds: Iterable[AllocationRef], driver: str) -> dict[str, Fraction]:
    """What the consuming holds take of each capacity, by qualified name."""
    used: dict[str, Fraction] = {}
    for hold in holds:
        if hold.admin_access:
            continue
        for name, quantity in hold.consumed_capacity.items():
            key = qualify(name, driver)
            used[key] = used.get(key, Fraction(0)) + amount(quantity)
    return used


def remaining(entry: DeviceEntry, holds: Sequence[AllocationRef]) -> dict[str, Fraction]:
    """Per capacity (qualified name), what is left after every consuming hold: a shareable
    device's capacity minus its shares' consumedCapacity (below zero when they overran it), an
    exclusively held device's nothing."""
    device = entry.device
    taking = consuming(holds)
    if taking and not device.shareable:
        return {name: Fraction(0) for name in device.capacity}
    used = consumed_by(taking, entry.key.driver) if device.shareable else {}
    return {
        name: amount(capacity.value) - used.get(name, Fraction(0))
        for name, capacity in device.capacity.items()
    }


def remaining_capacity(entry: DeviceEntry, holds: Sequence[AllocationRef]) -> dict[str, str]:
    """`remaining`, in the format of each capacity's value (never below zero)."""
    left = remaining(entry, holds)
    return {
        name: format_quantity(max(left[name], Fraction(0)), like=capacity.value)
        for name, capacity in entry.device.capacity.items()
    }
