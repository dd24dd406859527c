"""The bookkeeping of one `ClusterIndex.apply`: the Changes being built, and what it touched.

* `Batch` — the records and transitions of one apply: each key once, in `upserts` (the final
  view) or `deletes` (the last known record), so stores may apply them in any order;
* `Touched` — what the batches since the index last settled changed in the derived state,
  with the state BEFORE the first change (first touch wins): the claims (record and idle
  mark), the consumer pods (record) whose change a claim's live event must show, the devices
  (entry) whose status must be re-derived, the holders of the devices whose holds moved, the pools whose every device's
  status must be (their shared counters moved), and the `IndexDelta` being filled. It lives
  on the index, not on the batch, so a batch that a model bug cut short still hands what it
  changed to the next one;
* `claim_events` / `device_events` — the live events of a settled batch, from the before and
  after states (service.model.live).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from dra_mirror.service.model import changes as ch
from dra_mirror.service.model.delta import IndexDelta
from dra_mirror.service.model.live import ClaimEvent, DeviceEvent, DeviceState, change_type
from dra_mirror.service.model.pools import PoolKey
from dra_mirror.service.model.records import (
    AllocationRef,
    ClaimRecord,
    DeviceEntry,
    DeviceKey,
    ObjectKey,
    PodRecord,
    Record,
)

# consumers(claim, pods before the batch or None for now) -> the claim's consumer pods
ConsumersOf = Callable[
    [ClaimRecord, Mapping[ObjectKey, PodRecord | None] | None], tuple[PodRecord, ...]
]


class Batch:
    """The Changes being built for one apply(): each key once, in upserts or deletes."""

    def __init__(self, cluster: str, at: str, *, keep_transitions: bool = True) -> None:
        self.cluster = cluster
        self.at = at
        self.keep_transitions = keep_transitions
        self.upserts: dict[ObjectKey, Record] = {}
        self.deletes: dict[ObjectKey, Record] = {}
        self.transitions: list[ch.Transition] = []

    def upsert(self, key: ObjectKey, record: Record) -> None:
        self.deletes.pop(key, None)
        self.upserts[key] = record

    def delete(self, key: ObjectKey, record: Record) -> None:
        self.upserts.pop(key, None)
        self.deletes[key] = record

    def transition(self, type_: str, **fields: Any) -> None:
        if not self.keep_transitions:
            return
        self.transitions.append(
            ch.Transition(type=type_, cluster=self.cluster, at=self.at, **fields)
        )

    @property
    def size(self) -> int:
        """Objects the batch changed (the LIVE_BATCH_LIMIT rule counts these)."""
        return len(self.upserts) + len(self.deletes)


class Touched:
    """See the module docstring."""

    def __init__(self) -> None:
        self.delta = IndexDelta()
        self.claims: dict[ObjectKey, tuple[ClaimRecord | None, str | None]] = {}
        self.pods: dict[ObjectKey, PodRecord | None] = {}
        self.entries: dict[DeviceKey, DeviceEntry | None] = {}
        self.devices: set[DeviceKey] = set()
        self.holders: dict[DeviceKey, tuple[AllocationRef, ...]] = {}
        self.pools: set[PoolKey] = set()

    def claim(self, key: ObjectKey, record: ClaimRecord | None, idle_since: str | None) -> None:
        if key not in self.claims:
            self.claims[key] = (record, idle_since)

    def pod(self, key: ObjectKey, record: PodRecord | None) -> None:
        if key not in self.pods:
            self.pods[key] = record

    def holds(self, key: DeviceKey, before: Mapping[Any, AllocationRef]) -> None:
        """The device's holders before the batch moved one (call before the move)."""
        if key not in self.holders:
            self.holders[key] = held_by(before)

    def device(self, key: DeviceKey, before: DeviceEntry | None, after: DeviceEntry | None) -> None:
        if key not in self.entries:
            self.entries[key] = before
        self.delta.devices[key] = after
        self.devices.add(key)


def held_by(holds: Mapping[Any, AllocationRef] | None) -> tuple[AllocationRef, ...]:
    """A device's holders in a stable order (by claim, request, share), for live events."""
    if not holds:
        return ()
    return tuple(sorted(holds.values(), key=_hold_order))


def _hold_order(ref: AllocationRef) -> tuple[str, str, str, str]:
    return (ref.claim.namespace, ref.claim.name, ref.request, ref.share_id or "")


def identity(t: ch.Transition) -> tuple[object, ...]:
    """What a re-announced transition is compared by (history's interval identities)."""
    return (t.type, t.namespace, t.claim, t.claim_uid, t.request, t.driver, t.pool, t.device,
            t.share_id, t.pod_uid)  # fmt: skip


def claim_events(
    cluster: str,
    touched: Touched,
    claims: Mapping[ObjectKey, Record],
    idle: Mapping[ObjectKey, str],
    consumers: ConsumersOf,
) -> list[ClaimEvent]:
    events = []
    pods_before = touched.pods
    for key, (old, old_idle) in touched.claims.items():
        new = claims.get(key)
        assert new is None or isinstance(new, ClaimRecord)
        if old is None and new is None:
            continue
        new_idle = idle.get(key)
        old_pods = consumers(old, pods_before) if old is not None else ()
        new_pods = consumers(new, None) if new is not None else ()
        if old == new and old_idle == new_idle and old_pods == new_pods:
            continue
        kind = change_type(old, new)
        event = ClaimEvent(kind, cluster, key.namespace, key.name, old, new, old_idle, new_idle,
                           old_pods, new_pods)  # fmt: skip
        events.append(event)
    return events


def device_events(
    keys: Iterable[DeviceKey],
    entries_before: Mapping[DeviceKey, DeviceEntry | None],
    statuses_before: Mapping[DeviceKey, str | None],
    holders_before: Mapping[DeviceKey, tuple[AllocationRef, ...]],
    entries: Mapping[DeviceKey, DeviceEntry],
    statuses: Mapping[DeviceKey, str],
    holds_of: Callable[[DeviceKey], Mapping[Any, AllocationRef] | None],
) -> list[DeviceEvent]:
    events = []
    for key in sorted(keys):
        entry = entries.get(key)
        old_entry = entries_before[key] if key in entries_before else entry
        status = statuses.get(key)
        old_status = statuses_before[key] if key in statuses_before else status
        holders = held_by(holds_of(key))
        old_holders = holders_before[key] if key in holders_before else holders
        old = DeviceState(old_entry, old_status, old_holders) if old_entry is not None else None
        new = DeviceState(entry, status, holders) if entry is not None else None
        if old == new:
            continue
        state = new if new is not None else old
        assert state is not None
        events.append(DeviceEvent(change_type(old, new), key, state.entry.node, old, new))
    return events
