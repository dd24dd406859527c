"""One cluster's writer into Redis: its own index, the pending writes, one transaction a batch.

The Redis store never re-derives links, devices or idleness: each `Changes` is folded into the
writer's own `ClusterIndex(transitions=False, deltas=True)` — the same pure code the reactor
and the in-memory store run — and what the fold changed (its records and its `IndexDelta`) is
turned into Redis commands. Promises:

* a batch's records, reverse maps, devices, device statuses, idle marks and its live events are
  written by ONE `MULTI … EXEC` transaction: Redis runs it atomically, so a reader never sees
  a claim allocated to a device whose index does not show it. A fenced writer first WATCHes
  the cluster's fence key and compares it with its token (service.stores.lease): if the fence
  is another's, or changes before EXEC, nothing is written (`Fenced`);
* live events (old and new state of each claim and device the batch changed) are published
  inside the same transaction, after the writes; batches of more than LIVE_BATCH_LIMIT objects (initial
  syncs, relists) publish none;
* a write that fails (Redis down) loses nothing: the pending records (last state per key) and
  the delta (net effect per entry) stay, and the next batch writes them together;
* the reactor retries the SAME Changes after a failure: folding it again is a no-op in the
  index (identical records), so nothing is written twice and nothing is missed;
* on its first batch (and after every takeover) the writer loads the cluster's records from
  Redis into its index, then notes which of them the new watcher has not reported; when the
  watcher says it is synced (every kind listed), those are deleted as a batch (the sweep), so
  nothing stale from an earlier writer survives.
"""

from __future__ import annotations

import inspect
from typing import Any

from dra_mirror.service.model.delta import REMOVED, IndexDelta
from dra_mirror.service.model.index import DELETED, MODIFIED, ClusterIndex, Event
from dra_mirror.service.model.records import (
    POD,
    RESOURCE_CLAIM,
    ClaimRecord,
    DeviceKey,
    ObjectKey,
    PodRecord,
    Record,
    key_of,
)
from dra_mirror.service.stores import bus
from dra_mirror.service.stores.redis_keys import (
    HOLDS,
    SET_RELATIONS,
    Keys,
    device_field,
    encode,
    encode_members,
    key_member,
    link_part,
    object_field,
)

# KEYS[1] is the fence; ARGV[1] the writer's token ('' writes unfenced: a store without a
# lease, as in tests); ARGV[2] the channel, ARGV[3] the live events ('' publishes nothing);
# then the commands, each as: name, index into KEYS, argument count, arguments.
# Whether ClusterIndex.apply takes `listed` (pods unknown until first listed; model rule 5).
_INDEX_KNOWS_LISTS = "listed" in inspect.signature(ClusterIndex.apply).parameters
_CHUNK = 2000  # arguments per command: big batches become several HSETs of one hash
# Batches of more objects (initial syncs, relists) publish no per-object live events: their
# payload would be the whole cluster twice over; subscribers re-query after a resync.
LIVE_BATCH_LIMIT = 2000


def resp(command: list[bytes]) -> bytes:
    """One command in the Redis protocol (RESP): redis-py's general packer cost more than
    Redis took to run a large batch."""
    parts = [b"*%d\r\n" % len(command)]
    parts.extend(b"$%d\r\n%s\r\n" % (len(a), a) for a in command)
    return b"".join(parts)


class Ops:
    """The commands of one batch, sent as ONE `MULTI … EXEC` (Redis runs a transaction
    atomically: no reader sees part of it)."""

    def __init__(self, fence_key: str) -> None:
        self.fence_key = fence_key
        self.commands: list[list[bytes]] = []

    def __len__(self) -> int:
        return len(self.commands)

    def add(self, command: bytes, key: str, args: list[bytes]) -> None:
        raw_key = key.encode()
        for start in range(0, len(args), _CHUNK):
            self.commands.append([command, raw_key, *args[start : start + _CHUNK]])

    def transaction(self, channel: str, events: bytes) -> bytes:
        """MULTI, the commands, the PUBLISH of the batch's live events, EXEC."""
        parts = [resp([b"MULTI"])]
        parts.extend(resp(command) for command in self.commands)
        if events:
            parts.append(resp([b"PUBLISH", channel.encode(), events]))
        parts.append(resp([b"EXEC"]))
        return b"".join(parts)

    def replies(self, events: bytes) -> int:
        """How many replies the transaction gets: +OK, one +QUEUED each, the EXEC array."""
        return len(self.commands) + (1 if events else 0) + 2


