"""The device side of the index: pools, their valid devices, and the device reverse maps.

The rules are in `service.model.pools` (which slices count) and in the docstring of
`service.model.index` (point 3); this module keeps the per-pool state and, on each slice
event, recomputes that one pool (O(pool size)) and diffs its devices: reverse maps
(slice/pool/node/uuid/name -> devices) are updated for what moved, and `device_appeared` /
`device_changed` / `device_disappeared` go into the batch. `device_changed` means the device
itself (attributes, capacity, counters, taints) or its node changed; a pool becoming complete
or incomplete updates the entries silently.

A device an allocation result names and no slice publishes (the driver withdrew its slices, a
node went, claims were listed before slices) is held all the same: holds are keyed by the
allocation result alone. Such a device gets an unpublished entry (`DeviceEntry.published`
False: its name, its node from a holding claim's allocation, shareable when a hold carries a
shareID, the uuid it had when a settled batch last saw it published) while it is held and
unpublished, linked by name, node and uuid like a published one (not by slice or pool: it has
neither), so whoHolds, Pod.devices and Node.devices find it. It is refreshed for every device
whose holds or publication a batch changed, before the batch settles (`refresh_unpublished`);
the reverse maps are sets, so the links it shares with a published entry a slice published
and withdrew within the batch are restored there.

Each entry, published or not, carries the taints of the DeviceTaintRules selecting it
(`rule_taints`, service.model.taint_rules): set when it is built and, on a rule's event (or a
DeviceClass's a rule names), for every device the rule's old or new driver/pool/device
criteria pick (`on_rule`, O(devices); rules are few). Its
taints changing is a `device_changed`; its status does not change (unavailable is not held).

Each valid device's physical unit (the GPU it is part of, its type, its GPU-equivalent weight:
`service.model.physical`) is kept in `units`, recomputed for a pool whose devices or counter
sets a slice event changed. `on_slice` returns the devices it published for the first time
(one held already was weighed as a lone device: `ClaimTracker.reweigh` weighs its holds).

Device statuses (free / held / shared / blocked, service.model.inventory) are kept derived:
every device whose entry or holds a batch changed — every device of its pool when the pool
shares counters (a MIG partition's allocation blocks its siblings) or its counter sets
changed — is re-derived when the batch settles (`settle`), once per batch, and the changes
reported (IndexDelta.statuses, live events). Reading a status is then a dict lookup.
"""

from __future__ import annotations

from collections.abc import Iterable
from fractions import Fraction
from typing import TYPE_CHECKING

from dra_mirror.service.model import changes as ch
from dra_mirror.service.model.device_links import (
    device_links,
    link_device,
    linked_by,
    unpublished_links,
)
from dra_mirror.service.model.inventory import TAKEN, consumes, counters_free, device_status
from dra_mirror.service.model.physical import Unit, pool_units
from dra_mirror.service.model.pools import EMPTY_POOL, PoolKey, ValidPool, pool_key, valid_pool
from dra_mirror.service.model.records import (
    DEVICE_CLASS,
    DEVICE_TAINT_RULE,
    FREE,
    HELD,
    SHARED,
    AllocationRef,
    DeviceClassRecord,
    DeviceEntry,
    DeviceKey,
    ObjectKey,
    Record,
    SliceRecord,
    TaintRuleRecord,
)
from dra_mirror.service.model.relations import (
    DEVICE_ALLOCATIONS,
    NODE_SLICES,
)
from dra_mirror.service.model.taint_rules import (
    RuleMatching,
    SelectorMatcher,
    may_select,
    names_class,
    rule_taints,
    shown,
    with_rules,
)
from dra_mirror.service.model.unpublished import unpublished_entry

if TYPE_CHECKING:
    from dra_mirror.service.model.batch import Batch, Touched
    from dra_mirror.service.model.index import ClusterIndex


