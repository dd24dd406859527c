"""RedisStore beyond the shared contract: written from the Changes alone, it answers like the
MemoryStore serving the index that produced them (every read, every relation, device
statuses), keys are cluster-tagged, a takeover (an index seeded from what Redis holds, then
relisted) leaves nothing stale, fencing refuses a writer that lost its lease, and live events
are appended to the cluster's stream with the batch. All against the suite's real redis-server; the tests that need
no outage also against the suite's real Redis Cluster (three masters), where the same store
writes each cluster's transaction, its live stream included, on its slot's master."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from msgspec.structs import replace

from dra_mirror.service.model.index import RELATIONS, ClusterIndex, Event
from dra_mirror.service.model.kinds import KINDS
from dra_mirror.service.model.records import BLOCKED, FREE, HELD, SHARED, DeviceKey
from dra_mirror.service.stores import bus
from dra_mirror.service.stores.memory import MemoryStore
from dra_mirror.service.stores.protocols import Relation, StoreUnavailable
from dra_mirror.service.stores.redis import Fenced, RedisStore
from tests.model.builders import DRIVER, claim, device, node, pod, slice_
from tests.stores.test_contract import EAST, EAST_RECORDS, MANUAL, POD_A, POD_B, SLICE_N2, dk

MIG = slice_(
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


@pytest.fixture
async def server_store(redis_url: str):
    """A store on the suite's one redis-server (the outage tests stop it)."""
    prefix = f"test-{uuid.uuid4().hex[:12]}"
    store = RedisStore.from_url(redis_url, prefix=prefix)
    yield store
    await store.close()


@pytest.fixture(params=["server", pytest.param("cluster", marks=pytest.mark.redis_cluster)])
def store_url(request: pytest.FixtureRequest) -> str:
    """The URL of one redis-server, then of a Redis Cluster."""
    if request.param == "cluster":
        return request.getfixturevalue("redis_cluster").url
    return request.getfixturevalue("redis_url")


@pytest.fixture
async def redis_store(store_url: str):
    prefix = f"test-{uuid.uuid4().hex[:12]}"
    store = RedisStore.from_url(store_url, prefix=prefix)
    yield store
    await store.close()


async def assert_same(
    redis: RedisStore, memory: MemoryStore, cluster: str = EAST, *, idle: bool = True
) -> None:
    """Every read of `cluster` answers the same from both stores."""
    for kind in KINDS:
        assert await redis.list(kind, cluster=cluster) == await memory.list(kind, cluster=cluster)
    assert await redis.list_devices(cluster=cluster) == await memory.list_devices(cluster=cluster)
    index = memory.index(cluster)
    assert index is not None
    for relation in RELATIONS:
        keys = list(index.links.mapping(relation))
        assert await redis.lookup(relation, keys) == await memory.lookup(relation, keys), relation
    claims = [r.meta for r in await memory.list("ResourceClaim", cluster=cluster)]
    claim_keys = [(cluster, "ResourceClaim", m.namespace, m.name) for m in claims]
    if idle:
        assert await redis.idle_since(claim_keys) == await memory.idle_since(claim_keys)
    devices = [e.key for e in index.devices()]
    assert await redis.device_status(devices) == await memory.device_status(devices)


async def test_device_status_as_memory_derives_it(redis_store: RedisStore) -> None:
    index = ClusterIndex(EAST)
    records = [*EAST_RECORDS, MIG, claim("mig-claim", devices=(("n3", "mig-a"),))]
    await redis_store.apply(index.apply([Event("ADDED", r) for r in records], at="t1"))
    keys = [
        dk(EAST, "n1", "gpu-0"),
        dk(EAST, "n2", "gpu-0"),
        dk(EAST, "fabric", "nic-0"),
        dk(EAST, "n3", "gpu-0"),
        dk(EAST, "n3", "mig-b"),
        dk(EAST, "nope", "x"),
        ("mars", DRIVER, "p", "d"),
    ]
    assert await redis_store.device_status(keys) == [HELD, SHARED, FREE, BLOCKED, FREE, None, None]
    # The partition is released: the whole GPU is free again, the pool re-derived.
    await redis_store.apply(index.apply([Event("DELETED", claim("mig-claim"))], at="t2"))
    assert await redis_store.device_status(keys[3:5]) == [FREE, FREE]


