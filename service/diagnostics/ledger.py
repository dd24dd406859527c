"""What is taken right now: the allocator's bookkeeping of holders, shares and counters.

kube-scheduler's structured allocator decides whether a device can still be given to a claim
from three kinds of use, all kept here per cluster:

* **exclusive holders** — a device without `allowMultipleAllocations` belongs to at most one
  claim (admin-access results do not count: they observe, they do not hold);
* **shares** — a shareable device carries one share per allocation result (`shareID`), each with
  the capacity it consumed (consumedCapacity names, qualified with the driver's domain as the
  device's capacities are); what is left is the capacity minus every share;
* **counters** — a partitionable device (MIG) consumes counters of a counter set published in
  `sharedCounters` of a slice of the same pool; a device fits while its consumption fits what its
  siblings left. A device consumes its counters once, however many shares it has.

Promises: `Ledger` is plain data, mutated only by `commit`/`release` (the allocator reads it
and never writes); committing a claim twice replaces its earlier holds; every query answers
from the current holds in O(holds of that device or counter set).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from fractions import Fraction
from typing import NamedTuple

from dra_mirror.service.model.metadata import qualify
from dra_mirror.service.model.quantity import parse_quantity
from dra_mirror.service.model.records import (
    Allocation,
    ClaimRecord,
    DeviceEntry,
    DeviceKey,
    ObjectKey,
    SliceRecord,
    key_of,
)


class CounterSetKey(NamedTuple):
    cluster: str
    driver: str
    pool: str
    counter_set: str


class Hold(NamedTuple):
    """One allocation result of a committed claim."""

    device: DeviceKey
    request: str
    share_id: str | None
    consumed: Mapping[str, Fraction]
    admin: bool


def _quantities(values: dict[str, str]) -> dict[str, Fraction]:
    out: dict[str, Fraction] = {}
    for name, text in values.items():
        try:
            out[name] = parse_quantity(text)
        except ValueError:
            continue  # an invalid quantity never passes the API server's validation
    return out


def counter_sets_of(slices: Iterable[SliceRecord]) -> dict[CounterSetKey, dict[str, Fraction]]:
    """The counter sets of the valid (highest) generation of every pool."""
    newest: dict[tuple[str, str, str], int] = {}
    chosen: list[SliceRecord] = []
    for sl in slices:
        chosen.append(sl)
        pool = (sl.meta.cluster, sl.driver, sl.pool.name)
        newest[pool] = max(newest.get(pool, sl.pool.generation), sl.pool.generation)
    sets: dict[CounterSetKey, dict[str, Fraction]] = {}
    for sl in chosen:
        if sl.pool.generation != newest[(sl.meta.cluster, sl.driver, sl.pool.name)]:
            continue
        for cs in sl.shared_counters:
            key = CounterSetKey(sl.meta.cluster, sl.driver, sl.pool.name, cs.name)
            sets[key] = _quantities(cs.counters)
    return sets


class Ledger:
    """What is taken now: exclusive holders per device, shares and consumed capacity of
    shareable devices, counters consumed per (cluster, driver, pool, counterSet)."""

    def __init__(self) -> None:
        self.entries: dict[DeviceKey, DeviceEntry] = {}
        self.counter_totals: dict[CounterSetKey, dict[str, Fraction]] = {}
        self.exclusive: dict[DeviceKey, ObjectKey] = {}
        self.shares: dict[DeviceKey, dict[tuple[ObjectKey, str | None], Mapping[str, Fraction]]] = (
            defaultdict(dict)
        )
        self.counters_used: dict[CounterSetKey, dict[str, Fraction]] = defaultdict(dict)
        self.holds: dict[ObjectKey, list[Hold]] = {}
        # What every hold that consumes no capacity holds: one empty mapping, never written.
        self._nothing_consumed: Mapping[str, Fraction] = {}
        # Claims holding each device (exclusive or shared; not admin), for counter accounting:
        # the one claim itself, or a set once several share the device.
        self._device_holders: dict[DeviceKey, ObjectKey | set[ObjectKey]] = {}
        # Held devices per pool, so sibling partitions are found without scanning every hold.
        self._pool_held: dict[tuple[str, str, str], set[DeviceKey]] = defaultdict(set)

    @classmethod
    def build(
        cls,
        devices: Iterable[DeviceEntry],
        claims: Iterable[ClaimRecord],
        *,
        slices: Iterable[SliceRecord] = (),
    ) -> Ledger:
        """A ledger of the allocated claims. `slices` supply the `sharedCounters` totals that
        partitionable devices consume; without them such devices cannot be placed."""
        ledger = cls()
        for entry in devices:
            ledger.entries[entry.key] = entry
        ledger.counter_totals = counter_sets_of(slices)
        for claim in claims:
            if claim.allocation is not None:
                ledger.commit(key_of(claim), claim.allocation)
        return ledger

    # --- mutation ----------------------------------------------------------------------------

    def commit(self, claim: ObjectKey, allocation: Allocation) -> None:
        """Record a claim's allocation (replacing any earlier one of the same claim)."""
        if claim in self.holds:
            self.release(claim)
        holds: list[Hold] = []
        cluster = claim.cluster
        for result in allocation.results:
            dk = DeviceKey(cluster, result.driver, result.pool, result.device)
            entry = self.entries.get(dk)
            if entry is not None:
                dk = entry.key  # the device's own key object: one per device, not per hold
            consumed = result.consumed_capacity
            hold = Hold(
                dk,
                result.request,
                result.share_id,
                # keyed as the device's capacities are: qualified with the driver's domain
                {qualify(k, dk.driver): v for k, v in _quantities(consumed).items()}
                if consumed
                else self._nothing_consumed,
                result.admin_access,
            )
            holds.append(hold)
            if hold.admin:
                continue
            shareable = result.share_id is not None or (
                entry is not None and entry.device.shareable
            )
            if shareable:
                self.shares[dk][(claim, result.share_id)] = hold.consumed
            else:
                self.exclusive[dk] = claim
            holders = self._device_holders.get(dk)
            if holders is None:
                self._device_holders[dk] = claim
                self._pool_held[(dk.cluster, dk.driver, dk.pool)].add(dk)
                if entry is not None:
                    self._add_counters(entry, +1)
            elif isinstance(holders, set):
                holders.add(claim)
            elif holders != claim:
                self._device_holders[dk] = {holders, claim}
        self.holds[claim] = holds

    def release(self, claim: ObjectKey) -> None:
        """Forget a claim's holds (deallocated or deleted)."""
        for hold in self.holds.pop(claim, ()):
            if hold.admin:
                continue
            dk = hold.device
            if self.exclusive.get(dk) == claim:
                del self.exclusive[dk]
            shares = self.shares.get(dk)
            if shares is not None:
                shares.pop((claim, hold.share_id), None)
                if not shares:
                    del self.shares[dk]
            holders = self._device_holders.get(dk)
            if isinstance(holders, set):
                holders.discard(claim)
                if len(holders) == 1:
                    self._device_holders[dk] = next(iter(holders))
            elif holders is not None and holders == claim:
                del self._device_holders[dk]
                pool = (dk.cluster, dk.driver, dk.pool)
                self._pool_held[pool].discard(dk)
                if not self._pool_held[pool]:
                    del self._pool_held[pool]
                entry = self.entries.get(dk)
                if entry is not None:
                    self._add_counters(entry, -1)

    def _add_counters(self, entry: DeviceEntry, sign: int) -> None:
        for consumption in entry.device.consumes_counters:
            key = CounterSetKey(
                entry.key.cluster, entry.key.driver, entry.key.pool, consumption.counter_set
            )
            used = self.counters_used[key]
            for name, amount in _quantities(consumption.counters).items():
                used[name] = used.get(name, Fraction(0)) + sign * amount

    # --- queries -----------------------------------------------------------------------------

    def holders(self, device: DeviceKey) -> list[ObjectKey]:
        """Claims holding a device now (exclusively or by a share), sorted."""
        holders = self._device_holders.get(device)
        if holders is None:
            return []
        return sorted(holders) if isinstance(holders, set) else [holders]

    def remaining_capacity(self, entry: DeviceEntry) -> dict[str, Fraction]:
        """Each capacity of a device minus what its shares consumed."""
        remaining = _quantities({k: c.value for k, c in entry.device.capacity.items()})
        for consumed in self.shares.get(entry.key, {}).values():
            for name, amount in consumed.items():
                if name in remaining:
                    remaining[name] -= amount
        return remaining

    def counters_free(self, key: CounterSetKey) -> dict[str, Fraction] | None:
        """What is left of a counter set; None when no slice publishes it."""
        total = self.counter_totals.get(key)
        if total is None:
            return None
        used = self.counters_used.get(key, {})
        return {name: value - used.get(name, Fraction(0)) for name, value in total.items()}

    def counter_blockers(self, entry: DeviceEntry) -> list[ObjectKey]:
        """Claims holding sibling devices that consume the same counter sets as `entry`."""
        sets = {c.counter_set for c in entry.device.consumes_counters}
        if not sets:
            return []
        found: set[ObjectKey] = set()
        for dk, holders in self._device_holders.items():
            if (dk.cluster, dk.driver, dk.pool) != (
                entry.key.cluster,
                entry.key.driver,
                entry.key.pool,
            ):
                continue
            sibling = self.entries.get(dk)
            if sibling is not None and sets & {
                c.counter_set for c in sibling.device.consumes_counters
            }:
                if isinstance(holders, set):
                    found.update(holders)
                else:
                    found.add(holders)
        return sorted(found)
