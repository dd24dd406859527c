"""Derived device state for the graph: status and remaining capacity, through the loaders.

The decisions are the model's (`service.model.inventory`: free / held / shared / blocked and
what capacity a shared device has left). The stores keep statuses as the model derived them and
answer them in one batched call; a status a store lacks (None) is derived here from inputs
gathered per request, batched: the device's holders (`DEVICE_ALLOCATIONS`), and for partitionable devices the pool's
counter sets (from the pool's slices at its valid generation) and what the held siblings in
the same pool consume (`POOL_DEVICES` + their holders). Results are memoized per request.
"""

from __future__ import annotations

import asyncio
from collections.abc import Hashable, Sequence

from dra_mirror.service.model import inventory
from dra_mirror.service.model.records import AllocationRef, DeviceEntry, DeviceKey
from dra_mirror.service.stores.protocols import Relation

from .loaders import Loaders


async def holders(loaders: Loaders, key: DeviceKey) -> list[AllocationRef]:
    """Every claim's hold on the device (one per allocation result)."""
    return await loaders.relation(Relation.DEVICE_ALLOCATIONS).load(key)


async def _counters_free(loaders: Loaders, entry: DeviceEntry) -> inventory.CountersFree:
    """The counter sets of the device's pool and what its held devices consume."""
    pool_key = (entry.key.cluster, entry.key.driver, entry.key.pool)
    memo_key = ("counters-free", pool_key)
    cached = loaders.memo.get(memo_key)
    if cached is None:
        cached = loaders.memo[memo_key] = asyncio.ensure_future(_load_counters_free(loaders, entry))
    return await cached


async def _load_counters_free(loaders: Loaders, entry: DeviceEntry) -> inventory.CountersFree:
    cluster, driver, pool = entry.key.cluster, entry.key.driver, entry.key.pool
    facts, sibling_keys = await asyncio.gather(
        loaders.pools.load((cluster, driver, pool, entry.node)),
        loaders.relation(Relation.POOL_DEVICES).load((cluster, driver, pool)),
    )
    from .withheld import every_holder

    siblings, holds = await asyncio.gather(  # every sibling's holders: out-of-scope ones too
        loaders.devices.load_many(sibling_keys),
        every_holder(loaders).load_many(sibling_keys),
    )
    held = [
        s.device
        for s, h in zip(siblings, holds, strict=True)
        if s is not None and inventory.consumes(h)
    ]
    counter_sets = list(facts.counter_sets.values()) if facts is not None else []
    return inventory.counters_free(counter_sets, held)


async def status(loaders: Loaders, entry: DeviceEntry) -> str:
    """free | held | shared | blocked, as `service.model.inventory.device_status` decides.
    The store answers it as the model derived it; a status it lacks is derived here from
    every holder (those outside the request's scope too: held is held, whoever holds it) and
    the pool's counters."""
    known = await loaders.device_status.load(entry.key)
    if known is not None:
        return known
    from .withheld import all_holders

    holds = await all_holders(loaders, entry.key)  # held is held, whoever holds it
    free = await _counters_free(loaders, entry) if entry.device.consumes_counters else None
    return inventory.device_status(entry, holds, counters_free=free)


async def statuses(
    loaders: Loaders, entries: Sequence[DeviceEntry], *, prime: bool = True
) -> list[str]:
    """Statuses of many devices (filters, cluster counts): one store call for all of them,
    not one DataLoader future each (tens of thousands of futures cost seconds). With `prime`
    the answers prime the per-device loaders, so a page built from the same devices reads
    them for free; a filter over 40,000 devices that shows a page of them primes that page
    alone (`prime_statuses`): priming costs a future per device."""
    keys = [entry.key for entry in entries]
    found = await loaders.reader.device_status(keys)
    if prime:
        loaders.device_status.prime_many(dict(zip(keys, found, strict=True)))
    missing = [i for i, s in enumerate(found) if s is None]
    if missing:
        from .withheld import every_holder

        # Every holder (out-of-scope ones too) decides the status; nothing of them is primed
        # into the scoped loaders.
        holds: list[list[AllocationRef]] = await every_holder(loaders).load_many(
            [keys[i] for i in missing]
        )
        for i, hold in zip(missing, holds, strict=True):
            entry = entries[i]
            free = None
            if not hold and entry.device.consumes_counters:
                free = await _counters_free(loaders, entry)
            found[i] = inventory.device_status(entry, hold, counters_free=free)
    return found  # type: ignore[return-value]


def prime_statuses(loaders: Loaders, known: dict[DeviceKey, str]) -> None:
    """Prime the per-device status loaders with statuses `statuses(prime=False)` derived."""
    loaders.device_status.prime_many(known)


async def remaining_capacity(loaders: Loaders, entry: DeviceEntry) -> dict[str, str]:
    """Capacity left on a shareable device after its shares' consumedCapacity — every share,
    those of claims outside the request's scope included (`schema.withheld`)."""
    from .withheld import all_holders

    return inventory.remaining_capacity(entry, await all_holders(loaders, entry.key))


async def prefetch(loaders: Loaders, entries: Sequence[DeviceEntry]) -> None:
    """Warm the loaders for a page of devices — statuses, holders, the holders' claims — in
    one store call each, so each device's fields then resolve from the request's cache
    instead of scheduling thousands of loader futures."""
    if not entries:
        return
    await statuses(loaders, entries)
    holds_loader = loaders.relation(Relation.DEVICE_ALLOCATIONS)
    known: dict[DeviceKey, list[AllocationRef]] = {}
    keys = []
    for entry in entries:
        cached = holds_loader.cache_map.get(entry.key)
        if cached is None:
            keys.append(entry.key)
        elif cached.done() and not cached.cancelled() and cached.exception() is None:
            known[entry.key] = cached.result()
    if keys:
        found: list[list[AllocationRef]] = await loaders.reader.lookup(
            Relation.DEVICE_ALLOCATIONS, keys
        )
        fresh: dict[Hashable, list[AllocationRef]] = dict(zip(keys, found, strict=True))
        holds_loader.prime_many(fresh)
        known.update(zip(keys, found, strict=True))
    claim_keys = list(dict.fromkeys(ref.claim for refs in known.values() for ref in refs))
    if claim_keys:
        claims = await loaders.reader.get(claim_keys)
        loaders.records.prime_many(dict(zip(claim_keys, claims, strict=True)))
