"""The allocation ledger of each cluster, kept in step with the state each question reads.

`ledgers_for(store).ledger(state)` gives the `service.diagnostics.ledger.Ledger` of a
`ClusterState` (cluster_state.py), cached per store and per cluster:

* built once, then brought up to date on each question by comparing what it committed with
  the claims just read (records are immutable values: an unchanged claim is the same object
  in memory, an equal one from Redis) — a claim allocated, deallocated or deleted costs one
  `commit`/`release`; new or changed devices or slices rebuild it;
* a ledger is the whole cluster's: a state a narrowed scope read is refused (ValueError), since
  what a hidden claim holds would read as free;
* `prepare(store)` builds every cluster's ledger (and warms its DeviceClass selectors) ahead of
  the first question; the app runs it once every cluster has synced.
"""

from __future__ import annotations

import asyncio
import operator
import weakref
from dataclasses import dataclass, field
from typing import Any

from dra_mirror.service.diagnostics.cel import SelectorError, compile_selector
from dra_mirror.service.diagnostics.ledger import Ledger
from dra_mirror.service.model.records import (
    Allocation,
    ClaimRecord,
    DeviceEntry,
    DeviceKey,
    ObjectKey,
    SliceRecord,
    key_of,
)
from dra_mirror.service.questions.cluster_state import ClusterState, name_of, read_cluster
from dra_mirror.service.stores.protocols import StateReader


@dataclass
class _Kept:
    ledger: Ledger
    devices: dict[DeviceKey, DeviceEntry]
    slices: dict[str, SliceRecord]
    # the key of every allocated claim committed -> its allocation
    allocations: dict[ObjectKey, Allocation] = field(default_factory=dict)
    # the claim records last seen, by identity (kept alive here, so ids are not reused)
    seen: dict[int, ClaimRecord] = field(default_factory=dict)
    # the lists last read: a cluster where nothing changed lists the very same records again,
    # in the same order (the index's dicts keep insertion order), which is checked at C speed
    device_list: list[DeviceEntry] = field(default_factory=list)
    slice_list: list[SliceRecord] = field(default_factory=list)
    claim_list: list[ClaimRecord] = field(default_factory=list)


def _same(a: Any, b: Any) -> bool:
    return a is b or a == b


class LedgerCache:
    """One allocation `Ledger` per cluster, kept in step with the state each question reads.

    `builds` and `commits` count what it did (the tests and the benchmark read them)."""

    def __init__(self) -> None:
        self._kept: dict[str, _Kept] = {}
        self.builds = 0
        self.commits = 0

    def ledger(self, state: ClusterState) -> Ledger:
        if not state.complete:
            # What a narrowed scope sees is not what the cluster holds: a ledger of it would
            # call free what a hidden claim holds (cluster_state.read_whole_cluster).
            raise ValueError(f"the ledger of {state.cluster} needs the whole cluster's state")
        kept = self._kept.get(state.cluster)
        if kept is None or not self._inventory_unchanged(kept, state):
            kept = self._build(state)
            self._kept[state.cluster] = kept
            return kept.ledger
        records = state.claims.records
        if _same_records(kept.claim_list, records):
            return kept.ledger
        seen, allocations = kept.seen, kept.allocations
        unchanged = 0
        for claim in records:
            if seen.get(id(claim)) is claim:
                unchanged += 1  # the very record synced last time: nothing to do
                continue
            key = key_of(claim)
            before = allocations.get(key)
            allocation = claim.allocation
            if allocation is None:
                if before is not None:
                    kept.ledger.release(key)
                    del allocations[key]
                    self.commits += 1
            elif before is None or not _same(before, allocation):
                kept.ledger.commit(key, allocation)
                allocations[key] = allocation
                self.commits += 1
        if unchanged < len(seen):
            # Some records of last time are gone: replaced (handled above) or deleted.
            present = {key_of(c) for c in records}
            for gone in [k for k in allocations if k not in present]:
                kept.ledger.release(gone)
                del allocations[gone]
                self.commits += 1
        if unchanged != len(records) or unchanged != len(seen):
            kept.seen = {id(c): c for c in records}
        kept.claim_list = records
        return kept.ledger

    def _build(self, state: ClusterState) -> _Kept:
        self.builds += 1
        claims = state.claims.records
        # Ledger.build, with each allocated claim's key made once for the ledger and the list of
        # what was committed.
        ledger = Ledger.build(state.devices, (), slices=state.slices)
        allocations: dict[ObjectKey, Allocation] = {}
        commit = ledger.commit
        for claim in claims:
            allocation = claim.allocation
            if allocation is not None:
                key = key_of(claim)
                commit(key, allocation)
                allocations[key] = allocation
        return _Kept(
            ledger=ledger,
            devices=ledger.entries,  # the same mapping (key -> entry), never written after
            slices={name_of(s): s for s in state.slices},
            allocations=allocations,
            seen={id(c): c for c in claims},
            device_list=state.devices,
            slice_list=state.slices,
            claim_list=claims,
        )

    @staticmethod
    def _inventory_unchanged(kept: _Kept, state: ClusterState) -> bool:
        if _same_records(kept.device_list, state.devices) and _same_records(
            kept.slice_list, state.slices
        ):
            return True
        if len(kept.devices) != len(state.devices) or len(kept.slices) != len(state.slices):
            return False
        devices = kept.devices
        for entry in state.devices:
            before = devices.get(entry.key)
            if before is None or not _same(before, entry):
                return False
        slices = kept.slices
        for s in state.slices:
            seen = slices.get(name_of(s))
            if seen is None or not (
                seen.pool.generation == s.pool.generation
                and _same(seen.shared_counters, s.shared_counters)
            ):
                return False
        # Equal, in other objects or order (a Redis store decodes new objects each time).
        kept.device_list, kept.slice_list = state.devices, state.slices
        return True


def _same_records(before: list[Any], now: list[Any]) -> bool:
    """Whether two lists hold the very same objects in the same order."""
    return len(before) == len(now) and all(map(operator.is_, before, now))


_LEDGERS: weakref.WeakKeyDictionary[StateReader, LedgerCache] = weakref.WeakKeyDictionary()


async def prepare(store: StateReader) -> int:
    """Build now, rather than at the first question, what the diagnostics keep per cluster:
    the ledger of every cluster the store holds (read from the whole store, so it is the one
    every reader of that store shares) and the answers of its DeviceClass selectors. The app
    calls it once every cluster has synced; it yields to the event loop between clusters.
    Returns how many ledgers it built."""
    ledgers = ledgers_for(store)
    built = ledgers.builds
    for status in await store.clusters():
        state = await read_cluster(store, status.name)
        ledgers.ledger(state)
        for device_class in state.classes.values():
            for expression in device_class.selectors:
                try:
                    compile_selector(expression).select(state.devices)
                except SelectorError:
                    continue  # explainClaim reports it when asked
        await asyncio.sleep(0)
    return ledgers.builds - built


def ledgers_for(store: StateReader) -> LedgerCache:
    """The ledger cache of a store object (kept as long as the store lives; a scoped reader's
    questions use the cache of the store behind it, `ScopedState.store`)."""
    cache = _LEDGERS.get(store)
    if cache is None:
        cache = _LEDGERS[store] = LedgerCache()
    return cache
