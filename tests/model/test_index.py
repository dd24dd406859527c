"""ClusterIndex: reverse maps, the transitions each event makes, the derived delta and live
events each batch carries, and seeding (index.py rules 1-8)."""

from __future__ import annotations

from msgspec.structs import replace

from dra_mirror.service.model import changes as ch
from dra_mirror.service.model.index import ClusterIndex, Event
from dra_mirror.service.model.kinds import KINDS
from dra_mirror.service.model.live import LIVE_BATCH_LIMIT, ClaimEvent, DeviceEvent, Resync
from dra_mirror.service.model.records import (
    BLOCKED,
    FREE,
    HELD,
    SHARED,
    Consumer,
    DeviceKey,
    ObjectKey,
    key_of,
)
from tests.model.builders import CLUSTER, DRIVER, claim, device, pod, slice_


def dk(pool: str, name: str) -> DeviceKey:
    return DeviceKey(CLUSTER, DRIVER, pool, name)


def ck(name: str, namespace: str = "ns") -> ObjectKey:
    return ObjectKey(CLUSTER, "ResourceClaim", namespace, name)


def pk(name: str, namespace: str = "ns") -> ObjectKey:
    return ObjectKey(CLUSTER, "Pod", namespace, name)


def listed_index() -> ClusterIndex:
    """An index past its first LIST of every kind (an empty cluster), as a reactor's is."""
    index = ClusterIndex(CLUSTER)
    for kind in KINDS:
        changes = index.resync(kind, [], at="t0")
        assert not (changes.upserts or changes.deletes or changes.transitions or changes.delta)
    return index


def types(changes: ch.Changes) -> list[str]:
    return [t.type for t in changes.transitions]


def add(index: ClusterIndex, *records, at: str = "t1") -> ch.Changes:
    return index.apply([Event("ADDED", r) for r in records], at=at)


def delete(index: ClusterIndex, *records, at: str = "t9") -> ch.Changes:
    return index.apply([Event("DELETED", r) for r in records], at=at)


N1 = slice_(
    "n1-gpu",
    pool="n1",
    node="n1",
    devices=(device("gpu-0", uuid="GPU-0"), device("gpu-1", uuid="GPU-1")),
)