def merge_delta(into: IndexDelta, later: IndexDelta) -> IndexDelta:
    """Net effect of two deltas: the later state of each entry wins."""
    into.links.update(later.links)
    into.devices.update(later.devices)
    into.idle.update(later.idle)
    return into


class ClusterWriter:
    """What one process writes for one cluster; see the module docstring."""

    def __init__(self, keys: Keys, token: str = "") -> None:
        self.keys = keys
        self.cluster = keys.cluster
        self.token = token
        self.index = ClusterIndex(self.cluster, transitions=False, deltas=True)
        self.loaded = False
        self.unseen: set[ObjectKey] = set()
        self.records: dict[ObjectKey, Record | None] = {}  # pending: None deletes
        self.delta = IndexDelta()  # pending derived state
        self.statuses: dict[DeviceKey, str | None] = {}  # as written (or pending)
        self.status_writes: dict[DeviceKey, str | None] = {}  # pending
        self.entries: dict[DeviceKey, Any] = {}  # device entries as last folded (old states)
        self.events: list[bus.LiveEvent] = []  # pending

    def load(self, records: list[Record]) -> None:
        """Start from what Redis holds (written by this cluster's earlier writers)."""
        # What an earlier writer wrote was complete for its kinds (it had listed them).
        pods = any(isinstance(r, PodRecord) for r in records)
        listed = {"listed": POD} if pods and _INDEX_KNOWS_LISTS else {}
        self.index.apply([Event(MODIFIED, r) for r in records], at="", **listed)
        self.index.take_delta()  # Redis already has the derived state of these records
        self.unseen = {key_of(r) for r in records}
        self.statuses = {e.key: self.index.device_status(e.key) for e in self.index.devices()}
        self.entries = {e.key: e for e in self.index.devices()}
        self.loaded = True

    def fold(
        self, upserts: list[Record], deletes: list[Record], at: str, listed: str | None = None
    ) -> None:
        """Fold one batch (`listed`: the kind whose complete LIST it is, as Changes says)."""
        index = self.index
        live = len(upserts) + len(deletes) <= LIVE_BATCH_LIMIT
        before = self._claims_touched(upserts, deletes) if live else {}
        events = [Event(DELETED, r) for r in deletes]
        events.extend(Event(MODIFIED, r) for r in upserts)
        out = index.apply(
            events, at=at, **({"listed": listed} if listed and _INDEX_KNOWS_LISTS else {})
        )
        for record in out.deletes:
            self.records[key_of(record)] = None
        for record in out.upserts:
            self.records[key_of(record)] = record
        for key in (key_of(r) for r in (*upserts, *deletes)):
            self.unseen.discard(key)
        delta = index.take_delta()
        if live:
            self._claim_events(before, out.upserts, out.deletes)
        self._device_changes(delta, live=live)
        merge_delta(self.delta, delta)

    def sweep(self, at: str) -> bool:
        """Delete what the earlier writer left and this watcher never reported."""
        stale = [r for r in (self.index.get(k) for k in self.unseen) if r is not None]
        self.unseen = set()
        if stale:
            self.fold([], stale, at)
        return bool(stale)

    def _claims_touched(self, upserts: list[Record], deletes: list[Record]) -> dict:
        # The claims whose view may change: the batch's own, and those its pods name (the
        # index re-emits a claim when a pod changes which template it came from).
        keys: set[ObjectKey] = set()
        for record in (*upserts, *deletes):
            key = key_of(record)
            if key.kind == RESOURCE_CLAIM:
                keys.add(key)
            elif isinstance(record, PodRecord):
                for claim in record.claims:
                    if claim.claim_name:
                        keys.add(
                            ObjectKey(self.cluster, RESOURCE_CLAIM, key.namespace, claim.claim_name)
                        )
        return {key: self.index.get(key) for key in keys}

    def _claim_events(self, before: dict, upserts: list[Record], deletes: list[Record]) -> None:
        for record in (*deletes, *upserts):
            if not isinstance(record, ClaimRecord):
                continue
            key = key_of(record)
            new = self.index.get(key)
            old = before.get(key)
            if old != new:
                self.events.append(bus.claim_event(self.cluster, old, new))  # type: ignore[arg-type]

    def _device_changes(self, delta: IndexDelta, *, live: bool = True) -> None:
        index = self.index
        pools: set[tuple[str, str]] = set()
        changed: set[DeviceKey] = set(delta.devices)
        for key in delta.devices:
            pools.add((key.driver, key.pool))
        for relation, device, _value in delta.links:
            if relation == HOLDS:
                pools.add((device.driver, device.pool))
                changed.add(device)
        # A device's status depends on its pool's counters: re-derive the whole pool.
        for driver, pool in pools:
            changed.update(index.pool(driver, pool).devices)
        for key in changed:
            entry = index.device(key)
            status = index.device_status(key) if entry is not None else None
            old_status = self.statuses.get(key)
            entry_changed = key in delta.devices
            if status == old_status and not entry_changed:
                continue
            self.status_writes[key] = status
            if status is None:
                self.statuses.pop(key, None)
            else:
                self.statuses[key] = status
            old_entry = self.entries.get(key) if entry_changed else entry
            if entry_changed:
                if entry is None:
                    self.entries.pop(key, None)
                else:
                    self.entries[key] = entry
            old = bus.DeviceState(old_entry, old_status) if old_entry is not None else None
            new = bus.DeviceState(entry, status) if entry is not None else None
            if live and old != new:
                self.events.append(bus.device_event(key, old, new))

    # --- the write --------------------------------------------------------------------------

    def pending(self) -> bool:
        return bool(self.records or self.delta or self.status_writes or self.events)

    def ops(self) -> Ops:
        keys = self.keys
        ops = Ops(keys.fence)
        by_kind: dict[str, tuple[list[Any], list[Any]]] = {}
        for key, record in self.records.items():
            sets, dels = by_kind.setdefault(key.kind, ([], []))
            if record is None:
                dels.append(object_field(key).encode())
            else:
                sets.extend((object_field(key).encode(), encode(record)))
        for kind, (sets, dels) in by_kind.items():
            if dels:
                ops.add(b"HDEL", keys.objects(kind), dels)
            if sets:
                ops.add(b"HSET", keys.objects(kind), sets)
        delta = self.delta
        # Relations with a large fan-out (every claim of a class, every device named gpu-0)
        # are Redis sets, changed member by member; the others are one hash per relation whose
        # field per from-key holds its full sorted list, rewritten from the index when touched.
        members: dict[tuple[bytes, str], list[bytes]] = {}
        lists: dict[tuple[str, Any], None] = {}
        for (relation, from_key, value), payload in delta.links.items():
            if relation in SET_RELATIONS:
                command = b"SREM" if payload is REMOVED else b"SADD"
                key = keys.link(relation, from_key)
                members.setdefault((command, key), []).append(key_member(value))
            else:
                lists[(relation, from_key)] = None
        for (command, key), values in members.items():
            ops.add(command, key, values)
        by_relation: dict[str, tuple[list[bytes], list[bytes]]] = {}
        index = self.index
        for relation, from_key in lists:
            sets, dels = by_relation.setdefault(relation, ([], []))
            field = link_part(from_key)
            if relation == HOLDS:
                holds = index.holds(from_key)
                if holds:
                    sets.extend((field, encode(holds)))
                else:
                    dels.append(field)
                continue
            linked = index.links.get(relation, from_key)
            if linked:
                sets.extend((field, encode_members(sorted(linked))))
            else:
                dels.append(field)
        for relation, (sets, dels) in by_relation.items():
            if dels:
                ops.add(b"HDEL", keys.links(relation), dels)
            if sets:
                ops.add(b"HSET", keys.links(relation), sets)
        _hash_writes(ops, keys.devices, ((device_field(k), e) for k, e in delta.devices.items()))
        _hash_writes(ops, keys.idle, ((object_field(k).encode(), s) for k, s in delta.idle.items()))
        _hash_writes(
            ops, keys.device_status, ((device_field(k), s) for k, s in self.status_writes.items())
        )
        return ops

    def written(self) -> None:
        self.records = {}
        self.delta = IndexDelta()
        self.status_writes = {}
        self.events = []


def _hash_writes(ops: Ops, key: str, entries: Any) -> None:
    sets: list[Any] = []
    dels: list[Any] = []
    for field, value in entries:
        if value is None or value is REMOVED:
            dels.append(field)
        else:
            sets.extend((field, value.encode() if isinstance(value, str) else encode(value)))
    if dels:
        ops.add(b"HDEL", key, dels)
    if sets:
        ops.add(b"HSET", key, sets)
