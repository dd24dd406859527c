"""Contract of service.stores.protocols.StateStore, for every store in STORE_FACTORIES.

The world below is fed the way the reactor feeds a store: records folded into the index the
store opens for the cluster (`open_index`: the in-memory store's own; a fresh one for Redis),
whose Changes are handed to `store.apply`. Every expected answer is written out by hand from
the world's definition (never computed by the code under test).
"""

from __future__ import annotations

import pytest
from msgspec.structs import replace

from dra_mirror.service.model.changes import Changes
from dra_mirror.service.model.index import ClusterIndex, Event
from dra_mirror.service.model.kinds import KINDS
from dra_mirror.service.model.records import DeviceKey, ObjectKey, key_of
from dra_mirror.service.stores.protocols import (
    ClusterStatus,
    Relation,
    StateStore,
    UuidHolders,
    composed_holders,
)
from tests.model.builders import DRIVER, claim, device, node, pod, slice_, template

EAST, WEST = "east", "west"


def dk(cluster: str, pool: str, name: str) -> DeviceKey:
    return DeviceKey(cluster, DRIVER, pool, name)


def ck(name: str) -> ObjectKey:
    return ObjectKey(EAST, "ResourceClaim", "ns", name)


def pk(name: str) -> ObjectKey:
    return ObjectKey(EAST, "Pod", "ns", name)


SLICE_N1 = slice_(
    "n1-gpu",
    pool="n1",
    node="n1",
    devices=(device("gpu-0", uuid="GPU-A"), device("gpu-1", uuid="GPU-B")),
)
SLICE_N2 = slice_(
    "n2-gpu", pool="n2", node="n2", devices=(device("gpu-0", uuid="GPU-C", shareable=True),)
)
SLICE_FABRIC = slice_("fabric-1", pool="fabric", generation=1, devices=(device("nic-0"),))
SLICE_FABRIC_OLD = slice_("fabric-0", pool="fabric", generation=0, devices=(device("nic-9"),))
SLICE_WEST = slice_(
    "w1-gpu", pool="w1", node="w1", cluster=WEST, devices=(device("gpu-0", uuid="GPU-W"),)
)
MANUAL = claim("manual", devices=(("n1", "gpu-0"),), node="n1", consumers=(("a", "uid-a"),))
IDLE = claim("idle", devices=(("n1", "gpu-1"),), node="n1")
GENERATED = claim("b-gpu-x1", template_owner="b", class_name="mig")
SHARE_1 = claim(
    "share1",
    devices=(("n2", "gpu-0"),),
    shares={"gpu-0": {f"{DRIVER}/memory": "10Gi"}},
    consumers=(("b", "uid-b"),),
)
SHARE_2 = claim(
    "share2",
    devices=(("n2", "gpu-0"),),
    shares={"gpu-0": {f"{DRIVER}/memory": "20Gi"}},
    consumers=(("b", "uid-b"),),
)
POD_A = pod("a", node="n1", claims=(("gpu", "manual", None),))
POD_B = pod(
    "b",
    node="n2",
    claims=(("gpu", "b-gpu-x1", "t"), ("s1", "share1", None), ("s2", "share2", None)),
)
EAST_RECORDS = [
    node("n1"),
    node("n2"),
    SLICE_N1,
    SLICE_N2,
    SLICE_FABRIC,
    SLICE_FABRIC_OLD,
    MANUAL,
    IDLE,
    GENERATED,
    SHARE_1,
    SHARE_2,
    POD_A,
    POD_B,
    template("t"),
]


async def feed(store: StateStore, index: ClusterIndex, events: list[Event], at: str) -> Changes:
    changes = index.apply(events, at=at)
    await store.apply(changes)
    return changes


async def sync(store: StateStore, index: ClusterIndex, records: list, at: str) -> None:
    """What a reactor does first: one complete LIST per kind, each resynced, each applied."""
    for kind in KINDS:
        changes = index.resync(kind, [r for r in records if key_of(r).kind == kind], at=at)
        await store.apply(changes)