def test_claim_lifecycle_transitions() -> None:
    index = listed_index()
    add(index, N1)
    pending = claim("c1")
    changes = add(index, pending)
    assert types(changes) == [ch.CLAIM_CREATED]  # no pod needs it: not waiting
    assert changes.upserts == [pending]
    user = pod("p1", phase="Pending", claims=(("gpu", "c1", None),))
    changes = add(index, user, at="t1")
    assert types(changes) == [ch.WAIT_STARTED]  # a pod references it: waiting
    assert not changes.transitions[0].before_observation

    allocated = replace(
        claim("c1", devices=(("n1", "gpu-0"),), node="n1"),
        meta=replace(pending.meta, resource_version="2"),
    )
    changes = index.apply([Event("MODIFIED", allocated)], at="t2")
    assert types(changes) == [ch.WAIT_ENDED, ch.ALLOCATED, ch.IDLE_STARTED]
    wait_ended, alloc, _ = changes.transitions
    assert wait_ended.reason == "allocated"
    assert (alloc.device, alloc.uuid, alloc.node, alloc.class_names) == (
        "gpu-0",
        "GPU-0",
        "n1",
        ("gpu.nvidia.com",),
    )
    assert index.idle_since(ck("c1")) == "t2"
    assert index.device_status(dk("n1", "gpu-0")) == HELD
    assert index.lookup("device_allocations", dk("n1", "gpu-0"))[0].claim == ck("c1")

    changes = add(index, pod("p1", node="n1", phase="Pending", claims=(("gpu", "c1", None),)),
                  at="t3")  # fmt: skip
    assert types(changes) == []
    reserved = claim(
        "c1", devices=(("n1", "gpu-0"),), node="n1", consumers=(("p1", "uid-p1"),), rv="3"
    )
    changes = index.apply([Event("MODIFIED", reserved)], at="t4")
    # its pod is scheduled and Pending: starting, not idle (service.model.activity)
    assert types(changes) == [ch.CONSUMER_ADDED, ch.IDLE_ENDED]
    assert index.idle_since(ck("c1")) is None
    uses = (("gpu", "c1", None),)
    changes = index.apply([Event("MODIFIED", pod("p1", node="n1", rv="2", claims=uses))],
                          at="t5")  # fmt: skip
    assert types(changes) == []  # running now
    changes = index.apply(
        [Event("MODIFIED", pod("p1", node="n1", phase="Succeeded", rv="3", claims=uses))],
        at="t6",
    )
    assert types(changes) == [ch.IDLE_STARTED]
    assert index.idle_since(ck("c1")) == "t6"

    # The delete-protection finalizer: the controller deallocates once no pod reserves it;
    # its pod has finished, so nothing waits for it.
    deallocated = claim("c1", rv="4")
    changes = index.apply([Event("MODIFIED", deallocated)], at="t7")
    assert types(changes) == [ch.RELEASED, ch.CONSUMER_REMOVED, ch.IDLE_ENDED]
    assert index.device_status(dk("n1", "gpu-0")) == FREE
    assert index.lookup("device_allocations", dk("n1", "gpu-0")) == []

    # A new pod needs it: it waits; the pod goes before it is served: abandoned.
    changes = add(index, pod("p2", phase="Pending", claims=uses), at="t8")
    assert types(changes) == [ch.WAIT_STARTED]
    changes = delete(index, pod("p2", phase="Pending", claims=uses))
    assert types(changes) == [ch.WAIT_ENDED]
    assert changes.transitions[0].reason == "unreferenced"
    add(index, pod("p3", phase="Pending", claims=uses), at="t9")
    changes = delete(index, deallocated)
    assert types(changes) == [ch.WAIT_ENDED, ch.CLAIM_DELETED]
    assert changes.transitions[0].reason == "deleted"
    assert changes.deletes == [deallocated] and changes.upserts == []
    assert index.lookup("class_claims", (CLUSTER, "gpu.nvidia.com")) == []


def test_deleting_an_allocated_claim_releases_everything() -> None:
    index = listed_index()
    held = claim("c1", devices=(("n1", "gpu-0"), ("n1", "gpu-1")), consumers=(("p1", "u1"),))
    add(index, N1, held)
    changes = delete(index, held)
    assert types(changes) == [
        ch.RELEASED,
        ch.RELEASED,
        ch.CONSUMER_REMOVED,
        ch.IDLE_ENDED,
        ch.CLAIM_DELETED,
    ]
    assert index.idle_since(ck("c1")) is None
    # the holds and reservations end because the claim is gone, not by a deallocation
    assert [t.reason for t in changes.transitions[:3]] == ["deleted"] * 3


def test_a_deleted_claims_holds_end_deleted_in_history() -> None:
    """The intervals history writes from a deletion: `deleted`, never `released`."""
    from dra_mirror.service.history.intervals import Decider, Plan
    from dra_mirror.service.history.models import (
        INTERVAL_TABLES,
        AllocationInterval,
        ConsumerInterval,
    )

    index = listed_index()
    held = claim("c1", devices=(("n1", "gpu-0"),), consumers=(("p1", "u1"),))
    opened = add(index, N1, held, at="2026-01-01T00:00:01Z")
    deleted = delete(index, held, at="2026-01-01T00:00:02Z")
    plan = Plan()
    empty = {table: {} for table in INTERVAL_TABLES}
    Decider(plan, empty).apply([*opened.transitions, *deleted.transitions])
    for table in (AllocationInterval, ConsumerInterval):
        assert [row["end_reason"] for row in plan.inserts[table]] == ["deleted"], table
    # a deallocation (the claim kept) still ends its hold `released`
    index = listed_index()
    opened = add(index, N1, held, at="2026-01-01T00:00:01Z")
    freed = index.apply([Event("MODIFIED", claim("c1", rv="2"))], at="2026-01-01T00:00:02Z")
    plan = Plan()
    Decider(plan, {table: {} for table in INTERVAL_TABLES}).apply(
        [*opened.transitions, *freed.transitions]
    )
    assert [row["end_reason"] for row in plan.inserts[AllocationInterval]] == ["released"]
    assert [row["end_reason"] for row in plan.inserts[ConsumerInterval]] == ["removed"]


