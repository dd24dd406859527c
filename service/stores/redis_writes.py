"""One cluster's writer into Redis: its own index, the pending writes, one atomic script a batch.

The Redis store never re-derives links, devices or idleness: each `Changes` is folded into the
writer's own `ClusterIndex(transitions=False, deltas=True)` — the same pure code the reactor
and the in-memory store run — and what the fold changed (its records and its `IndexDelta`) is
turned into Redis commands. Promises:

* a batch's records, reverse maps, devices, device statuses, idle marks and its live events are
  written by ONE call of `WRITE_SCRIPT`: Redis runs a script atomically, so a reader never sees
  a claim allocated to a device whose index does not show it. The script first compares the
  cluster's fence key with the writer's token (fencing, service.stores.lease): a writer that
  lost its lease writes nothing (`Fenced`);
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

from service.model.delta import REMOVED, IndexDelta
from service.model.index import DELETED, MODIFIED, ClusterIndex, Event
from service.model.records import (
    POD,
    RESOURCE_CLAIM,
    ClaimRecord,
    DeviceKey,
    ObjectKey,
    PodRecord,
    Record,
    key_of,
)
from service.stores import bus
from service.stores.redis_keys import (
    HOLDS,
    Keys,
    device_field,
    encode,
    hold_field,
    key_member,
    object_field,
)

# KEYS[1] is the fence; ARGV[1] the writer's token ('' writes unfenced: a store without a
# lease, as in tests); ARGV[2] the channel, ARGV[3] the live events ('' publishes nothing);
# then the commands, each as: name, index into KEYS, argument count, arguments.
WRITE_SCRIPT = """
local token = ARGV[1]
if token ~= '' then
  local current = redis.call('GET', KEYS[1])
  if current ~= token then
    return redis.error_reply('FENCED fence is ' .. tostring(current))
  end
end
local i = 4
local n = #ARGV
while i <= n do
  local count = tonumber(ARGV[i + 2])
  redis.call(ARGV[i], KEYS[tonumber(ARGV[i + 1])], unpack(ARGV, i + 3, i + 2 + count))
  i = i + 3 + count
end
if ARGV[3] ~= '' then
  redis.call('PUBLISH', ARGV[2], ARGV[3])
end
return 1
"""
# Whether ClusterIndex.apply takes `listed` (pods unknown until first listed; model rule 5).
_INDEX_KNOWS_LISTS = "listed" in inspect.signature(ClusterIndex.apply).parameters
_CHUNK = 1000  # Lua's unpack() refuses more than ~8,000 values


class Ops:
    """The commands of one script call; every key is declared in KEYS (Redis Cluster)."""

    def __init__(self, fence_key: str) -> None:
        self.keys: list[str] = [fence_key]
        self._index: dict[str, int] = {fence_key: 1}
        self.args: list[Any] = []

    def __len__(self) -> int:
        return len(self.args)

    def add(self, command: str, key: str, args: list[Any]) -> None:
        index = self._index.get(key)
        if index is None:
            self.keys.append(key)
            index = self._index[key] = len(self.keys)
        for start in range(0, len(args), _CHUNK):
            chunk = args[start : start + _CHUNK]
            self.args.extend((command, index, len(chunk)))
            self.args.extend(chunk)


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
        before = self._claims_touched(upserts, deletes)
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
        self._claim_events(before, out.upserts, out.deletes)
        self._device_changes(delta)
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

    def _device_changes(self, delta: IndexDelta) -> None:
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
            if old != new:
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
                dels.append(object_field(key))
            else:
                sets.extend((object_field(key), encode(record)))
        for kind, (sets, dels) in by_kind.items():
            if dels:
                ops.add("HDEL", keys.objects(kind), dels)
            if sets:
                ops.add("HSET", keys.objects(kind), sets)
        delta = self.delta
        for relation, from_key, value, payload in delta.links_added():
            if relation == HOLDS:
                ops.add("HSET", keys.link(relation, from_key), [hold_field(value), encode(payload)])
            else:
                ops.add("SADD", keys.link(relation, from_key), [key_member(value)])
        for relation, from_key, value in delta.links_removed():
            if relation == HOLDS:
                ops.add("HDEL", keys.link(relation, from_key), [hold_field(value)])
            else:
                ops.add("SREM", keys.link(relation, from_key), [key_member(value)])
        _hash_writes(ops, keys.devices, ((device_field(k), e) for k, e in delta.devices.items()))
        _hash_writes(ops, keys.idle, ((object_field(k), s) for k, s in delta.idle.items()))
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
            sets.extend((field, value if isinstance(value, str) else encode(value)))
    if dels:
        ops.add("HDEL", key, dels)
    if sets:
        ops.add("HSET", key, sets)