async def test_every_read_matches_memory_through_churn(redis_store: RedisStore) -> None:
    memory = MemoryStore()
    served = memory.open_index(EAST)  # what the memory store answers from: the same events
    producer = ClusterIndex(EAST)
    batches = [
        [Event("ADDED", r) for r in [*EAST_RECORDS, MIG]],
        [Event("MODIFIED", replace(POD_A, phase="Succeeded"))],
        [Event("DELETED", POD_B), Event("ADDED", claim("mig-claim", devices=(("n3", "mig-a"),)))],
        [Event("DELETED", SLICE_N2), Event("ADDED", node("n4"))],
        [Event("MODIFIED", pod("a", node="n4", claims=(("gpu", "manual", None),), rv="9"))],
    ]
    for number, events in enumerate(batches):
        at = f"2026-11-0{number + 1}T00:00:00Z"
        await memory.apply(served.apply(events, at=at))
        await redis_store.apply(producer.apply(events, at=at))
        await assert_same(redis_store, memory)


async def test_every_key_carries_the_cluster_hash_tag(redis_store: RedisStore) -> None:
    index = ClusterIndex(EAST)
    await redis_store.apply(index.apply([Event("ADDED", r) for r in EAST_RECORDS], at="t"))
    keys = [k.decode() async for k in redis_store.redis.scan_iter(f"{redis_store.prefix}:*")]
    tagged = [k for k in keys if k.startswith(f"{redis_store.prefix}:{{{EAST}}}:")]
    assert set(keys) - set(tagged) == {f"{redis_store.prefix}:clusters"}
    assert len(tagged) > 20  # records, devices, statuses, idle marks and the link sets
    with pytest.raises(ValueError, match="hash tag"):
        redis_store.keys("a}b")


async def test_a_takeover_leaves_nothing_stale(store_url: str, redis_store: RedisStore) -> None:
    # The first writer mirrors the full world, then dies.
    await redis_store.apply(
        ClusterIndex(EAST).apply([Event("ADDED", r) for r in EAST_RECORDS], at="t1")
    )
    # Meanwhile pod b and slice n2-gpu vanished and pod a moved to n2. A new writer (fresh
    # process) seeds its index with what Redis holds, relists kind by kind, reports synced.
    successor = RedisStore.from_url(store_url, prefix=redis_store.prefix)
    moved = replace(POD_A, node_name="n2")
    now = [r for r in EAST_RECORDS if r not in (POD_B, SLICE_N2, POD_A)] + [moved]
    fresh, memory = ClusterIndex(EAST), MemoryStore()
    fresh.seed(await successor.held(EAST), at="t2")
    producer = memory.open_index(EAST)
    try:
        for kind in KINDS:
            listed = [r for r in now if _kind(r) == kind]
            await successor.apply(fresh.resync(kind, listed, at="t2"))
            producer.resync(kind, listed, at="t2")
        # The relist's diff against the seed deleted what vanished, with its derived keys.
        assert await successor.get([("east", "Pod", "ns", "b")]) == [None]
        await successor.set_status(replace_status(EAST))
        await assert_same(successor, memory, idle=False)
        # Idle marks keep the earliest observation: "idle" was idle when the first writer saw
        # it; the shared claims lost their consumer (pod b) in the relist.
        claims = [("east", "ResourceClaim", "ns", n) for n in ("idle", "share1", "manual")]
        assert await successor.idle_since(claims) == ["t1", "t2", None]
        assert await successor.lookup(Relation.NODE_PODS, [(EAST, "n1")]) == [[]]
    finally:
        await successor.close()


def _kind(record) -> str:
    from dra_mirror.service.model.records import KIND_OF

    return KIND_OF[type(record)]


def replace_status(name: str):
    from dra_mirror.service.stores.protocols import ClusterStatus

    return ClusterStatus(name=name, connected=True, synced=True, last_sync_at="t3")