def test_identical_upserts_and_unknown_deletes_are_no_ops() -> None:
    index = listed_index()
    add(index, N1, claim("c1"))
    assert not add(index, N1, claim("c1"))
    assert not delete(index, claim("nope"))


def test_a_recreated_claim_is_a_delete_and_a_create() -> None:
    index = listed_index()
    add(index, N1, claim("c1", devices=(("n1", "gpu-0"),)))
    changes = add(index, claim("c1", uid="new-uid"))
    assert types(changes) == [
        ch.RELEASED,
        ch.IDLE_ENDED,
        ch.CLAIM_DELETED,
        ch.CLAIM_CREATED,
    ]
    assert changes.upserts == [claim("c1", uid="new-uid")] and changes.deletes == []


def test_shared_device_holds_and_remaining() -> None:
    index = listed_index()
    shared = slice_("n2-gpu", pool="n2", node="n2", devices=(device("gpu-0", shareable=True),))
    a = claim("a", devices=(("n2", "gpu-0"),), shares={"gpu-0": {f"{DRIVER}/memory": "10Gi"}})
    b = claim("b", devices=(("n2", "gpu-0"),), shares={"gpu-0": {f"{DRIVER}/memory": "20Gi"}})
    changes = add(index, shared, a, b)
    allocated = [t for t in changes.transitions if t.type == ch.ALLOCATED]
    assert [(t.claim, t.share_id, t.consumed_capacity) for t in allocated] == [
        ("a", "share-a", {f"{DRIVER}/memory": "10Gi"}),
        ("b", "share-b", {f"{DRIVER}/memory": "20Gi"}),
    ]
    assert index.device_status(dk("n2", "gpu-0")) == SHARED
    assert [h.claim.name for h in index.holds(dk("n2", "gpu-0"))] == ["a", "b"]


def test_partitions_block_each_other_through_pool_counters() -> None:
    index = listed_index()
    # 1.35 style: the counters in their own slice of the pool, the partitions in another.
    counters = slice_(
        "n3-counters", pool="n3", node="n3", count=2, counters={"gpu-0": {"memory": "80Gi"}}
    )
    parts = slice_(
        "n3-parts",
        pool="n3",
        node="n3",
        count=2,
        devices=(
            device("gpu-0", consumes={"gpu-0": {"memory": "80Gi"}}),
            device("gpu-0-mig-a", consumes={"gpu-0": {"memory": "40Gi"}}),
            device("gpu-0-mig-b", consumes={"gpu-0": {"memory": "40Gi"}}),
        ),
    )
    add(index, counters, parts)
    assert index.pool(DRIVER, "n3").complete
    add(index, claim("c", devices=(("n3", "gpu-0-mig-a"),)))
    assert index.device_status(dk("n3", "gpu-0")) == BLOCKED
    assert index.device_status(dk("n3", "gpu-0-mig-a")) == HELD
    assert index.device_status(dk("n3", "gpu-0-mig-b")) == FREE


def test_pool_generations_and_completeness() -> None:
    index = listed_index()
    old_a = slice_("p-a", pool="big", generation=1, count=2, devices=(device("d0"), device("d1")))
    old_b = slice_("p-b", pool="big", generation=1, count=2, devices=(device("d2"),))
    changes = add(index, old_a, old_b)
    assert types(changes) == [ch.DEVICE_APPEARED] * 3
    assert index.pool(DRIVER, "big").complete
    # The driver republishes: generation 2 slice a first, with d1 changed and d0 gone.
    new_a = slice_(
        "p-a2", pool="big", generation=2, count=2, devices=(device("d1", memory="40Gi"),)
    )
    changes = add(index, new_a)
    assert sorted((t.type, t.device) for t in changes.transitions) == [
        (ch.DEVICE_CHANGED, "d1"),
        (ch.DEVICE_DISAPPEARED, "d0"),
        (ch.DEVICE_DISAPPEARED, "d2"),  # old generation: ignored for inventory
    ]
    assert not index.pool(DRIVER, "big").complete
    assert index.device(dk("big", "d1")).pool_complete is False
    new_b = slice_("p-b2", pool="big", generation=2, count=2, devices=(device("d2"),))
    changes = add(index, new_b)
    assert types(changes) == [ch.DEVICE_APPEARED]
    assert index.device(dk("big", "d1")).pool_complete is True
    changes = delete(index, old_a, old_b)  # the old generation goes away: nothing changes
    assert types(changes) == []
    assert index.lookup("pool_devices", (CLUSTER, DRIVER, "big")) == [
        dk("big", "d1"),
        dk("big", "d2"),
    ]


