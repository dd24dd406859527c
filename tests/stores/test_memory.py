"""MemoryStore beyond the Protocol: it serves the very index its writer folds into (derived
device statuses included) and publishes each batch's live events, deriving nothing itself."""

from __future__ import annotations

import asyncio

from dra_mirror.service.model.index import Event
from dra_mirror.service.model.records import BLOCKED, FREE, HELD, SHARED, key_of
from dra_mirror.service.stores.memory import MemoryStore
from dra_mirror.service.stores.protocols import StateStore
from tests.model.builders import DRIVER, claim, device, slice_
from tests.stores.test_contract import EAST, EAST_RECORDS, POD_A, dk


async def test_memory_store_is_a_state_store() -> None:
    assert isinstance(MemoryStore(), StateStore)


async def test_device_status_and_counters() -> None:
    store = MemoryStore()
    index = store.open_index(EAST)
    mig = slice_(
        "n3",
        pool="n3",
        node="n3",
        counters={"gpu-0": {"memory": "80Gi"}},
        devices=(
            device("gpu-0", consumes={"gpu-0": {"memory": "80Gi"}}),
            device("mig-a", consumes={"gpu-0": {"memory": "40Gi"}}),
            device("mig-b", consumes={"gpu-0": {"memory": "40Gi"}}),
        ),
    )
    records = [*EAST_RECORDS, mig, claim("mig-claim", devices=(("n3", "mig-a"),))]
    await store.apply(index.apply([Event("ADDED", r) for r in records], at="t1"))
    keys = [
        dk(EAST, "n1", "gpu-0"),
        dk(EAST, "n2", "gpu-0"),
        dk(EAST, "fabric", "nic-0"),
        dk(EAST, "n3", "gpu-0"),
        dk(EAST, "n3", "mig-b"),
        dk(EAST, "nope", "x"),
        ("mars", DRIVER, "p", "d"),
    ]
    assert await store.device_status(keys) == [HELD, SHARED, FREE, BLOCKED, FREE, None, None]
    served = store.index(EAST)
    assert served is not None
    assert served.counters_free(DRIVER, "n3") == {"gpu-0": {"memory": 40 * 1024**3}}


async def test_the_store_serves_its_writers_index_and_publishes_its_events() -> None:
    store = MemoryStore()
    index = store.open_index(EAST)
    assert store.index(EAST) is index
    events = store.subscribe(EAST)
    first = asyncio.ensure_future(anext(events))
    await asyncio.sleep(0)  # the subscriber is listening
    changes = index.apply([Event("ADDED", r) for r in EAST_RECORDS], at="t1")
    # Readable as soon as the writer folded the batch: the store is that index.
    assert await store.get([key_of(POD_A)]) == [POD_A]
    assert not first.done()
    await store.apply(changes)
    assert (await asyncio.wait_for(first, 1)).event == changes.events[0]
    await events.aclose()
    # A new writer of the cluster (a reactor started again in this process) starts afresh.
    fresh = store.open_index(EAST)
    assert store.index(EAST) is fresh
    assert await store.list("Pod", cluster=EAST) == []
