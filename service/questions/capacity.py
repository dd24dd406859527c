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

Every count is in devices of that driver: GPUs and NICs are never added together. Holders
outside the asker's scope count (held is held); their names are never read.
"""

from __future__ import annotations

from dataclasses import dataclass

from dra_mirror.service.model.records import BLOCKED, FREE, HELD, SHARED

from .asker import Asker
from .cluster_state import local_statuses
from .free import taint_words, whole_devices

__all__ = ["CapacityRow", "capacity"]

IN_USE = (HELD, SHARED)


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
        for entry in unpublished:
            key = entry.key
            rows.setdefault((name, key.driver), CapacityRow(name, key.driver)).unpublished += 1
    return [rows[k] for k in sorted(rows)]