@pytest.fixture
async def world(store: StateStore) -> dict[str, ClusterIndex]:
    indexes = {EAST: store.open_index(EAST), WEST: store.open_index(WEST)}
    await sync(store, indexes[EAST], EAST_RECORDS, "2026-11-01T00:00:00Z")
    await sync(store, indexes[WEST], [SLICE_WEST, node("w1", cluster=WEST)], "2026-11-01T00:00:01Z")
    return indexes


async def test_status_round_trip_and_clusters(store: StateStore, world) -> None:
    status = ClusterStatus(
        name=EAST, connected=True, synced=True, api_version="v1", events=12, malformed={"Pod": 1}
    )
    await store.set_status(status)
    clusters = await store.clusters()
    assert [c.name for c in clusters] == [EAST, WEST]
    assert clusters[0] == status
    assert clusters[1] == ClusterStatus(name=WEST)  # data but no status yet
    await store.set_status(replace(status, synced=False, error="boom"))
    assert (await store.clusters())[0].error == "boom"


async def test_get_in_key_order(store: StateStore, world) -> None:
    keys = [
        pk("b"),
        ObjectKey(EAST, "Pod", "ns", "nope"),
        key_of(SLICE_WEST),
        ck("manual"),
        ObjectKey("mars", "Pod", "ns", "a"),
    ]
    got = await store.get(keys)
    assert (
        got[0] == POD_B
        and got[1] is None
        and got[2] == SLICE_WEST
        and got[3] == MANUAL
        and got[4] is None
    )
    # Keys may come back from a cursor as plain lists.
    assert await store.get([list(pk("a"))]) == [POD_A]


async def test_claim_view_carries_the_template(store: StateStore, world) -> None:
    (view,) = await store.get([ck("b-gpu-x1")])
    assert view == replace(GENERATED, template_name="t")


async def test_list_sorted_and_filtered(store: StateStore, world) -> None:
    claims = await store.list("ResourceClaim")
    assert [c.meta.name for c in claims] == ["b-gpu-x1", "idle", "manual", "share1", "share2"]
    slices = await store.list("ResourceSlice")
    assert [(s.meta.cluster, s.meta.name) for s in slices] == [
        (EAST, "fabric-0"),
        (EAST, "fabric-1"),
        (EAST, "n1-gpu"),
        (EAST, "n2-gpu"),
        (WEST, "w1-gpu"),
    ]
    assert [s.meta.name for s in await store.list("ResourceSlice", cluster=WEST)] == ["w1-gpu"]
    assert await store.list("Pod", namespace="other") == []
    assert [p.meta.name for p in await store.list("Pod", cluster=EAST, namespace="ns")] == [
        "a",
        "b",
    ]
    assert await store.list("Node", cluster="mars") == []


async def test_devices_of_valid_generations_only(store: StateStore, world) -> None:
    entries = await store.list_devices()
    assert [e.key for e in entries] == [
        dk(EAST, "fabric", "nic-0"),
        dk(EAST, "n1", "gpu-0"),
        dk(EAST, "n1", "gpu-1"),
        dk(EAST, "n2", "gpu-0"),
        dk(WEST, "w1", "gpu-0"),
    ]
    assert [e.key for e in await store.list_devices(cluster=WEST)] == [dk(WEST, "w1", "gpu-0")]
    assert await store.list_devices(driver="other.example.com") == []
    got = await store.devices(
        [dk(EAST, "n1", "gpu-1"), dk(EAST, "fabric", "nic-9"), dk(WEST, "w1", "gpu-0")]
    )
    assert got[1] is None  # an older pool generation does not count
    assert (
        got[0].device.uuid == "GPU-B" and got[0].node == "n1" and got[0].slice == key_of(SLICE_N1)
    )
    assert got[2].node == "w1" and got[2].pool_generation == 0 and got[2].pool_complete
    (fabric,) = await store.devices([dk(EAST, "fabric", "nic-0")])
    assert fabric.node is None and fabric.pool_generation == 1


