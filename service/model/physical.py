"""Physical capacity: which physical device each device is part of, and how much of it it is.

A driver publishes devices; people buy, count and bill physical devices — GPUs, NICs. Rules
(over the valid devices of one pool, `pools.ValidPool`, and the pool's shared counter sets):

* **one physical device per counter set**: the devices that consume counters of one shared
  counter set (KEP-4815 partitionable devices: a GPU's MIG partitions and the whole GPU) are
  one physical device. Its identity is the uuid of the whole device (the member consuming all
  of every counter of the set; the first by name when several do), else the `parentUUID` the members name, else
  `<driver>/<pool>/<counter set>`;
* **static MIG devices group under their parent**: a device with a `parentUUID` attribute (the
  NVIDIA driver's) and no counters is part of the physical device of that uuid;
* otherwise **a device is its own physical device**, known by its uuid, else
  `<driver>/<pool>/<device>`;
* **counted once**: in inventory a physical device counts through one of its devices — its
  whole device, else its first partition by name (a static MIG device's parent when
  published, else its first MIG device by name); `Unit.counter` names that device as history
  knows it (uuid, else `<driver>/<pool>/<device>`), so a class selecting any device of a GPU
  counts the GPU, whatever the GPU's own identity;
* **type**: `gpu` (attribute `type` gpu/mig/vgpu, or a driver named `gpu.*`), `nic` (attribute
  `type` nic, a CNI/network driver, or an `interfaceName` attribute), otherwise the driver's
  name. Types are never added together: a count or a sum of GPU-equivalents is per type;
* **GPU-equivalent weight** of a device (how much of its physical device it takes when
  allocated): a whole device 1; a partition its share of the counter set, measured by the
  dominant counter of GPUs — memory slices (`memory-slice-N` / `memorySliceN` counters: the
  slices it consumes over the slices of the set); a counter set with no memory slices uses the
  largest share over its counters. A static MIG device: its `memory` capacity over its
  parent's (the parent published in the pool, else the largest whole GPU of the same
  `productName` in the pool, else an equal part among the parent's partitions);
* **what a hold takes** (`hold_weights`): an admin-access hold 0 (it consumes nothing); a hold
  on a shareable device (`allowMultipleAllocations`) its consumed capacity over the device's
  capacity, by the dominant capacity (a share asking 10G of a 100G NIC takes 0.1 of it); a
  share that consumes no capacity an equal part of what the capacity-consuming shares leave;
  any other hold the device's weight.

**What a physical device is doing** (`physical_state`, from its devices' statuses):
`shared` when a shareable device of it is shared, `whole` when its whole device (or a device
taking all of it) is held, `partitioned` when some of its partitions are held, else `free`.

Pure: `pool_units` is O(pool size); the index keeps its answer per pool beside the devices
(`devices_index`), recomputed on every slice event of the pool, and readers of a store compute
the same from the same devices. `product_name` reads the model a driver publishes
(`productName`, `model`, `product`): what history records per hold and prices are set per.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from fractions import Fraction
from typing import Any

from msgspec import Struct

from dra_mirror.service.model.inventory import amount, consumed_by
from dra_mirror.service.model.records import (
    HELD,
    SHARED,
    AllocationRef,
    CounterSet,
    DeviceEntry,
    DeviceKey,
)

__all__ = [
    "GPU",
    "NIC",
    "Unit",
    "device_type",
    "dominant_share",
    "entry_product",
    "hold_weights",
    "lone_unit",
    "lone_unit_of_key",
    "physical_state",
    "pool_units",
    "product_name",
    "units_of",
]

GPU = "gpu"
NIC = "nic"
_GPU_TYPES = frozenset({"gpu", "mig", "vgpu"})
_MEMORY_SLICE = re.compile(r"^memory-?slice-?\d+$", re.IGNORECASE)
_ONE = Fraction(1)


class Unit(Struct, frozen=True, gc=False):
    """A device's place in physical capacity (see the module docstring)."""

    physical: str  # the physical device: a uuid, or driver/pool/<counter set or device>
    type: str  # gpu | nic | the driver's name
    weight: Fraction  # GPU-equivalents (of its type) the device takes when allocated
    whole: bool  # the device is the whole physical device (not one of its partitions)
    # the device that counts its physical device once in inventory: the whole device, else
    # the first of its partitions by name
    counted: bool = False
    # that device's identity in history (its uuid, else driver/pool/device): what a class
    # selecting any device of the physical device counts in inventory ("" : this device's)
    counter: str = ""


def _attribute(entry: DeviceEntry, name: str) -> object:
    for key, attribute in entry.device.attributes.items():
        if key == name or key.rsplit("/", 1)[-1] == name:
            return attribute.value
    return None


_PRODUCT_KEYS = ("productName", "model", "product")