def test_device_reverse_maps() -> None:
    index = listed_index()
    add(index, N1)
    slice_key = key_of(N1)
    assert index.lookup("node_slices", (CLUSTER, "n1")) == [slice_key]
    assert index.lookup("node_devices", (CLUSTER, "n1")) == [dk("n1", "gpu-0"), dk("n1", "gpu-1")]
    assert index.lookup("slice_devices", slice_key) == [dk("n1", "gpu-0"), dk("n1", "gpu-1")]
    assert index.lookup("uuid_devices", "GPU-1") == [dk("n1", "gpu-1")]
    assert index.lookup("name_devices", "gpu-0") == [dk("n1", "gpu-0")]
    # The driver renumbers: GPU-1 is now gpu-0 (device names are not hardware identity).
    renumbered = replace(
        N1, devices=(device("gpu-0", uuid="GPU-1"),), meta=replace(N1.meta, resource_version="2")
    )
    changes = index.apply([Event("MODIFIED", renumbered)], at="t2")
    assert sorted(t.type for t in changes.transitions) == [ch.DEVICE_CHANGED, ch.DEVICE_DISAPPEARED]
    assert index.lookup("uuid_devices", "GPU-1") == [dk("n1", "gpu-0")]
    assert index.lookup("uuid_devices", "GPU-0") == []
    delete(index, renumbered)
    assert index.lookup("node_slices", (CLUSTER, "n1")) == []
    assert index.lookup("name_devices", "gpu-0") == []
    assert list(index.devices()) == []


def test_template_claims_resolved_through_the_pod() -> None:
    index = listed_index()
    generated = claim("web-0-gpu-x7k2q", template_owner="web-0")
    add(index, generated)
    assert index.get(ck("web-0-gpu-x7k2q")).template_name is None
    web = pod("web-0", claims=(("gpu", "web-0-gpu-x7k2q", "gpu-template"),))
    changes = add(index, web)
    view = index.get(ck("web-0-gpu-x7k2q"))
    assert view.template_name == "gpu-template"
    assert view in changes.upserts  # the claim's view changed: re-emitted
    template = ObjectKey(CLUSTER, "ResourceClaimTemplate", "ns", "gpu-template")
    assert index.lookup("template_claims", template) == [ck("web-0-gpu-x7k2q")]
    assert index.lookup("claim_referrers", ck("web-0-gpu-x7k2q")) == [pk("web-0")]
    # A claim (re)listed without template_name keeps the index's view.
    assert not add(index, generated)
    delete(index, web)
    assert index.get(ck("web-0-gpu-x7k2q")).template_name is None
    assert index.lookup("template_claims", template) == []


def test_resync_deletes_what_vanished_and_is_idempotent() -> None:
    index = listed_index()
    add(index, claim("a"), claim("b"), pod("p"))
    changes = index.resync(
        "ResourceClaim", [claim("a"), claim("c")], at="t5", resource_version="77"
    )
    assert [key_of(r).name for r in changes.upserts] == ["c"]
    assert [key_of(r).name for r in changes.deletes] == ["b"]
    assert changes.resource_version == "77"
    assert index.get(pk("p")) is not None  # other kinds untouched
    assert not index.resync("ResourceClaim", [claim("a"), claim("c")], at="t6")