async def test_every_relation(store: StateStore, world) -> None:
    async def one(relation: Relation, key) -> list:
        (found,) = await store.lookup(relation, [key])
        return found

    allocations = await one(Relation.DEVICE_ALLOCATIONS, dk(EAST, "n2", "gpu-0"))
    assert [(a.claim, a.share_id, a.consumed_capacity) for a in allocations] == [
        (ck("share1"), "share-share1", {f"{DRIVER}/memory": "10Gi"}),
        (ck("share2"), "share-share2", {f"{DRIVER}/memory": "20Gi"}),
    ]
    assert [a.claim for a in await one(Relation.DEVICE_ALLOCATIONS, dk(EAST, "n1", "gpu-0"))] == [
        ck("manual")
    ]
    assert await one(Relation.DEVICE_ALLOCATIONS, dk(EAST, "fabric", "nic-0")) == []
    assert await one(Relation.CLAIM_REFERRERS, ck("share1")) == [pk("b")]
    assert await one(Relation.CLAIM_REFERRERS, ck("idle")) == []
    assert await one(
        Relation.TEMPLATE_CLAIMS, ObjectKey(EAST, "ResourceClaimTemplate", "ns", "t")
    ) == [ck("b-gpu-x1")]
    assert await one(Relation.CLASS_CLAIMS, (EAST, "gpu.nvidia.com")) == [
        ck("idle"),
        ck("manual"),
        ck("share1"),
        ck("share2"),
    ]
    assert await one(Relation.CLASS_CLAIMS, (EAST, "mig")) == [ck("b-gpu-x1")]
    assert await one(Relation.NODE_SLICES, (EAST, "n1")) == [key_of(SLICE_N1)]
    assert await one(Relation.NODE_DEVICES, (EAST, "n1")) == [
        dk(EAST, "n1", "gpu-0"),
        dk(EAST, "n1", "gpu-1"),
    ]
    assert await one(Relation.NODE_PODS, (EAST, "n2")) == [pk("b")]
    assert await one(Relation.SLICE_DEVICES, key_of(SLICE_FABRIC)) == [dk(EAST, "fabric", "nic-0")]
    assert await one(Relation.SLICE_DEVICES, key_of(SLICE_FABRIC_OLD)) == []
    assert await one(Relation.POOL_DEVICES, (EAST, DRIVER, "n1")) == [
        dk(EAST, "n1", "gpu-0"),
        dk(EAST, "n1", "gpu-1"),
    ]
    assert await one(Relation.UUID_DEVICES, "GPU-W") == [dk(WEST, "w1", "gpu-0")]
    assert await one(Relation.UUID_DEVICES, "GPU-nope") == []
    # Names and uuids answer across clusters; ambiguous names give every match.
    assert await one(Relation.NAME_DEVICES, "gpu-0") == [
        dk(EAST, "n1", "gpu-0"),
        dk(EAST, "n2", "gpu-0"),
        dk(WEST, "w1", "gpu-0"),
    ]
    # Batched: answers in key order, one list per key.
    assert await store.lookup(Relation.NODE_PODS, [(EAST, "n1"), (EAST, "n9"), [EAST, "n2"]]) == [
        [pk("a")],
        [],
        [pk("b")],
    ]


async def test_holders_by_uuid_is_its_lookups_and_get_in_one_call(store: StateStore, world):
    """A shared device's uuid: its device, both holds, both claims; a uuid of another
    cluster; one no device has."""
    shared = await store.holders_by_uuid("GPU-C")
    device = dk(EAST, "n2", "gpu-0")
    assert shared.devices == [device]
    assert [ref.claim for ref in shared.holds[device]] == [ck("share1"), ck("share2")]
    assert shared.claims == dict(zip([ck("share1"), ck("share2")],
                                     await store.get([ck("share1"), ck("share2")]), strict=True))  # fmt: skip
    assert all(claim is not None for claim in shared.claims.values())
    assert shared == await composed_holders(store, "GPU-C")
    west = await store.holders_by_uuid("GPU-W")
    assert (west.devices, west.holds, west.claims) == ([dk(WEST, "w1", "gpu-0")],
                                                        {dk(WEST, "w1", "gpu-0"): []}, {})  # fmt: skip
    assert await store.holders_by_uuid("GPU-nope") == UuidHolders()


async def test_idle_since(store: StateStore, world) -> None:
    assert await store.idle_since([ck("idle"), ck("manual"), ck("b-gpu-x1"), ck("nope")]) == [
        "2026-11-01T00:00:00Z",
        None,
        None,
        None,
    ]