class DeviceTracker:
    def __init__(self, index: ClusterIndex, selector_matcher: SelectorMatcher | None) -> None:
        self._index = index
        self._cluster = index.cluster
        self._pool_slices: dict[PoolKey, dict[ObjectKey, SliceRecord]] = {}
        self._pools: dict[PoolKey, ValidPool] = {}
        self.devices: dict[DeviceKey, DeviceEntry] = {}
        self.units: dict[DeviceKey, Unit] = {}  # each valid device's physical unit (physical)
        self.unpublished: dict[DeviceKey, DeviceEntry] = {}  # held, published by no slice
        self.statuses: dict[DeviceKey, str] = {}  # as of the last settled batch
        # The uuid of a device that stopped being published (or that a seed says it had),
        # until the batch settles: its unpublished entry keeps it.
        self._last_uuid: dict[DeviceKey, str] = {}
        self._matching = RuleMatching(self._device_class, selector_matcher)

    # --- reading --------------------------------------------------------------------------------

    def pool(self, driver: str, pool: str) -> ValidPool:
        return self._pools.get(PoolKey(driver, pool), EMPTY_POOL)

    def counters_free(self, driver: str, pool: str) -> dict[str, dict[str, Fraction]]:
        """What is left of a pool's shared counters once its allocated devices took theirs."""
        valid = self.pool(driver, pool)
        links = self._index.links
        held = (
            entry.device
            for key, entry in valid.devices.items()
            if consumes(links.get(DEVICE_ALLOCATIONS, key).values())
        )
        return counters_free(valid.counter_sets, held)

    def taken(self, key: DeviceKey) -> bool:
        """Whether a hold takes the device: its settled status (a dictionary lookup), or its
        holds for a device no valid pool publishes."""
        status = self.statuses.get(key)
        if status is not None:
            return status in TAKEN
        return consumes(self._index.links.get(DEVICE_ALLOCATIONS, key).values())

    def derive_status(self, key: DeviceKey) -> str | None:
        """free | held | shared | blocked, computed now (None: not in a valid pool)."""
        entry = self.devices.get(key)
        if entry is None:
            return None
        holds = self._index.holds(key)
        free = None
        if not holds and entry.device.consumes_counters:
            free = self.counters_free(entry.key.driver, entry.key.pool)
        return device_status(entry, holds, counters_free=free)

    def settle(self, touched: Touched) -> dict[DeviceKey, str | None]:
        """Re-derive the statuses a batch may have changed (see the module docstring); returns
        the status each changed device had before (None: it had none).

        A device that consumes no shared counters is free, held or shared by its own holds
        alone (inventory.device_status): it is settled on its own. A device that does consume
        counters — or did, before the batch — moves what its siblings have left, so its
        pool is settled whole, with the pool's counters weighed once."""
        before: dict[DeviceKey, str | None] = {}
        statuses = self.statuses
        holds_of = self._index.links.reader(DEVICE_ALLOCATIONS)
        devices = self.devices
        entries_before = touched.entries
        pools = set(touched.pools)
        for key in touched.devices:
            entry = devices.get(key)
            if entry is not None and entry.device.consumes_counters:
                pools.add(PoolKey(key.driver, key.pool))
                continue
            previous = entries_before.get(key)
            if previous is not None and previous.device.consumes_counters:
                pools.add(PoolKey(key.driver, key.pool))
            old = statuses.get(key)
            holds = holds_of(key)
            if entry is None:
                new = None
            elif holds and consumes(holds.values()):
                new = SHARED if entry.device.shareable else HELD
            else:
                new = FREE
            if new != old:
                before[key] = old
                if new is None:
                    del statuses[key]
                else:
                    statuses[key] = new
        for pk in pools:
            valid = self._pools.get(pk, EMPTY_POOL)
            free = self.counters_free(pk.driver, pk.pool) if valid.counter_sets else None
            for key, entry in valid.devices.items():
                holds = holds_of(key)
                new = device_status(
                    entry, list(holds.values()) if holds else [], counters_free=free
                )
                old = statuses.get(key)
                if new != old:
                    before.setdefault(key, old)
                    statuses[key] = new
        return before

    # --- held, not published ----------------------------------------------------------------

    def remember_uuids(self, uuids: dict[DeviceKey, str]) -> None:
        """The uuids of unpublished devices an earlier writer knew (a seed)."""
        self._last_uuid.update(uuids)

    def refresh_unpublished(self, touched: Touched) -> None:
        """Give every device the batch touched that is held and not published its entry, and
        drop the entries of those published again or no longer held (delta.unpublished)."""
        holds_of = self._index.links.reader(DEVICE_ALLOCATIONS)
        unpublished = self.unpublished
        for key in touched.devices:
            old = unpublished.get(key)
            holds = holds_of(key)
            published = self.devices.get(key)
            if published is not None or not holds:
                if old is not None:
                    del unpublished[key]
                    self._unlink_unpublished(old, keep=published)
                    touched.delta.unpublished[key] = None
                continue
            new = self._unpublished_entry(key, holds.values(), old)
            if new != old:
                if old is not None:
                    self._unlink_unpublished(old)
                unpublished[key] = new
                self._link_unpublished(new)
                touched.delta.unpublished[key] = new
            elif key in touched.entries:
                # A slice published the device and withdrew it again within the batch: the
                # reverse maps are sets, so unlinking that published entry took the links it
                # shared with this unchanged one (its name; its node, its uuid when the same).
                self._link_unpublished(new)
        self._last_uuid.clear()

    def _unpublished_entry(
        self, key: DeviceKey, holds: Iterable[AllocationRef], old: DeviceEntry | None
    ) -> DeviceEntry:
        uuid = self._last_uuid.get(key) or (old.device.uuid if old is not None else None)
        taints = rule_taints(self._rules(), key, None, self._matching)
        return unpublished_entry(self._index, key, holds, uuid, taints)

    # --- DeviceTaintRules -------------------------------------------------------------------

    def _rules(self) -> list[TaintRuleRecord]:
        return [r for r in self._index.records(DEVICE_TAINT_RULE) if isinstance(r, TaintRuleRecord)]

    def _device_class(self, name: str) -> DeviceClassRecord | None:
        found = self._index.get(ObjectKey(self._cluster, DEVICE_CLASS, "", name))
        return found if isinstance(found, DeviceClassRecord) else None

    def on_rule(self, old: Record | None, new: Record | None, batch: Batch) -> None:
        """A rule changed, or a DeviceClass the rules may name: re-derive the rule taints of
        every device the rule (the rules naming the class) selected or selects (the index
        already holds `new`, or no longer holds `old`). Other kinds: nothing."""
        picked = [r for r in (old, new) if isinstance(r, TaintRuleRecord)]
        changed_class = next((r for r in (old, new) if isinstance(r, DeviceClassRecord)), None)
        rules = self._rules() if picked or changed_class is not None else []
        if changed_class is not None:
            picked = [r for r in rules if names_class(r, changed_class.meta.name)]
        if not picked:
            return
        matching = self._matching
        touched = self._index.touched
        for dk, entry in list(self.devices.items()):
            if not any(may_select(r, dk) for r in picked):
                continue
            new_entry = with_rules(entry, rules, matching)
            if new_entry is entry:
                continue
            self.devices[dk] = new_entry
            valid = self._pools.get(PoolKey(dk.driver, dk.pool))
            if valid is not None and dk in valid.devices:
                valid.devices[dk] = new_entry
            touched.device(dk, entry, new_entry)
            self._transition(ch.DEVICE_CHANGED, new_entry, batch)
        for dk in list(self.unpublished):
            if any(may_select(r, dk) for r in picked):
                touched.devices.add(dk)  # refresh_unpublished rebuilds it with the rules

    def _link_unpublished(self, entry: DeviceEntry) -> None:
        links = self._index.links
        for relation, from_key in unpublished_links(entry):
            links.add(relation, from_key, entry.key)

    def _unlink_unpublished(self, entry: DeviceEntry, *, keep: DeviceEntry | None = None) -> None:
        """Drop the links of an unpublished entry, but those the device's published entry
        (`keep`: a slice publishes it again) holds too."""
        links = self._index.links
        kept = set(device_links(keep)) if keep is not None else set()
        for relation, from_key in unpublished_links(entry):
            if (relation, from_key) not in kept:
                links.remove(relation, from_key, entry.key)

    # --- slices ---------------------------------------------------------------------------------

    def on_slice(
        self, key: ObjectKey, old: SliceRecord | None, new: SliceRecord | None, batch: Batch
    ) -> list[DeviceKey]:
        """Apply a slice event; the devices it published that no valid pool published before."""
        links = self._index.links
        old_node = old.node_name if old else None
        new_node = new.node_name if new else None
        if old_node != new_node:
            if old_node:
                links.remove(NODE_SLICES, (self._cluster, old_node), key)
            if new_node:
                links.add(NODE_SLICES, (self._cluster, new_node), key)
        pools = set()
        if old is not None:
            pools.add(pool_key(old))
            self._pool_slices[pool_key(old)].pop(key, None)
        if new is not None:
            pools.add(pool_key(new))
            self._pool_slices.setdefault(pool_key(new), {})[key] = new
        appeared: list[DeviceKey] = []
        for pk in pools:
            appeared += self._recompute_pool(pk, batch)
        return appeared

    def _recompute_pool(self, pk: PoolKey, batch: Batch) -> list[DeviceKey]:
        slices = self._pool_slices.get(pk) or {}
        before_pool = self._pools.get(pk, EMPTY_POOL)
        before = before_pool.devices
        after = valid_pool(self._cluster, slices.values())
        rules = self._rules() if after.devices else []
        if rules:
            for dk, entry in after.devices.items():
                after.devices[dk] = with_rules(entry, rules, self._matching)
        if after.devices != before or after.counter_sets != before_pool.counter_sets:
            for dk in before:
                self.units.pop(dk, None)
            self.units.update(pool_units(after.devices.values(), after.counter_sets))
        if slices:
            self._pools[pk] = after
        else:
            self._pools.pop(pk, None)
            self._pool_slices.pop(pk, None)
        touched = self._index.touched
        if self._pools.get(pk, EMPTY_POOL).counter_sets != before_pool.counter_sets:
            touched.pools.add(pk)  # counters published or changed: every status may move
        for dk, entry in before.items():
            if dk not in after.devices:
                self._unlink(entry)
                del self.devices[dk]
                # The uuid it had when last published as of a settled batch: a device a slice
                # published and withdrew within this batch was never published to a reader.
                settled = touched.entries[dk] if dk in touched.entries else entry
                if settled is not None and settled.device.uuid:
                    self._last_uuid[dk] = settled.device.uuid
                touched.device(dk, entry, None)
                self._transition(ch.DEVICE_DISAPPEARED, entry, batch)
        appeared = []
        for dk, entry in after.devices.items():
            previous = before.get(dk)
            if previous is None:
                appeared.append(dk)
                self._link(entry)
                self.devices[dk] = entry
                touched.device(dk, None, entry)
                self._transition(ch.DEVICE_APPEARED, entry, batch)
            elif previous != entry:
                if linked_by(previous) != linked_by(entry):
                    self._unlink(previous)
                    self._link(entry)
                self.devices[dk] = entry
                touched.device(dk, previous, entry)
                if (previous.device, previous.node, previous.rule_taints) != (
                    entry.device, entry.node, entry.rule_taints
                ):  # fmt: skip
                    self._transition(ch.DEVICE_CHANGED, entry, batch)
        return appeared

    def announce(self, batch: Batch) -> None:
        """Every valid device appears again (the first LIST of slices after a seed)."""
        for entry in self.devices.values():
            self._transition(ch.DEVICE_APPEARED, entry, batch)

    def _link(self, entry: DeviceEntry) -> None:
        link_device(self._index.links, entry)

    def _unlink(self, entry: DeviceEntry) -> None:
        links = self._index.links
        for relation, from_key in device_links(entry):
            links.remove(relation, from_key, entry.key)

    def _transition(self, type_: str, entry: DeviceEntry, batch: Batch) -> None:
        if not batch.keep_transitions:
            return
        device = entry.device
        unit = self.units.get(entry.key)
        batch.transition(
            type_,
            equivalents=1.0 if unit is not None and unit.counted else 0.0,
            device_type=unit.type if unit is not None else "",
            driver=entry.key.driver,
            pool=entry.key.pool,
            device=entry.key.device,
            uuid=device.uuid,
            node=entry.node,
            data={
                "attributes": {
                    k: {"type": a.type, "value": a.value} for k, a in device.attributes.items()
                },
                "capacity": {k: c.value for k, c in device.capacity.items()},
                "shareable": device.shareable,
                "taints": shown(entry),
                "generation": entry.pool_generation,
            },
        )
