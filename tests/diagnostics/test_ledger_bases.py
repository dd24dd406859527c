"""What is taken is derived once: the cluster's index (kept by the reactor) and `Holdings` (one
read of a store kept elsewhere, the simulator) answer it alike, and the allocator's ledger over
either gives the same answers — before and after the holds a placement imagines — without ever
writing its base.

Worlds: the demo (MIG partitions with counters, shared NICs, idle and admin holds) and the
schema tests' two clusters.
"""

from __future__ import annotations

import pytest

from dra_mirror.service.diagnostics.ledger import CounterSetKey, Ledger
from dra_mirror.service.model.holdings import Holdings
from dra_mirror.service.model.index import ClusterIndex
from dra_mirror.service.model.quantity import parse_quantity
from dra_mirror.service.model.records import (
    RESOURCE_CLAIM,
    RESOURCE_SLICE,
    Allocation,
    AllocationResult,
    ClaimRecord,
    DeviceEntry,
    SliceRecord,
    key_of,
)
from dra_mirror.service.stores.memory import MemoryStore

from ..plan.conftest import demo_world
from ..schema.conftest import load_world


async def indexes() -> list[ClusterIndex]:
    schema_store = MemoryStore()
    await load_world(schema_store)
    demo = (await demo_world()).store
    found = []
    for store in (schema_store, demo):
        for status in await store.clusters():
            index = store.index(status.name)
            assert isinstance(index, ClusterIndex)
            found.append(index)
    return found


def holdings_of(index: ClusterIndex) -> Holdings:
    return Holdings.build(
        list(index.devices()),
        [c for c in index.records(RESOURCE_CLAIM) if isinstance(c, ClaimRecord)],
        slices=[s for s in index.records(RESOURCE_SLICE) if isinstance(s, SliceRecord)],
    )


def answers(ledger: Ledger, devices: list[DeviceEntry]) -> list[tuple]:
    out = []
    for e in devices:
        counters = [
            ledger.counters_free(
                CounterSetKey(e.key.cluster, e.key.driver, e.key.pool, c.counter_set)
            )
            for c in e.device.consumes_counters
        ]
        out.append(
            (
                e.key,
                ledger.taken(e.key),
                ledger.holders(e.key),
                sorted(ledger.holds(e.key), key=lambda h: (h.claim, h.request, h.share_id or "")),
                ledger.remaining_capacity(e),
                counters,
                ledger.counter_blockers(e),
            )
        )
    return out


def imagined(index: ClusterIndex, devices: list[DeviceEntry]) -> list[tuple]:
    """A sequence of imagined changes: every allocated claim of one namespace released, one of
    them committed again elsewhere, and a new claim committed on free devices."""
    claims = sorted(
        (c for c in index.records(RESOURCE_CLAIM) if isinstance(c, ClaimRecord)),
        key=key_of,
    )
    allocated = [c for c in claims if c.allocation is not None]
    steps: list[tuple] = []
    if allocated:
        namespace = allocated[0].meta.namespace
        steps += [("release", key_of(c)) for c in allocated if c.meta.namespace == namespace]
    free = [e for e in devices if not index.taken(e.key)][:2]
    if free:
        results = tuple(
            AllocationResult(request="r", driver=e.key.driver, pool=e.key.pool, device=e.key.device)
            for e in free
        )
        if allocated:
            steps.append(("commit", key_of(allocated[0]), Allocation(results=results)))
        steps.append(
            ("commit", key_of(claims[0])._replace(name="imagined"), Allocation(results=results))
        )
    return steps


@pytest.mark.parametrize("imagine", [False, True])
async def test_the_index_and_holdings_agree_through_the_ledger(imagine: bool) -> None:
    for index in await indexes():
        devices = list(index.devices())
        holdings = holdings_of(index)
        for e in devices:
            assert holdings.taken(e.key) == index.taken(e.key), e.key
            assert holdings.holds(e.key) == index.holds(e.key), e.key
        before = [(e.key, index.holds(e.key), index.device_status(e.key)) for e in devices]
        over_index, over_holdings = Ledger(index), Ledger(holdings)
        if imagine:
            for step in imagined(index, devices):
                for ledger in (over_index, over_holdings):
                    if step[0] == "release":
                        ledger.release(step[1])
                    else:
                        ledger.commit(step[1], step[2])
        assert answers(over_index, devices) == answers(over_holdings, devices), index.cluster
        # The base is the model's: nothing imagined is written into it.
        assert [(e.key, index.holds(e.key), index.device_status(e.key)) for e in devices] == before


async def test_a_released_claim_frees_its_devices_and_counters() -> None:
    for index in await indexes():
        devices = list(index.devices())
        ledger = Ledger(index)
        for claim in index.records(RESOURCE_CLAIM):
            if isinstance(claim, ClaimRecord) and claim.allocation is not None:
                ledger.release(key_of(claim))
        # Nothing holds anything any more: every device is free and every counter set whole.
        for e in devices:
            assert not ledger.taken(e.key) and ledger.holders(e.key) == [], e.key
            for c in e.device.consumes_counters:
                free = ledger.counters_free(
                    CounterSetKey(e.key.cluster, e.key.driver, e.key.pool, c.counter_set)
                )
                total = {
                    cs.name: cs.counters for cs in index.pool(e.key.driver, e.key.pool).counter_sets
                }[c.counter_set]
                assert free == {k: parse_quantity(v) for k, v in total.items()}, e.key