async def test_deletes_and_resync_update_every_index(store: StateStore, world) -> None:
    east = world[EAST]
    # Pod a goes away: its node loses it and the manual claim becomes idle at that moment.
    await feed(store, east, [Event("DELETED", POD_A)], "2026-11-02T00:00:00Z")
    assert await store.get([pk("a")]) == [None]
    assert await store.lookup(Relation.NODE_PODS, [(EAST, "n1")]) == [[]]
    assert await store.lookup(Relation.CLAIM_REFERRERS, [ck("manual")]) == [[]]
    assert await store.idle_since([ck("manual")]) == ["2026-11-02T00:00:00Z"]
    # A relist of slices without n1-gpu: its devices and their links vanish, but the one a
    # claim holds, which stays a device known from the allocation (and the uuid it had).
    changes = east.resync(
        "ResourceSlice", [SLICE_N2, SLICE_FABRIC, SLICE_FABRIC_OLD], at="2026-11-02T00:00:01Z"
    )
    assert [key_of(r) for r in changes.deletes] == [key_of(SLICE_N1)]
    await store.apply(changes)
    [held] = await store.devices([dk(EAST, "n1", "gpu-0")])
    assert held is not None and not held.published and held.slice is None
    assert (held.device.uuid, held.node) == ("GPU-A", "n1")
    assert await store.lookup(Relation.UUID_DEVICES, ["GPU-A"]) == [[dk(EAST, "n1", "gpu-0")]]
    assert await store.lookup(Relation.NODE_SLICES, [(EAST, "n1")]) == [[]]
    published = await store.list_devices(cluster=EAST)
    assert [e.key.pool for e in published if e.key.pool == "n1"] == []
    unpublished = await store.list_devices(cluster=EAST, published=False)
    assert [e.key for e in unpublished] == [dk(EAST, "n1", "gpu-0"), dk(EAST, "n1", "gpu-1")]
    # The claim still holds the (now unpublished) device: the hold is the claim's fact.
    assert [
        a.claim
        for a in (await store.lookup(Relation.DEVICE_ALLOCATIONS, [dk(EAST, "n1", "gpu-0")]))[0]
    ] == [ck("manual")]
    # The claim is deleted: its holds, class links and idleness go.
    await feed(store, east, [Event("DELETED", MANUAL)], "2026-11-02T00:00:02Z")
    assert await store.lookup(Relation.DEVICE_ALLOCATIONS, [dk(EAST, "n1", "gpu-0")]) == [[]]
    assert await store.devices([dk(EAST, "n1", "gpu-0")]) == [None]
    assert await store.lookup(Relation.UUID_DEVICES, ["GPU-A"]) == [[]]
    assert (
        ck("manual")
        not in (await store.lookup(Relation.CLASS_CLAIMS, [(EAST, "gpu.nvidia.com")]))[0]
    )
    assert await store.idle_since([ck("manual")]) == [None]


async def test_an_empty_batch_changes_nothing(store: StateStore, world) -> None:
    before = await store.list("ResourceClaim")
    await store.apply(Changes(cluster=EAST, at="2026-11-03T00:00:00Z"))
    assert await store.list("ResourceClaim") == before


async def test_a_resync_of_identical_data_is_empty(store: StateStore, world) -> None:
    east = world[EAST]
    changes = east.resync(
        "ResourceClaim", [MANUAL, IDLE, GENERATED, SHARE_1, SHARE_2], at="2026-11-03T00:00:00Z"
    )
    assert not changes
    await store.apply(changes)
    assert len(await store.list("ResourceClaim", cluster=EAST)) == 5


async def test_consumers_missing_after_the_first_pod_list_make_the_claim_idle(
    store: StateStore,
) -> None:
    north = store.open_index("north")
    ghost = claim(
        "ghost-held", devices=(("n1", "gpu-0"),), consumers=(("ghost", "uid-g"),), cluster="north"
    )
    # Claims listed before pods: the consumer is unknown, not gone.
    await store.apply(north.resync("ResourceClaim", [ghost], at="2026-11-04T00:00:00Z"))
    key = ObjectKey("north", "ResourceClaim", "ns", "ghost-held")
    assert await store.idle_since([key]) == [None]
    await store.apply(north.resync("Pod", [], at="2026-11-04T00:00:05Z"))
    assert await store.idle_since([key]) == ["2026-11-04T00:00:05Z"]