def test_a_batch_holds_each_key_once() -> None:
    index = listed_index()
    c1, c1b = claim("c1"), claim("c1", rv="2")
    changes = index.apply([Event("ADDED", c1), Event("MODIFIED", c1b)], at="t1")
    assert changes.upserts == [c1b] and changes.deletes == []
    changes = index.apply([Event("MODIFIED", claim("c1", rv="3")), Event("DELETED", c1b)], at="t2")
    assert changes.upserts == [] and [key_of(r) for r in changes.deletes] == [ck("c1")]
    assert changes.deletes[0].meta.resource_version == "3"  # the last known state


def test_consumer_pod_replaced_under_the_same_name_is_not_running_it() -> None:
    index = listed_index()
    add(index, claim("c1", devices=(("n1", "gpu-0"),), consumers=(("p1", "old-uid"),)))
    assert index.idle_since(ck("c1")) == "t1"
    add(index, pod("p1", uid="new-uid"), at="t2")
    assert index.idle_since(ck("c1")) == "t1"
    changes = add(index, pod("p1", uid="old-uid", rv="2"), at="t3")
    assert types(changes) == [ch.IDLE_ENDED]


def test_consumers_are_unknown_until_pods_are_listed() -> None:
    index = ClusterIndex(CLUSTER)
    running = claim("running", devices=(("n1", "gpu-0"),), consumers=(("p1", "uid-p1"),))
    gone = claim("gone", devices=(("n1", "gpu-1"),), consumers=(("p2", "uid-p2"),))
    changes = index.resync("ResourceClaim", [running, gone], at="t1")
    # Claims listed before pods: their consumers are unknown, not gone — no idle spell.
    assert ch.IDLE_STARTED not in types(changes)
    changes = index.resync("Pod", [pod("p1")], at="t2")
    assert changes.listed_kind == "Pod"
    assert [(t.type, t.claim) for t in changes.transitions] == [(ch.IDLE_STARTED, "gone")]
    assert index.idle_since(ck("gone")) == "t2" and index.idle_since(ck("running")) is None
    # Later lists change nothing by themselves.
    assert not index.resync("Pod", [pod("p1")], at="t3")


def test_deltas_report_net_changes_of_the_derived_state() -> None:
    index = ClusterIndex(CLUSTER)
    for kind in KINDS:
        assert not index.resync(kind, [], at="t0").delta
    held = claim("c1", devices=(("n1", "gpu-0"),))
    delta = add(index, N1, held).delta
    assert delta.devices == {
        dk("n1", "gpu-0"): index.device(dk("n1", "gpu-0")),
        dk("n1", "gpu-1"): index.device(dk("n1", "gpu-1")),
    }
    assert delta.statuses == {dk("n1", "gpu-0"): "held", dk("n1", "gpu-1"): "free"}
    assert delta.idle == {ck("c1"): "t1"}
    added = {(r, k, v) for r, k, v, _ in delta.links_added()}
    assert ("uuid_devices", "GPU-1", dk("n1", "gpu-1")) in added
    assert ("device_allocations", dk("n1", "gpu-0"), (ck("c1"), "r", "")) in added
    assert list(delta.links_removed()) == []
    # Bounded relations come as whole lists; the two with a large fan-out only member-wise.
    assert delta.lists[("node_devices", (CLUSTER, "n1"))] == [dk("n1", "gpu-0"), dk("n1", "gpu-1")]
    assert [a.claim for a in delta.lists[("device_allocations", dk("n1", "gpu-0"))]] == [ck("c1")]
    assert not any(relation in ("class_claims", "name_devices") for relation, _ in delta.lists)
    # Within one batch: the claim goes and comes back elsewhere; the slice goes.
    moved = claim("c1", devices=(("n1", "gpu-1"),), rv="2")
    changes = index.apply(
        [Event("DELETED", held), Event("ADDED", moved), Event("DELETED", N1)], at="t2"
    )
    delta = changes.delta
    assert ("device_allocations", dk("n1", "gpu-0"), (ck("c1"), "r", "")) in set(
        delta.links_removed()
    )
    assert ("device_allocations", dk("n1", "gpu-1"), (ck("c1"), "r", "")) in {
        (r, k, v) for r, k, v, _ in delta.links_added()
    }
    assert delta.devices == {dk("n1", "gpu-0"): None, dk("n1", "gpu-1"): None}
    assert delta.statuses == {dk("n1", "gpu-0"): None, dk("n1", "gpu-1"): None}
    assert delta.idle == {ck("c1"): "t2"}  # ended with the old claim, started with the new
    assert delta.lists[("node_devices", (CLUSTER, "n1"))] == []