async def test_a_fenced_writer_writes_nothing(redis_store: RedisStore) -> None:
    keys = redis_store.keys(EAST)
    await redis_store.redis.set(keys.fence, "2:other")
    redis_store.fence(EAST, "1:me")
    index = ClusterIndex(EAST)
    with pytest.raises(Fenced):
        await redis_store.apply(index.apply([Event("ADDED", MANUAL)], at="t"))
    assert await redis_store.redis.exists(keys.objects("ResourceClaim")) == 0
    await redis_store.redis.set(keys.fence, "1:me")
    await redis_store.apply(index.apply([Event("ADDED", POD_A)], at="t"))
    # What was refused stayed pending and lands with the next batch.
    assert await redis_store.get(
        [("east", "ResourceClaim", "ns", "manual"), ("east", "Pod", "ns", "a")]
    ) == [MANUAL, POD_A]


async def test_live_events_are_published_with_the_batch(redis_store: RedisStore) -> None:
    index = ClusterIndex(EAST)
    events = redis_store.subscribe(EAST)
    first = asyncio.ensure_future(anext(events))
    await asyncio.sleep(0.2)  # the subscription is in place
    records = [SLICE_N2, node("n2")]
    await redis_store.apply(index.apply([Event("ADDED", r) for r in records], at="t1"))
    share = claim(
        "share1", devices=(("n2", "gpu-0"),), shares={"gpu-0": {f"{DRIVER}/memory": "10Gi"}}
    )
    await redis_store.apply(index.apply([Event("ADDED", share)], at="t2"))
    seen = [(await asyncio.wait_for(first, 5)).event]
    while len(seen) < 3:
        seen.append((await asyncio.wait_for(anext(events), 5)).event)
    await events.aclose()
    added, claimed, held = seen
    assert isinstance(added, bus.DeviceEvent) and added.type == "ADDED"
    assert added.key == DeviceKey(EAST, DRIVER, "n2", "gpu-0") and added.new.status == FREE
    assert isinstance(claimed, bus.ClaimEvent) and claimed.type == "ADDED" and claimed.new == share
    assert isinstance(held, bus.DeviceEvent) and held.type == "MODIFIED"
    assert (held.old.status, held.new.status, held.node) == (FREE, SHARED, "n2")


async def test_a_subscriber_resumes_after_the_last_id_it_saw(redis_store: RedisStore) -> None:
    # The cluster's stream keeps the batches: a subscriber that comes back with the id of the
    # last event it saw gets every later one once, in order; an id not kept is a Resync.
    index = ClusterIndex(EAST)
    events = redis_store.subscribe(EAST)
    first = asyncio.ensure_future(anext(events))
    await asyncio.sleep(0.2)
    await redis_store.apply(index.apply([Event("ADDED", SLICE_N2)], at="t1"))
    seen = await asyncio.wait_for(first, 5)
    await events.aclose()
    share = claim(
        "share1", devices=(("n2", "gpu-0"),), shares={"gpu-0": {f"{DRIVER}/memory": "10Gi"}}
    )
    await redis_store.apply(index.apply([Event("ADDED", share)], at="t2"))  # claim + device
    resumed = redis_store.subscribe(EAST, after=seen.id)
    missed = [await asyncio.wait_for(anext(resumed), 5) for _ in range(2)]
    assert {type(d.event) for d in missed} == {bus.ClaimEvent, bus.DeviceEvent}
    assert len({seen.id, *(d.id for d in missed)}) == 3
    following = asyncio.ensure_future(anext(resumed))
    await asyncio.sleep(0.2)
    assert not following.done()  # nothing repeated
    await redis_store.apply(index.apply([Event("DELETED", share)], at="t3"))
    assert isinstance((await asyncio.wait_for(following, 5)).event, bus.ClaimEvent)
    await resumed.aclose()
    stranger = redis_store.subscribe(EAST, after="0badc0de-3")
    resync = await asyncio.wait_for(anext(stranger), 5)
    assert isinstance(resync.event, bus.Resync) and resync.event.cluster == EAST
    await stranger.aclose()


