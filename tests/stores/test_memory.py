"""MemoryStore beyond the Protocol: derived device status, and that its own index (fed only
by Changes) agrees with the index that produced them."""

from __future__ import annotations

from dra_mirror.service.model.index import RELATIONS, ClusterIndex, Event
from dra_mirror.service.model.records import BLOCKED, FREE, HELD, SHARED
from dra_mirror.service.stores.memory import MemoryStore
from dra_mirror.service.stores.protocols import StateStore
from tests.model.builders import DRIVER, claim, device, pod, slice_
from tests.stores.test_contract import EAST, EAST_RECORDS, dk


async def test_memory_store_is_a_state_store() -> None:
    assert isinstance(MemoryStore(), StateStore)


async def test_device_status_and_counters() -> None:
    store = MemoryStore()
    index = ClusterIndex(EAST)
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
    assert await store.counters_free(EAST, DRIVER, "n3") == {"gpu-0": {"memory": 40 * 1024**3}}


async def test_the_store_index_matches_the_producing_index() -> None:
    store = MemoryStore()
    producer = ClusterIndex(EAST)
    batches = [
        [Event("ADDED", r) for r in EAST_RECORDS],
        [
            Event(
                "MODIFIED",
                pod("a", node="n1", phase="Succeeded", claims=(("gpu", "manual", None),), rv="2"),
            )
        ],
        [Event("DELETED", pod("b"))],
        [Event("MODIFIED", claim("idle", rv="2"))],
    ]
    for number, events in enumerate(batches):
        await store.apply(producer.apply(events, at=f"t{number}"))
    mirror = store.index(EAST)
    assert mirror is not None
    for relation in RELATIONS:
        assert mirror.links.mapping(relation) == producer.links.mapping(relation)
    assert {e.key: e for e in mirror.devices()} == {e.key: e for e in producer.devices()}
    assert {k: mirror.idle_since(k) for k in producer.idle_claims()} == {
        k: producer.idle_since(k) for k in producer.idle_claims()
    }
    assert set(mirror.idle_claims()) == set(producer.idle_claims())