def product_name(attributes: Mapping[str, Any] | None) -> str | None:
    """The product name a driver publishes (`productName`, `model`, `product`), qualified or
    not: what prices are set per (`service.history.prices`) and what screens name a model by."""
    for wanted in _PRODUCT_KEYS:
        for name, value in (attributes or {}).items():
            if name.rsplit("/", 1)[-1] == wanted and value not in (None, ""):
                return str(value)
    return None


def entry_product(entry: DeviceEntry) -> str | None:
    """`product_name` of a device's attributes, in one pass over them (every hold asks)."""
    found: dict[str, Any] = {}
    for name, attribute in entry.device.attributes.items():
        short = name.rsplit("/", 1)[-1]
        if short in _PRODUCT_KEYS and short not in found and attribute.value not in (None, ""):
            found[short] = attribute.value
    return next((str(found[k]) for k in _PRODUCT_KEYS if k in found), None)


def _capacity(entry: DeviceEntry, name: str) -> Fraction | None:
    for key, capacity in entry.device.capacity.items():
        if key.rsplit("/", 1)[-1] == name:
            return amount(capacity.value)
    return None


def device_type(entry: DeviceEntry) -> str:
    """gpu | nic | the driver's name (see the module docstring)."""
    kind = _attribute(entry, "type")
    kind = kind.lower() if isinstance(kind, str) else None
    driver = entry.key.driver
    if kind in _GPU_TYPES or driver.startswith("gpu."):
        return GPU
    if kind == NIC or any(word in driver for word in ("networking", "cni.", "nic.", "net.")):
        return NIC
    if _attribute(entry, "interfaceName") is not None:
        return NIC
    return driver


def _name(entry: DeviceEntry, tail: str) -> str:
    return f"{entry.key.driver}/{entry.key.pool}/{tail}"


def _share(used: Mapping[str, Fraction], total: Mapping[str, Fraction]) -> Fraction:
    """What `used` takes of `total`: memory slices when the set has them, else the largest
    share over its counters; between 0 and 1."""
    slices = [name for name in total if _MEMORY_SLICE.match(name)]
    if slices:
        whole = sum((total[n] for n in slices), Fraction(0))
        part = sum((used.get(n, Fraction(0)) for n in slices), Fraction(0))
        share = part / whole if whole > 0 else Fraction(0)
    else:
        share = max(
            (used.get(n, Fraction(0)) / v for n, v in total.items() if v > 0), default=Fraction(0)
        )
    return min(max(share, Fraction(0)), _ONE)


def pool_units(
    devices: Iterable[DeviceEntry], counter_sets: Sequence[CounterSet] = ()
) -> dict[DeviceKey, Unit]:
    """Every device of one pool's valid generation with its unit (see the module docstring).
    Without `counter_sets` (a reader that has the devices only) a set's totals are what its
    members consume at most, which the whole device consumes."""
    entries = list(devices)
    units: dict[DeviceKey, Unit] = {}
    totals = {cs.name: {n: amount(v) for n, v in cs.counters.items()} for cs in counter_sets}
    groups: dict[str, list[tuple[DeviceEntry, dict[str, Fraction]]]] = {}
    for entry in entries:
        if entry.device.consumes_counters:
            use = entry.device.consumes_counters[0]  # a device is part of one GPU
            consumed = {n: amount(v) for n, v in use.counters.items()}
            groups.setdefault(use.counter_set, []).append((entry, consumed))
    for set_name, members in groups.items():
        total = totals.get(set_name)
        if total is None:
            total = {}
            for _, consumed in members:
                for n, v in consumed.items():
                    total[n] = max(total.get(n, Fraction(0)), v)
        wholes = sorted(
            (
                e
                for e, consumed in members
                if all(consumed.get(n, Fraction(0)) >= v for n, v in total.items())
            ),
            key=lambda e: e.key,
        )
        whole = wholes[0] if wholes else None
        named = [p for e, _ in members if isinstance(p := _attribute(e, "parentUUID"), str)]
        parent = named[0] if named else None
        physical = (
            (whole.device.uuid if whole is not None else None)
            or parent
            or _name(members[0][0], set_name)
        )
        kind = device_type(whole if whole is not None else members[0][0])
        first = min(e.key for e, _ in members)
        counter = _identity(
            whole if whole is not None else next(e for e, _ in members if e.key == first)
        )
        for entry, consumed in members:
            is_whole = entry is whole
            weight = _ONE if is_whole else _share(consumed, total)
            counted = is_whole or (whole is None and entry.key == first)
            units[entry.key] = Unit(physical, kind, weight, is_whole, counted, counter)
    by_uuid = {e.device.uuid: e for e in entries if e.device.uuid}
    children: dict[str, list[DeviceEntry]] = {}
    for entry in entries:
        if entry.key in units:
            continue
        parent_of = _attribute(entry, "parentUUID")
        if isinstance(parent_of, str) and parent_of and parent_of != entry.device.uuid:
            children.setdefault(parent_of, []).append(entry)
            continue
        units[entry.key] = lone_unit(entry)
    for parent_uuid, parts in children.items():
        parent_entry = by_uuid.get(parent_uuid)
        parent_memory = _parent_memory(parent_entry, parts[0], entries)
        first = min(e.key for e in parts)
        counter = _identity(parent_entry or next(e for e in parts if e.key == first))
        for entry in parts:
            memory = _capacity(entry, "memory")
            if parent_memory and memory is not None:
                weight = min(memory / parent_memory, _ONE)
            else:
                weight = Fraction(1, len(parts))
            counted = parent_entry is None and entry.key == first
            units[entry.key] = Unit(parent_uuid, GPU, weight, False, counted, counter)
    return units