async def test_outage_raises_unavailable_and_keeps_the_batch(
    server_store: RedisStore, redis_server
) -> None:
    redis_store = server_store
    index = ClusterIndex(EAST)
    await redis_store.apply(index.apply([Event("ADDED", node("n1"))], at="t1"))
    await asyncio.to_thread(redis_server.stop)
    changes = index.apply([Event("ADDED", POD_A)], at="t2")
    with pytest.raises(StoreUnavailable):
        await redis_store.apply(changes)
    with pytest.raises(StoreUnavailable):
        await redis_store.get([("east", "Pod", "ns", "a")])
    await asyncio.to_thread(redis_server.start)
    # Redis came back (empty: no persistence); the unfenced writer retries the same batch.
    await redis_store.apply(changes)
    assert await redis_store.get([("east", "Pod", "ns", "a")]) == [POD_A]


async def test_a_restarted_redis_fences_the_writer_out(
    server_store: RedisStore, redis_server
) -> None:
    redis_store = server_store
    from dra_mirror.service.stores.lease import Lease

    lease = Lease(redis_store, EAST, ttl=60.0)
    token = await lease.acquire()
    assert token is not None
    redis_store.fence(EAST, token)
    index = ClusterIndex(EAST)
    await redis_store.apply(index.apply([Event("ADDED", node("n1"))], at="t1"))
    await asyncio.to_thread(redis_server.stop)
    await asyncio.to_thread(redis_server.start)
    # Redis came back empty: no fence, no lease. The writer must not write a partial cluster
    # (it would lack what it wrote before); the holder learns it lost the lease and relists.
    with pytest.raises(Fenced):
        await redis_store.apply(index.apply([Event("ADDED", POD_A)], at="t2"))
    assert await redis_store.redis.exists(redis_store.keys(EAST).objects("Pod")) == 0
    assert not await lease.renew()


async def test_on_a_cluster_a_batch_waits_for_the_masters_replica(redis_cluster, caplog) -> None:
    """Replication is asynchronous: each batch is followed by WAIT, so it counts as written
    once the replica holds it. With the replica of the slot's master gone, WAIT answers 0
    within its timeout: the batch is still written, and the store says so and stops waiting.
    The timeout is generous here: a replica on a loaded machine may take a while."""
    import logging

    from redis.crc import key_slot

    from dra_mirror.service.stores.redis_connect import connect

    store = RedisStore(
        connect(redis_cluster.url, socket_timeout=30.0),
        prefix=f"test-{uuid.uuid4().hex[:12]}", wait_timeout=5.0,
    )  # fmt: skip
    index = ClusterIndex(EAST)
    try:
        with caplog.at_level(logging.WARNING, logger="dra_mirror.service.stores.redis"):
            await store.apply(index.apply([Event("ADDED", node("n1"))], at="t1"))
            assert not caplog.records  # the replica answered
            master = redis_cluster.master_of(key_slot(f"{{{EAST}}}".encode()))
            port = int(master.info("replication")["slave0"].split("port=")[1].split(",")[0])
            replica = next(n for n in redis_cluster.nodes if n.port == port)
            await asyncio.to_thread(replica.kill)
            await store.apply(index.apply([Event("ADDED", POD_A)], at="t2"))
        assert "reached 0 of 1 replicas" in caplog.text
        assert await store.get([("east", "Pod", "ns", "a")]) == [POD_A]
    finally:
        await store.close()


async def test_holders_by_uuid_is_one_round_trip(redis_store: RedisStore) -> None:
    """whoHolds by uuid: the devices, their holds and the holding claims come back from one
    script per cluster, the clusters' scripts in one pipeline — not three dependent reads."""
    index = ClusterIndex(EAST)
    await redis_store.apply(index.apply([Event("ADDED", r) for r in EAST_RECORDS], at="t1"))
    await redis_store.holders_by_uuid("GPU-C")  # reads the cluster names (kept for a second)
    calls = 0
    call = redis_store._call

    async def counting(awaitable):
        nonlocal calls
        calls += 1
        return await call(awaitable)

    redis_store._call = counting  # type: ignore[method-assign]
    found = await redis_store.holders_by_uuid("GPU-C")
    assert calls == 1
    assert len(found.claims) == 2 and all(found.claims.values())
