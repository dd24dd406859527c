"""What every front end must answer about a cluster, computed from its raw objects by the
oracle (`tests.oracle.truth`) and, for the free devices, by a naive reading of the counters:
no code of the mirror is used.

A device consuming counters of a counter set is a part of one physical device; the member of
the set that consumes every counter any member consumes is the whole device. Free devices
are counted once: the free partitions of a free whole device are listed under it.
"""

from __future__ import annotations

from collections.abc import Iterable

from tests.oracle import reading
from tests.oracle.reading import Raw
from tests.oracle.truth import DeviceId, Truth, answer


def truth_of(objects: Iterable[Raw]) -> Truth:
    return answer(list(objects))


def whole_of(objects: Iterable[Raw]) -> dict[DeviceId, DeviceId]:
    """Partition -> whole device, from the slices' consumesCounters."""
    groups: dict[tuple[str, str, str], list[tuple[DeviceId, frozenset[str]]]] = {}
    for s in (o for o in objects if o.get("kind") == "ResourceSlice"):
        driver, pool, _, _ = reading.pool(s)
        for device in reading.devices(s):
            for use in device.get("consumesCounters") or []:
                names = frozenset(use.get("counters") or {})
                key = (driver, pool, use.get("counterSet") or "")
                groups.setdefault(key, []).append(((driver, pool, device["name"]), names))
    parent: dict[DeviceId, DeviceId] = {}
    for members in groups.values():
        every = frozenset().union(*(n for _, n in members))
        wholes = sorted(d for d, n in members if n >= every)
        if wholes and len(members) > 1:
            for d, _ in members:
                if d != wholes[0]:
                    parent.setdefault(d, wholes[0])
    return parent


def free_rows(objects: list[Raw]) -> tuple[set[DeviceId], dict[DeviceId, set[DeviceId]]]:
    """The free devices counted (a partition of a free whole device is not) and, per whole
    device, its free partitions."""
    truth = truth_of(objects)
    free = {k for k, d in truth.devices.items() if d.published and d.status == "free"}
    parent = whole_of(objects)
    nested: dict[DeviceId, set[DeviceId]] = {}
    top = set()
    for key in free:
        whole = parent.get(key)
        if whole is not None and whole in free:
            nested.setdefault(whole, set()).add(key)
        else:
            top.add(key)
    return top, nested