def _identity(entry: DeviceEntry) -> str:
    """A device as history knows it: its uuid, else driver/pool/device."""
    return entry.device.uuid or _name(entry, entry.key.device)


def lone_unit(entry: DeviceEntry) -> Unit:
    """The unit of a device that is its own physical device (and of a held device no slice
    publishes any more: what it was part of is no longer known)."""
    return Unit(
        entry.device.uuid or _name(entry, entry.key.device), device_type(entry), _ONE, True, True
    )


def lone_unit_of_key(key: DeviceKey) -> Unit:
    """The unit of a device known by its key alone (no entry: nothing publishes or holds it)."""
    kind = GPU if key.driver.startswith("gpu.") else key.driver
    return Unit(f"{key.driver}/{key.pool}/{key.device}", kind, _ONE, True, True)


def _parent_memory(
    parent: DeviceEntry | None, child: DeviceEntry, entries: Sequence[DeviceEntry]
) -> Fraction | None:
    if parent is not None:
        return _capacity(parent, "memory")
    product = _attribute(child, "productName")
    found = [
        m
        for e in entries
        if _attribute(e, "parentUUID") is None
        and product is not None
        and _attribute(e, "productName") == product
        and (m := _capacity(e, "memory")) is not None
    ]
    return max(found) if found else None


def units_of(entries: Iterable[DeviceEntry]) -> dict[DeviceKey, Unit]:
    """`pool_units` of every pool among `entries` (published devices of one or more clusters,
    each pool whole), from the devices alone."""
    pools: dict[tuple[str, str, str], list[DeviceEntry]] = {}
    for entry in entries:
        pools.setdefault((entry.key.cluster, entry.key.driver, entry.key.pool), []).append(entry)
    units: dict[DeviceKey, Unit] = {}
    for members in pools.values():
        units.update(pool_units(members))
    return units


def dominant_share(entry: DeviceEntry, hold: AllocationRef) -> Fraction | None:
    """What a share takes of a shareable device: its consumed capacity over the device's
    capacity, by the dominant capacity (None: it consumes no capacity the device publishes)."""
    used = consumed_by([hold], entry.key.driver)
    shares = [
        used[name] / total
        for name, capacity in entry.device.capacity.items()
        if name in used and (total := amount(capacity.value)) > 0
    ]
    return min(max(shares), _ONE) if shares else None


def hold_weights(entry: DeviceEntry, unit: Unit, holds: Sequence[AllocationRef]) -> list[Fraction]:
    """The GPU-equivalents each hold on the device takes, in the order of `holds` (see the
    module docstring); their sum never exceeds the device's weight."""
    weights = [Fraction(0)] * len(holds)
    taking = [i for i, h in enumerate(holds) if not h.admin_access]
    if not taking:
        return weights
    if not entry.device.shareable:
        for i in taking:
            weights[i] = unit.weight / len(taking)  # one claim holds it (repeats share it)
        return weights
    unmeasured = []
    used = Fraction(0)
    for i in taking:
        share = dominant_share(entry, holds[i])
        if share is None:
            unmeasured.append(i)
        else:
            weights[i] = min(share, _ONE - used) * unit.weight
            used = min(used + share, _ONE)
    for i in unmeasured:
        weights[i] = (_ONE - used) * unit.weight / len(unmeasured)
    return weights


FREE_STATE, WHOLE_STATE, PARTITIONED_STATE, SHARED_STATE = "free", "whole", "partitioned", "shared"


def physical_state(members: Iterable[tuple[Unit, str | None]]) -> str:
    """free | whole | partitioned | shared: what a physical device is doing, from the status
    (`inventory`: free, held, shared, blocked) of each of its devices with its unit."""
    state = FREE_STATE
    for unit, status in members:
        if status == SHARED:
            return SHARED_STATE
        if status == HELD:
            if unit.whole or unit.weight >= _ONE:
                state = WHOLE_STATE
            elif state == FREE_STATE:
                state = PARTITIONED_STATE
    return state
