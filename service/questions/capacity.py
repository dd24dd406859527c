"""Capacity: how many devices each cluster has, per driver, and what they are doing now.

`capacity(asker, cluster=None)` counts, per cluster and driver, from the devices of valid
pools the asker sees and the status the model derived for each (`service.model.inventory`):

* `devices` — devices, a partition not counted beside the whole device it is part of (the
  device consuming every counter of its counter set: `free.whole_devices`); partitions whose
  whole device is not published are counted as devices;
* of those, `free`, `in_use` (held, or shared by several claims), `partitioned` (free itself,
  but some of its partitions are in use: blocked), and `tainted` (a NoSchedule/NoExecute
  taint keeps claims that do not tolerate it away, free or not);
* `partitions`, and of them `partitions_in_use` and `partitions_free` (the others are blocked
  by their siblings or their whole device);
* `unpublished` — devices claims hold that no slice publishes any more (not in `devices`).

and, in physical devices (`service.model.physical`: a GPU with its partitions is one, a
static MIG device counts under its parent):

* `type` — gpu, nic, or the driver's name: what the physical counts count;
* `physical` — physical devices, and of them `physical_free`, `physical_whole` (in use whole),
  `physical_partitioned` (some partitions in use) and `physical_shared` (a shareable device
  shared by claims);
* `held_equivalents` — GPU-equivalents held (of that type): a whole device 1, a partition its
  share of the GPU's memory slices, a share its consumed capacity over the device's; admin
  access nothing. Unpublished held devices count 1 each here;
* `partitioned_devices` — the partitioned and shared physical devices, each with its devices
  in use listed under it.

`devices`, `partitions` and their splits stay in devices (KEP-5677's pool counts are in devices
too); the `physical*` counts are what people buy and count. Every count is per driver: GPUs and
NICs are never added together. Holders outside the asker's scope count (held is held); their
names are never read.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

from dra_mirror.service.model import physical
from dra_mirror.service.model.records import BLOCKED, FREE, HELD, SHARED, DeviceEntry

from .asker import Asker
from .cluster_state import local_statuses
from .free import taint_words, whole_devices

__all__ = ["CapacityRow", "PhysicalDevice", "capacity"]

IN_USE = (HELD, SHARED)


@dataclass
class PhysicalDevice:
    """A physical device (a GPU, a NIC) whose parts are in use: partitions or shares."""

    physical: str  # its uuid (else driver/pool/<counter set or device>)
    node: str | None
    state: str  # partitioned | shared
    held_equivalents: float  # of it, held
    in_use: list[str] = field(default_factory=list)  # its devices held or shared


@dataclass
class CapacityRow:
    cluster: str
    driver: str
    devices: int = 0
    free: int = 0
    in_use: int = 0
    partitioned: int = 0
    tainted: int = 0
    partitions: int = 0
    partitions_free: int = 0
    partitions_in_use: int = 0
    unpublished: int = 0
    type: str = ""
    physical: int = 0
    physical_free: int = 0
    physical_whole: int = 0
    physical_partitioned: int = 0
    physical_shared: int = 0
    held_equivalents: float = 0.0
    partitioned_devices: list[PhysicalDevice] = field(default_factory=list)


async def capacity(asker: Asker, cluster: str | None = None) -> list[CapacityRow]:
    """Rows per cluster and driver, sorted."""
    reader = asker.reader
    rows: dict[tuple[str, str], CapacityRow] = {}
    for name in await asker.check_cluster(cluster):
        if not reader.scope.allows(name, ""):
            continue
        index = reader.index(name)
        if index is not None:
            entries = list(index.devices())
            unpublished = [e for e in await reader.list_devices(cluster=name, published=False)]
        else:
            every = await reader.list_devices(cluster=name, published=None)
            entries = [e for e in every if e.published]
            unpublished = [e for e in every if not e.published]
        statuses = local_statuses(reader, entries)
        missing = [i for i, s in enumerate(statuses) if s is None]
        if missing:
            found = await reader.device_status([entries[i].key for i in missing])
            for i, status in zip(missing, found, strict=True):
                statuses[i] = status
        parent = whole_devices(entries)
        for entry, status in zip(entries, statuses, strict=True):
            key = entry.key
            row = rows.setdefault((name, key.driver), CapacityRow(name, key.driver))
            if key in parent:
                row.partitions += 1
                row.partitions_free += status == FREE
                row.partitions_in_use += status in IN_USE
                continue
            row.devices += 1
            row.free += status == FREE
            row.in_use += status in IN_USE
            row.partitioned += status == BLOCKED
            row.tainted += bool(taint_words(entry))
        units = (
            {e.key: index.unit(e.key) for e in entries}
            if index is not None
            else physical.units_of(entries)
        )
        taken = [i for i, s in enumerate(statuses) if s in IN_USE] + [
            len(entries) + i for i in range(len(unpublished))
        ]
        every = entries + unpublished
        if index is not None:
            holds = [index.holds(every[i].key) for i in taken]
        else:
            keys = [every[i].key for i in taken]
            holds = list(await reader.every_holder(keys))  # type: ignore[attr-defined]
        held: dict[str, Fraction] = {}
        for i, refs in zip(taken, holds, strict=True):
            entry = every[i]
            unit = units.get(entry.key) or physical.lone_unit(entry)
            weight = sum(physical.hold_weights(entry, unit, refs), Fraction(0))
            held[unit.physical] = held.get(unit.physical, Fraction(0)) + weight
        _count_physical(rows, name, entries, statuses, units, held)
        for entry in unpublished:
            key = entry.key
            row = rows.setdefault((name, key.driver), CapacityRow(name, key.driver))
            row.unpublished += 1
            unit = physical.lone_unit(entry)
            row.type = row.type or unit.type
            row.held_equivalents += float(held.get(unit.physical, 0))
    return [rows[k] for k in sorted(rows)]


def _count_physical(
    rows: dict[tuple[str, str], CapacityRow],
    cluster: str,
    entries: list[DeviceEntry],
    statuses: list[str | None],
    units: dict,
    held: dict[str, Fraction],
) -> None:
    """Each physical device once, in its driver's row: its state and what of it is held."""
    groups: dict[tuple[str, str], list[tuple[DeviceEntry, physical.Unit, str | None]]] = {}
    for entry, status in zip(entries, statuses, strict=True):
        unit = units[entry.key]
        groups.setdefault((entry.key.driver, unit.physical), []).append((entry, unit, status))
    for (driver, physical_id), members in sorted(groups.items()):
        row = rows[(cluster, driver)]
        row.type = members[0][1].type
        state = physical.physical_state((u, s) for _, u, s in members)
        row.physical += 1
        row.physical_free += state == physical.FREE_STATE
        row.physical_whole += state == physical.WHOLE_STATE
        row.physical_partitioned += state == physical.PARTITIONED_STATE
        row.physical_shared += state == physical.SHARED_STATE
        share = held.get(physical_id, Fraction(0))
        row.held_equivalents += float(share)
        if state in (physical.PARTITIONED_STATE, physical.SHARED_STATE):
            row.partitioned_devices.append(
                PhysicalDevice(
                    physical=physical_id,
                    node=members[0][0].node,
                    state=state,
                    held_equivalents=float(share),
                    in_use=sorted(e.key.device for e, _, s in members if s in IN_USE),
                )
            )
