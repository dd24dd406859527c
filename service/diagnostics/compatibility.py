"""Device compatibility groups (KEP-5963, alpha, DRADeviceCompatibilityGroups): which
partitions of one counter set may be allocated at the same time.

A driver tags each `consumesCounters[]` entry of a device with the groups it agrees to be
allocated alongside (`compatibilityGroups`, e.g. `mig` or `vgpu` for the two partitioning
schemes of one GPU). The KEP's rule: "For two devices consuming counters from the same counter
set to be allocated together, either both must leave the field unset, or both must declare it
and share at least one group name" (nil and empty are the same). Two devices that share no
counter set are never compared. The scheduler reads the groups of devices already allocated from
the snapshot it wrote on their allocation result (`DeviceRequestAllocationResult
.compatibilityGroups`, counter set -> groups, written only when the device declared a group on
some counter set), never from the slice, which may have changed since; `snapshot(entry)` is
that snapshot for a device this allocator picks.

`conflicts(entry, ledger, picked)` says whether a candidate's groups clash with a held sibling's
snapshot or with a device this allocation already picked on a shared counter set. It answers
at once for pools where no device declares groups (the usual case).

Promises: pure; O(devices of the pool) for a candidate that declares groups, or whose pool has
a device that does.
"""

from __future__ import annotations

from collections.abc import Iterable

from dra_mirror.service.diagnostics.ledger import Ledger
from dra_mirror.service.model.records import DeviceEntry

__all__ = ["compatible", "conflicts", "groups_of", "snapshot"]


def groups_of(entry: DeviceEntry) -> dict[str, frozenset[str]]:
    """Counter set -> the groups the device declares on it (empty: none)."""
    return {
        c.counter_set: frozenset(c.compatibility_groups) for c in entry.device.consumes_counters
    }


def snapshot(entry: DeviceEntry) -> dict[str, tuple[str, ...]]:
    """What the scheduler records on the allocation result: every counter set's groups, when
    the device declares a group on any of them; else nothing."""
    consumptions = entry.device.consumes_counters
    if not any(c.compatibility_groups for c in consumptions):
        return {}
    return {c.counter_set: tuple(c.compatibility_groups) for c in consumptions}


def compatible(mine: frozenset[str], theirs: frozenset[str]) -> bool:
    """Both undeclared, or both declared with a group in common."""
    return (not mine and not theirs) or bool(mine & theirs)


def conflicts(entry: DeviceEntry, ledger: Ledger, picked: Iterable[DeviceEntry] = ()) -> bool:
    """Whether the candidate may not join what its counter sets already serve: a held
    sibling's snapshot, or a device this allocation picked."""
    mine = groups_of(entry)
    if not mine:
        return False
    key = entry.key
    if not any(mine.values()) and not ledger.declares_groups(key.driver, key.pool):
        return False
    for other in picked:
        if other.key == key or (other.key.driver, other.key.pool) != (key.driver, key.pool):
            continue
        picked_groups = groups_of(other)
        if any(not compatible(g, picked_groups[s]) for s, g in mine.items() if s in picked_groups):
            return True
    for sibling_key, sibling in ledger.base.pool(key.driver, key.pool).devices.items():
        if sibling_key == key:
            continue
        shared = mine.keys() & {c.counter_set for c in sibling.device.consumes_counters}
        if not shared:
            continue
        for hold in ledger.holds(sibling_key):
            if hold.admin_access:
                continue  # an observer holds no counters
            for counter_set in shared:
                theirs = frozenset(hold.compatibility_groups.get(counter_set, ()))
                if not compatible(mine[counter_set], theirs):
                    return True
    return False