def test_an_index_that_is_the_store_keeps_no_link_deltas() -> None:
    index = ClusterIndex(CLUSTER, link_deltas=False)
    delta = add(index, N1, claim("c1", devices=(("n1", "gpu-0"),))).delta
    assert not delta.linked and not delta.unlinked and not delta.lists
    assert delta.statuses == {dk("n1", "gpu-0"): "held", dk("n1", "gpu-1"): "free"}


def test_a_derived_change_is_a_live_event_even_when_the_claim_did_not_change() -> None:
    index = listed_index()
    held = claim("c1", devices=(("n1", "gpu-0"),), consumers=(("p1", "uid-p1"),))
    add(index, N1, pod("p1", uid="uid-p1", phase="Pending"), held, at="t1")
    assert index.idle_since(ck("c1")) == "t1"
    # The consumer pod starts running: the claim object is the same, its idleness is not.
    changes = add(index, pod("p1", uid="uid-p1", phase="Running", rv="2"), at="t2")
    [event] = [e for e in changes.events if isinstance(e, ClaimEvent)]
    assert (event.type, event.name) == ("MODIFIED", "c1")
    assert event.old == event.new == index.get(ck("c1"))
    assert (event.old_idle_since, event.new_idle_since) == ("t1", None)
    assert changes.delta.idle == {ck("c1"): None}
    # Allocation moves a device from free to held: a device event with both states.
    changes = add(index, claim("c2", devices=(("n1", "gpu-1"),), rv="3"), at="t3")
    [device] = [e for e in changes.events if isinstance(e, DeviceEvent)]
    assert device.key == dk("n1", "gpu-1") and device.type == "MODIFIED"
    assert (device.old.status, device.new.status) == ("free", "held")


def test_a_device_released_and_reallocated_in_one_batch_is_a_live_event() -> None:
    index = listed_index()
    add(index, N1, claim("c1", devices=(("n1", "gpu-0"),)), at="t1")
    # One batch: c1 goes, c2 takes the same device. Its status stays "held"; its holder moved.
    changes = index.apply(
        [Event("DELETED", claim("c1", devices=(("n1", "gpu-0"),))),
         Event("ADDED", claim("c2", devices=(("n1", "gpu-0"),), rv="2"))],
        at="t2",
    )  # fmt: skip
    [event] = [e for e in changes.events if isinstance(e, DeviceEvent)]
    assert event.key == dk("n1", "gpu-0") and event.type == "MODIFIED"
    assert (event.old.status, event.new.status) == ("held", "held")
    assert [h.claim for h in event.old.holders] == [ck("c1")]
    assert [h.claim for h in event.new.holders] == [ck("c2")]


def test_a_device_events_old_side_is_the_snapshot_before_the_batch() -> None:
    index = listed_index()
    add(index, N1, at="t1")
    changes = add(index, claim("c1", devices=(("n1", "gpu-0"),)), at="t2")
    [event] = [e for e in changes.events if isinstance(e, DeviceEvent)]
    assert (event.old.status, event.old.holders) == ("free", ())
    assert [h.claim for h in event.new.holders] == [ck("c1")]
    changes = delete(index, claim("c1", devices=(("n1", "gpu-0"),)))
    [event] = [e for e in changes.events if isinstance(e, DeviceEvent)]
    assert [h.claim for h in event.old.holders] == [ck("c1")]
    assert (event.new.status, event.new.holders) == ("free", ())


def test_large_batches_carry_one_resync_but_all_their_derived_state() -> None:
    index = listed_index()
    claims = [claim(f"c{i}") for i in range(LIVE_BATCH_LIMIT + 1)]
    changes = add(index, *claims)
    assert len(changes.upserts) == LIVE_BATCH_LIMIT + 1
    assert changes.events == [Resync(CLUSTER, f"a batch of {LIVE_BATCH_LIMIT + 1} objects")]
    assert len(changes.delta.linked) == LIVE_BATCH_LIMIT + 1  # every claim's class link
    assert add(index, claim("one-more")).events  # small batches do


