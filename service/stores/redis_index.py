"""The writer's indexes (key layout 2): what API replicas need to answer lists, filters and counts
without reading a whole kind.

Kept per cluster in sorted sets whose scores are all 0, so members come back in lexical order,
which is key order (redis_keys: `namespace NUL name`, `driver NUL pool NUL device`):

    x:ord:<Kind>        every record of the kind                  (upserts, deletes)
    x:state:<state>     claims in that state: pending | allocated | reserved | deleting
    x:idle              idle claims (allocated, no consumer pod Running)
    x:uses              pods that ask for devices (service.model.pods.uses_devices)
    x:dev               devices of valid pool generations
    x:unpub             devices held and published by no slice
    x:status:<status>   valid devices in that status: free | held | shared | blocked
    x:class:<name>      valid devices the DeviceClass offers      (service.model.class_members)
    x:classes           SET: the class names that have had an index (for a rebuild)

Promises:

* written from the `Changes` alone, in the same `MULTI … EXEC` as the records they index
  (redis_writes.Ops): records' own fields (a claim's state, a pod's use of devices) and the
  model's delta (devices, unpublished devices, statuses, idle marks, class members). Nothing is
  derived here;
* a fact is set absolutely — the member is added to the set of its value and removed from the
  sets of every other value — so no old value is needed and a batch sent twice changes nothing
  more; deletes remove the member from every set of its kind;
* every filter set is a subset of its kind's base set (x:ord:ResourceClaim, x:ord:Pod, x:dev),
  which the reader's counts rely on (redis_select.py); counts are the sets' cardinalities,
  kept by Redis: nothing to drift, nothing counted twice by a retried batch;
* `snapshot(view, members)` is every index entry of a whole index, as one `Changes`: what a
  writer that took over a cluster written without these indexes (an older writer, layout 1)
  writes once, after dropping what the indexes held (`index_keys`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TypeVar

from dra_mirror.service.model.changes import Changes
from dra_mirror.service.model.class_members import ClassMembers
from dra_mirror.service.model.delta import IndexDelta
from dra_mirror.service.model.kinds import KINDS
from dra_mirror.service.model.pods import uses_devices
from dra_mirror.service.model.records import (
    ALLOCATED,
    BLOCKED,
    DELETING,
    FREE,
    HELD,
    PENDING,
    POD,
    RESERVED,
    RESOURCE_CLAIM,
    SHARED,
    ClaimRecord,
    DeviceKey,
    ObjectKey,
    PodRecord,
    Record,
    key_of,
)
from dra_mirror.service.model.view import IndexView
from dra_mirror.service.stores.redis_keys import Keys, device_member, object_member

K = TypeVar("K")
STATES = (PENDING, ALLOCATED, RESERVED, DELETING)
STATUSES = (FREE, HELD, SHARED, BLOCKED)
DEVICES = "dev"
UNPUBLISHED = "unpub"
IDLE = "idle"
USES = "uses"

Spec = tuple[bytes, str, Iterable[bytes], int]  # command, key, arguments, arguments per group


def ordered(kind: str) -> str:
    return f"ord:{kind}"


def state(value: str) -> str:
    return f"state:{value}"


def status(value: str) -> str:
    return f"status:{value}"


def class_index(name: str) -> str:
    return f"class:{name}"


def index_keys(keys: Keys, class_names: Iterable[str]) -> list[str]:
    """Every index key of a cluster (the classes' as named), for a rebuild to drop first."""
    names = [ordered(k) for k in KINDS] + [state(s) for s in STATES]
    names += [status(s) for s in STATUSES] + [IDLE, USES, DEVICES, UNPUBLISHED]
    names += [class_index(c) for c in sorted(set(class_names))]
    return [keys.index(n) for n in names] + [keys.classes]


def _scored(members: Iterable[bytes]) -> Iterator[bytes]:
    for member in members:
        yield b"0"
        yield member


def _set(key: str, members: Callable[[bool], Iterable[bytes]]) -> Iterator[Spec]:
    """ZREM of `members(False)`, ZADD of `members(True)`: made as they are sent (a batch's
    members are never held at once)."""
    yield (b"ZREM", key, members(False), 1)
    yield (b"ZADD", key, _scored(members(True)), 2)


def commands(keys: Keys, changes: Changes) -> Iterator[Spec]:
    """The index writes of one batch (see the module docstring)."""
    kinds = {key_of(r).kind for r in changes.upserts} | {key_of(r).kind for r in changes.deletes}
    for kind in sorted(kinds):
        yield from _set(keys.index(ordered(kind)), _records_of(changes, kind))
    if RESOURCE_CLAIM in kinds:
        present = {c.state for c in changes.upserts if isinstance(c, ClaimRecord)}
        for value in dict.fromkeys([*STATES, *sorted(present)]):
            yield from _set(keys.index(state(value)), _claims_in(changes, value))
    if POD in kinds:
        yield from _set(keys.index(USES), _pods_using(changes))
    yield from delta_commands(keys, changes.delta)


def delta_commands(keys: Keys, delta: IndexDelta) -> Iterator[Spec]:
    for name, entries in ((DEVICES, delta.devices), (UNPUBLISHED, delta.unpublished)):
        if entries:
            yield from _set(keys.index(name), _present(entries, device_member))
    if delta.statuses:
        values = delta.statuses
        present = {v for v in values.values() if v is not None}
        for value in dict.fromkeys([*STATUSES, *sorted(present)]):
            yield from _set(keys.index(status(value)), _keyed_value(values, value, device_member))
    if delta.idle:
        yield from _set(keys.index(IDLE), _present(delta.idle, _claim_member))
    names = sorted({name for name, _ in delta.classes})
    for name in names:
        if any(member for (n, _), member in delta.classes.items() if n == name):
            yield (b"SADD", keys.classes, [name.encode()], 1)
        yield from _set(keys.index(class_index(name)), _class_members(delta.classes, name))


def _object(record: Record) -> bytes:
    meta = record.meta
    return object_member(meta.namespace, meta.name)


def _claim_member(key: ObjectKey) -> bytes:
    return object_member(key.namespace, key.name)


def _records(changes: Changes) -> Iterator[tuple[Record, bool]]:
    for record in changes.deletes:
        yield record, False
    for record in changes.upserts:
        yield record, True


def _records_of(changes: Changes, kind: str) -> Callable[[bool], Iterator[bytes]]:
    def members(present: bool) -> Iterator[bytes]:
        for record in changes.upserts if present else changes.deletes:
            if key_of(record).kind == kind:
                yield _object(record)

    return members


def _claims_in(changes: Changes, value: str) -> Callable[[bool], Iterator[bytes]]:
    """The batch's claims in state `value` (True), and the others, deleted ones included."""

    def members(inside: bool) -> Iterator[bytes]:
        for record, present in _records(changes):
            if isinstance(record, ClaimRecord) and (present and record.state == value) == inside:
                yield _object(record)

    return members


def _pods_using(changes: Changes) -> Callable[[bool], Iterator[bytes]]:
    """The batch's pods that use devices (True), and the others, deleted ones included."""

    def members(inside: bool) -> Iterator[bytes]:
        for record, present in _records(changes):
            if isinstance(record, PodRecord) and (present and uses_devices(record)) == inside:
                yield _object(record)

    return members


def _present(
    entries: Mapping[K, object | None], member: Callable[[K], bytes]
) -> Callable[[bool], Iterator[bytes]]:
    def members(inside: bool) -> Iterator[bytes]:
        return (member(k) for k, v in entries.items() if (v is not None) == inside)

    return members


def _keyed_value(
    values: Mapping[K, str | None], value: str, member: Callable[[K], bytes]
) -> Callable[[bool], Iterator[bytes]]:
    def members(inside: bool) -> Iterator[bytes]:
        return (member(k) for k, v in values.items() if (v == value) == inside)

    return members


def _class_members(
    changes: Mapping[tuple[str, DeviceKey], bool], name: str
) -> Callable[[bool], Iterator[bytes]]:
    def members(inside: bool) -> Iterator[bytes]:
        return (device_member(k) for (n, k), v in changes.items() if n == name and v == inside)

    return members


def snapshot(view: IndexView, members: ClassMembers | None) -> Changes:
    """Every index entry of a whole index, as one Changes (see the module docstring)."""
    cluster = view.cluster
    upserts = [r for kind in KINDS for r in view.records(kind)]
    delta = IndexDelta()
    for entry in view.devices():
        delta.devices[entry.key] = entry
        delta.statuses[entry.key] = view.device_status(entry.key)
    for entry in view.unpublished_devices():
        delta.unpublished[entry.key] = entry
    for claim in view.idle_claims():
        delta.idle[claim] = view.idle_since(claim)
    if members is not None:
        for name, key in members.memberships():
            delta.classes[(name, key)] = True
    return Changes(cluster=cluster, at="", upserts=upserts, delta=delta)