def test_a_seeded_index_is_silent_and_its_first_lists_announce_what_it_holds() -> None:
    held = claim("c1", devices=(("n1", "gpu-0"),))
    earlier = listed_index()
    add(earlier, N1, held, at="t1")
    records = [r for kind in KINDS for r in earlier.records(kind)]
    index = ClusterIndex(CLUSTER)
    index.seed(ch.Seed(records, {ck("c1"): "t1"}, frozenset(KINDS)), at="t5")
    assert index.idle_since(ck("c1")) == "t1" and index.device_status(dk("n1", "gpu-0")) == "held"
    # The first claim LIST re-announces the holding although nothing changed...
    changes = index.resync("ResourceClaim", [held], at="t6")
    assert not changes.upserts and not changes.delta
    assert types(changes) == [ch.CLAIM_CREATED, ch.ALLOCATED, ch.IDLE_STARTED]
    assert changes.transitions[1].uuid == "GPU-0"  # the seed's device names it
    # ...once: later lists of the same state say nothing.
    assert not index.resync("ResourceClaim", [held], at="t7")
    # The slices' first LIST announces the devices; what vanished is an ordinary delete.
    changes = index.resync("ResourceSlice", [], at="t8")
    assert [r.meta.name for r in changes.deletes] == [N1.meta.name]
    assert types(changes).count(ch.DEVICE_DISAPPEARED) == 2
    assert changes.delta.devices == {dk("n1", "gpu-0"): None, dk("n1", "gpu-1"): None}


def _for_group(record, group: str = "trainers"):
    group_entry = Consumer("podgroups", group, f"uid-{group}", "scheduling.k8s.io")
    return replace(record, reserved_for=(group_entry,), state="reserved")


def test_the_pods_of_a_podgroup_consume_the_claim_reserved_for_it() -> None:
    index = listed_index()
    shared = _for_group(claim("shared", devices=(("n1", "gpu-0"),)))
    changes = add(index, N1, shared, pod("w0", phase="Pending", pod_group="trainers"), at="t1")
    assert ch.IDLE_STARTED in types(changes)  # the group's only pod is not running
    assert index.lookup("group_pods", (CLUSTER, "ns", "trainers")) == [pk("w0")]
    changes = add(index, pod("w1", phase="Running", pod_group="trainers"), at="t2")
    assert types(changes) == [ch.IDLE_ENDED]
    # A pod of another group, or of the same name elsewhere, is not a consumer.
    add(index, pod("x", phase="Running", pod_group="others"), at="t3")
    changes = delete(index, pod("w1", phase="Running", pod_group="trainers"), at="t4")
    assert types(changes) == [ch.IDLE_STARTED] and index.idle_since(ck("shared")) == "t4"


def test_a_podgroup_with_no_pods_is_unknown_until_pods_are_listed() -> None:
    index = ClusterIndex(CLUSTER)
    shared = _for_group(claim("shared", devices=(("n1", "gpu-0"),)))
    assert ch.IDLE_STARTED not in types(index.resync("ResourceClaim", [shared], at="t1"))
    changes = index.resync("Pod", [], at="t2")
    assert [(t.type, t.claim) for t in changes.transitions] == [(ch.IDLE_STARTED, "shared")]


def test_a_claim_a_pod_status_names_for_extended_resources_is_an_extended_resource_claim() -> None:
    index = listed_index()
    made = claim("p-extended-resources-x7k2q")
    add(index, made, at="t1")
    assert index.get(key_of(made)).origin == "manual"  # no annotation: nothing says more
    user = pod("p", extended_claim="p-extended-resources-x7k2q")
    changes = add(index, user, at="t2")
    assert [r.origin for r in changes.upserts if r.meta.name == made.meta.name] == [
        "extended-resource"
    ]
    assert index.lookup("claim_referrers", key_of(made)) == [pk("p")]
    changes = delete(index, user, at="t3")
    assert index.get(key_of(made)).origin == "manual"
    assert index.lookup("claim_referrers", key_of(made)) == []
