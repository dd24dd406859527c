"""The index's central property (the model decides every write, purely): folding ANY event sequence into a
ClusterIndex gives the same records, reverse maps, devices, device statuses and idle claims
as a fresh index built from the final state; the Changes it emitted — records, derived delta
and live events — folded into plain dicts rebuild that state (a store needs no index of its
own), with transitions that balance (every allocation released at most once, …).

And across a takeover: an index seeded with what an earlier writer left, then relisting a
cluster that changed meanwhile, ends as a fresh index over the new state; the store written
from its Changes alone too; and history, which closed every interval when the new watcher
started, ends with the same intervals open as a fresh index would leave."""

from __future__ import annotations

from collections import Counter
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from msgspec.structs import replace

from dra_mirror.service.model import changes as ch
from dra_mirror.service.model import inventory
from dra_mirror.service.model.claims import claim_origin
from dra_mirror.service.model.consumers import POD_GROUP_API
from dra_mirror.service.model.index import RELATIONS, ClusterIndex, Event
from dra_mirror.service.model.kinds import KINDS
from dra_mirror.service.model.live import ClaimEvent, DeviceState
from dra_mirror.service.model.records import ClaimRecord, Consumer, PodRecord, Record, key_of
from dra_mirror.service.model.relations import FAN_OUT, Relation
from tests.model.builders import CLUSTER, claim, device, node, pod, slice_, taint_rule

POOLS = ("n0", "n1", "net")
DEVICE_NAMES = ("d0", "d1", "d2")
CLAIMS = ("c0", "c1", "c2")
PODS = ("p0", "p1", "p2")
GROUPS = ("g0", "g1")


@st.composite
def slices(draw: st.DrawFn) -> Record:
    pool = draw(st.sampled_from(POOLS))
    names = draw(st.lists(st.sampled_from(DEVICE_NAMES), unique=True, max_size=3))
    devices = tuple(
        device(
            name,
            uuid=draw(st.sampled_from(("U0", "U1", "U2", None))),
            shareable=draw(st.booleans()),
            consumes={"cs": {"m": draw(st.sampled_from(("1", "2")))}}
            if draw(st.booleans())
            else None,
        )
        for name in names
    )
    return slice_(
        f"{pool}-{draw(st.sampled_from('ab'))}",
        pool=pool,
        node=draw(st.sampled_from((None, pool if pool != "net" else "n0"))),
        generation=draw(st.integers(0, 2)),
        count=draw(st.integers(1, 2)),
        devices=devices,
        counters={"cs": {"m": "2"}} if draw(st.booleans()) else None,
        rv=str(draw(st.integers(0, 3))),
    )


@st.composite
def claims(draw: st.DrawFn) -> Record:
    held = draw(
        st.lists(
            st.tuples(st.sampled_from(POOLS), st.sampled_from(DEVICE_NAMES)),
            unique=True,
            max_size=2,
        )
    )
    shared = draw(st.booleans())
    name = draw(st.sampled_from(CLAIMS))
    consumers = draw(
        st.lists(
            st.tuples(st.sampled_from(PODS), st.sampled_from(("u1", "u2"))),
            unique_by=lambda c: c[0],
            max_size=2,
        )
    )
    # Kubernetes never gives two objects one uid: a name's uid changes when it is recreated.
    made = claim(
        name,
        uid=f"{name}-{draw(st.sampled_from(('u1', 'u2')))}",
        devices=tuple(held),
        shares={dev: {"gpu.nvidia.com/memory": "1Gi"} for _, dev in held} if shared else None,
        consumers=tuple((pod_name, f"{pod_name}-{uid}") for pod_name, uid in consumers),
        class_name=draw(st.sampled_from(("gpu", "mig"))),
        deleted=draw(st.booleans()),
        rv=str(draw(st.integers(0, 3))),
    )
    if draw(st.booleans()):  # reserved for a PodGroup as well [1.36+]
        group = Consumer("podgroups", draw(st.sampled_from(GROUPS)), "pg", POD_GROUP_API)
        made = replace(made, reserved_for=(*made.reserved_for, group))
    return made


@st.composite
def pods(draw: st.DrawFn) -> Record:
    entries = draw(
        st.lists(
            st.tuples(
                st.sampled_from(("a", "b")),
                st.sampled_from((*CLAIMS, None)),
                st.sampled_from(("t0", "t1", None)),
            ),
            unique_by=lambda e: e[0],
            max_size=2,
        )
    )
    name = draw(st.sampled_from(PODS))
    return pod(
        name,
        uid=f"{name}-{draw(st.sampled_from(('u1', 'u2')))}",
        phase=draw(st.sampled_from(("Running", "Pending", "Succeeded", "Failed"))),
        node=draw(st.sampled_from(("n0", "n1", None))),
        claims=tuple(entries),
        rv=str(draw(st.integers(0, 3))),
        pod_group=draw(st.sampled_from((*GROUPS, None))),
        extended_claim=draw(st.sampled_from((*CLAIMS, None, None))),
    )


@st.composite
def rules(draw: st.DrawFn) -> Record:
    """DeviceTaintRules selecting by pool, by device name, both, every device, or none."""
    return taint_rule(
        draw(st.sampled_from(("r0", "r1"))),
        pool=draw(st.sampled_from((*POOLS, None))),
        device=draw(st.sampled_from((*DEVICE_NAMES, None))),
        effect=draw(st.sampled_from(("NoExecute", "None"))),
        selector=draw(st.booleans()),
        rv=str(draw(st.integers(0, 3))),
    )


records = st.one_of(slices(), claims(), pods(), rules(), st.sampled_from([node("n0"), node("n1")]))


def _step(data: st.DataObject, final: dict[Any, Record]) -> Event:
    """One event: a new random record, a delete, or a small change of something present
    (a pod's phase, a claim's consumers now naming present pods) — the changes that random
    records alone rarely line up."""
    present = sorted(final, key=str)
    action = data.draw(st.sampled_from(("upsert", "upsert", "delete", "touch")))
    if action == "upsert" or not present:
        return Event(data.draw(st.sampled_from(("ADDED", "MODIFIED"))), data.draw(records))
    record = final[data.draw(st.sampled_from(present))]
    if action == "delete":
        return Event("DELETED", record)
    if isinstance(record, PodRecord):
        phase = data.draw(st.sampled_from(("Running", "Pending", "Succeeded", "Failed")))
        return Event("MODIFIED", replace(record, phase=phase))
    if isinstance(record, ClaimRecord):
        pods_present = [final[k] for k in present if k.kind == "Pod"]
        chosen = (
            data.draw(st.lists(st.sampled_from(pods_present), max_size=2)) if pods_present else []
        )
        consumers = tuple(
            {p.meta.name: Consumer("pods", p.meta.name, p.meta.uid) for p in chosen}.values()
        )
        return Event("MODIFIED", replace(record, reserved_for=consumers))
    return Event("MODIFIED", data.draw(records))


def state(index: ClusterIndex) -> dict[str, Any]:
    """What the index answers from. A device held and published by no slice keeps the uuid it
    had when last published, which a fresh index (no past) cannot know: compared without it."""
    devices = {entry.key: entry for entry in index.devices()}
    unpublished = {
        e.key: replace(e, device=replace(e.device, uuid=None)) for e in index.unpublished_devices()
    }
    links = {r: {k: dict(v) for k, v in index.links.mapping(r).items()} for r in RELATIONS}
    links[Relation.UUID_DEVICES] = {
        uuid: kept
        for uuid, found in links[Relation.UUID_DEVICES].items()
        if (kept := {k: p for k, p in found.items() if k not in unpublished})
    }
    return {
        "records": {kind: {key_of(r): r for r in index.records(kind)} for kind in KINDS},
        "links": links,
        "unpublished": unpublished,
        "devices": devices,
        "statuses": {key: index.device_status(key) for key in devices},
        "units": {key: index.unit(key) for key in devices},
        "idle": set(index.idle_claims()),
    }


def derived_now(index: ClusterIndex) -> dict[Any, str]:
    """Every device's status computed from scratch by the model's pure rule (inventory.py)."""
    out = {}
    for entry in index.devices():
        key = entry.key
        free = index.counters_free(key.driver, key.pool) if entry.device.consumes_counters else None
        out[key] = inventory.device_status(entry, index.holds(key), counters_free=free)
    return out


def fresh(final: dict[Any, Record], *, into: Replica | None = None, at: str = "t") -> ClusterIndex:
    """A new index over `final`, listed kind by kind as a reactor lists (its Changes applied
    to `into`, when given, as a store would apply them)."""
    index = ClusterIndex(CLUSTER)
    for kind in KINDS:
        changes = index.resync(kind, [r for k, r in final.items() if k.kind == kind], at=at)
        if into is not None:
            into.apply(changes)
    return index


def draw_world(data: st.DataObject, final: dict[Any, Record], label: str) -> list[list[Event]]:
    """Batches of random events, folded into `final` (the records they leave) as drawn."""
    batches = []
    for _ in range(data.draw(st.integers(0, 12), label=f"{label} batches")):
        batch = []
        for _ in range(data.draw(st.integers(1, 5), label=f"{label} batch size")):
            event = _step(data, final)
            batch.append(event)
            if event.type == "DELETED":
                final.pop(key_of(event.record), None)
            else:
                final[key_of(event.record)] = event.record
        batches.append(batch)
    return batches


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_folding_any_events_equals_building_from_the_final_state(data: st.DataObject) -> None:
    index = ClusterIndex(CLUSTER)
    replica = Replica()
    for kind in KINDS:  # the reactor lists every kind first (an empty cluster here)
        replica.apply(index.resync(kind, [], at="t0"))
    final: dict[Any, Record] = {}
    transitions: list[ch.Transition] = []
    for position, batch in enumerate(draw_world(data, final, "events")):
        changes = index.apply(batch, at=f"t{position}")
        keys = [key_of(r) for r in changes.upserts] + [key_of(r) for r in changes.deletes]
        assert len(keys) == len(set(keys)), "a key twice in one Changes"
        transitions.extend(changes.transitions)
        replica.apply(changes)

    folded = state(index)
    assert folded == state(fresh(final))
    assert folded["statuses"] == derived_now(index)  # kept derived = derived from scratch
    # The raw records are the final ones (claims differ only by the template and the origin
    # the index fills in from what pods say of them).
    assert {
        k: replace(r, template_name=None, origin=claim_origin(r.meta))
        if isinstance(r, ClaimRecord)
        else r
        for k, r in replica.records.items()
    } == final
    _transitions_balance(index, transitions)
    # A store that keeps nothing but what each Changes says ends with the index's state.
    replica.assert_holds(index)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_a_seeded_index_relists_into_the_state_and_history_of_a_fresh_one(
    data: st.DataObject,
) -> None:
    # An earlier writer left world A in a shared store (records, idle marks, derived keys).
    before: dict[Any, Record] = {}
    draw_world(data, before, "before")
    replica = Replica()
    earlier = fresh(before, into=replica)
    # While nobody watched, the cluster became world B; a new watcher seeds, then relists.
    after = dict(before)
    draw_world(data, after, "meanwhile")
    held = [r for kind in KINDS for r in earlier.records(kind)]
    marks = {k: since for k in earlier.idle_claims() if (since := earlier.idle_since(k))}
    index = ClusterIndex(CLUSTER)
    index.seed(ch.Seed(held, marks, frozenset(KINDS)), at="t")
    relist: list[ch.Transition] = []
    announced: dict[str, set[tuple]] = {}  # fact group -> what its announcing batch opened
    for kind in data.draw(st.permutations(KINDS), label="relist order"):
        changes = index.resync(kind, [r for k, r in after.items() if k.kind == kind], at="t2")
        relist.extend(changes.transitions)
        replica.apply(changes)
        for group in changes.announced:
            assert group not in announced, "a fact group announced twice"
            announced[group] = _opened(changes.transitions, group)
    assert state(index) == state(fresh(after))
    # A claim idle all along keeps the time the earlier writer saw it become idle.
    ended = {(t.namespace, t.claim) for t in relist if t.type == ch.IDLE_ENDED}
    for key in index.idle_claims():
        if key in marks and (key.namespace, key.name) not in ended:
            assert index.idle_since(key) == marks[key]
    # The shared store, written from the relist's Changes alone, ends as world B.
    replica.assert_holds(index)
    # History closed every interval when the watcher started: what the relist opens is what
    # a fresh index over world B holds open.
    expected: list[ch.Transition] = []
    empty = ClusterIndex(CLUSTER)
    for kind in KINDS:
        listed = [r for k, r in after.items() if k.kind == kind]
        expected.extend(empty.resync(kind, listed, at="t3").transitions)
    assert open_intervals(relist) == open_intervals(expected), (relist, expected)
    # Each fact group was announced once, complete: its batch opened all of it that is open.
    assert sorted(announced) == sorted(ch.FACT_GROUPS)
    for group, opened in announced.items():
        assert opened == _in_group(open_intervals(expected), group), group


def test_a_fresh_index_announces_each_fact_group_once_in_any_listing_order() -> None:
    world = {key_of(r): r for r in (
        slice_("n0-a", pool="n0", node="n0", devices=(device("d0"),)),
        claim("c0", devices=(("n0", "d0"),), consumers=(("p0", "p0-u1"),)),
        claim("c1", devices=(("n0", "d1"),)),
        pod("p0", uid="p0-u1", phase="Succeeded"),
    )}  # fmt: skip
    for order in (KINDS, tuple(reversed(KINDS))):
        index = ClusterIndex(CLUSTER)
        announced: dict[str, set[tuple]] = {}
        everything: list[ch.Transition] = []
        for kind in order:
            changes = index.resync(kind, [r for k, r in world.items() if k.kind == kind], at="t")
            everything.extend(changes.transitions)
            for group in changes.announced:
                announced[group] = _opened(changes.transitions, group)
        assert sorted(announced) == sorted(ch.FACT_GROUPS)
        for group, opened in announced.items():
            assert opened == _in_group(open_intervals(everything), group), (order, group)
        assert ("idle", "uid-c0") in announced["idle"] and ("idle", "uid-c1") in announced["idle"]


_GROUP_OF = {"held": ch.CLAIM_FACTS, "consumer": ch.CLAIM_FACTS, "wait": ch.CLAIM_FACTS,
             "idle": ch.IDLE_FACTS, "device": ch.DEVICE_FACTS}  # fmt: skip


def _in_group(intervals: set[tuple], group: str) -> set[tuple]:
    return {i for i in intervals if _GROUP_OF[i[0]] == group}


def _opened(transitions: list[ch.Transition], group: str) -> set[tuple]:
    """The intervals of `group` a batch's transitions leave open (opened or re-announced;
    one opened and closed again within the batch is not)."""
    return _in_group(open_intervals(transitions), group)


def open_intervals(transitions: list[ch.Transition]) -> set[tuple]:
    """The intervals history leaves open after `transitions`, from nothing open (what its
    "cluster started" leaves), by the identities service.history.recording keys them by."""
    opened: set[tuple] = set()
    for t in transitions:
        hold = ("held", t.claim_uid, t.request, t.driver, t.pool, t.device, t.share_id)
        ident = {
            ch.ALLOCATED: hold,
            ch.RELEASED: hold,
            ch.CONSUMER_ADDED: ("consumer", t.claim_uid, t.pod_uid),
            ch.CONSUMER_REMOVED: ("consumer", t.claim_uid, t.pod_uid),
            ch.WAIT_STARTED: ("wait", t.claim_uid),
            ch.WAIT_ENDED: ("wait", t.claim_uid),
            ch.IDLE_STARTED: ("idle", t.claim_uid),
            ch.IDLE_ENDED: ("idle", t.claim_uid),
            ch.DEVICE_APPEARED: ("device", t.driver, t.pool, t.device),
            ch.DEVICE_CHANGED: ("device", t.driver, t.pool, t.device),
            ch.DEVICE_DISAPPEARED: ("device", t.driver, t.pool, t.device),
        }.get(t.type)
        if t.type in (ch.ALLOCATED, ch.CONSUMER_ADDED, ch.WAIT_STARTED, ch.IDLE_STARTED,
                      ch.DEVICE_APPEARED, ch.DEVICE_CHANGED):  # fmt: skip
            opened.add(ident)
        elif t.type == ch.CLAIM_DELETED:
            opened = {i for i in opened if i[0] == "device" or i[1] != t.claim_uid}
        elif ident is not None:
            opened.discard(ident)
    return opened


class Replica:
    """What a store holds when it keeps nothing but what each Changes says — records, the
    IndexDelta and the live events — in plain dicts, with no index of its own."""

    def __init__(self) -> None:
        self.records: dict[Any, Record] = {}
        self.links: dict[tuple, Any] = {}
        self.lists: dict[tuple, list] = {}
        self.devices: dict[Any, Any] = {}
        self.unpublished: dict[Any, Any] = {}
        self.statuses: dict[Any, str] = {}
        self.idle: dict[Any, str] = {}
        # claim -> (record, idle since, consumer pods), from events
        self.live_claims: dict[Any, tuple] = {}
        self.live_devices: dict[Any, DeviceState] = {}  # from events

    def apply(self, changes: ch.Changes) -> None:
        for record in changes.deletes:
            self.records.pop(key_of(record), None)
        for record in changes.upserts:
            self.records[key_of(record)] = record
        delta = changes.delta
        for relation, key, value in delta.links_removed():
            self.links.pop((relation, key, value), None)
        for relation, key, value, payload in delta.links_added():
            self.links[(relation, key, value)] = payload
        for relation_key, values in delta.lists.items():
            if values:
                self.lists[relation_key] = values
            else:
                self.lists.pop(relation_key, None)
        for target, changed in ((self.devices, delta.devices), (self.statuses, delta.statuses),
                                (self.unpublished, delta.unpublished),
                                (self.idle, delta.idle)):  # fmt: skip
            for key, value in changed.items():
                if value is None:
                    target.pop(key, None)
                else:
                    target[key] = value
        for event in changes.events:
            if isinstance(event, ClaimEvent):
                key = (CLUSTER, "ResourceClaim", event.namespace, event.name)
                if event.new is None:
                    self.live_claims.pop(key, None)
                else:
                    self.live_claims[key] = (event.new, event.new_idle_since, event.new_consumers)
            elif event.new is None:
                self.live_devices.pop(event.key, None)
            else:
                self.live_devices[event.key] = event.new

    def assert_holds(self, index: ClusterIndex) -> None:
        folded = state(index)
        assert self.records == {
            k: r for by_kind in folded["records"].values() for k, r in by_kind.items()
        }
        assert self.links == {
            (r, k, v): p
            for r in RELATIONS
            for k, vs in index.links.mapping(r).items()
            for v, p in vs.items()
        }
        assert self.lists == {
            (r, k): index.lookup(r, k)
            for r in RELATIONS
            if r not in FAN_OUT
            for k in index.links.mapping(r)
        }
        assert self.devices == folded["devices"]
        assert self.unpublished == {e.key: e for e in index.unpublished_devices()}
        assert self.statuses == folded["statuses"]
        assert self.idle == {k: index.idle_since(k) for k in index.idle_claims()}
        assert self.live_claims == {
            key_of(c): (c, index.idle_since(key_of(c)), index.consumers(c))
            for c in index.records("ResourceClaim")
        }
        assert self.live_devices == {
            e.key: DeviceState(e, index.device_status(e.key)) for e in index.devices()
        }


def _transitions_balance(index: ClusterIndex, transitions: list[ch.Transition]) -> None:
    def net(start: str, end: str, key) -> Counter:
        count: Counter = Counter()
        for t in transitions:
            if t.type == start:
                count[key(t)] += 1
            elif t.type == end:
                count[key(t)] -= 1
        return +count

    hold = lambda t: (t.namespace, t.claim, t.claim_uid, t.pool, t.device, t.request, t.share_id)  # noqa: E731
    current_holds = Counter(
        (
            ref.claim.namespace,
            ref.claim.name,
            index.get(ref.claim).meta.uid,
            dev[2],
            dev[3],
            ref.request,
            ref.share_id,
        )
        for dev, holds in index.links.mapping("device_allocations").items()
        for ref in holds.values()
    )
    assert net(ch.ALLOCATED, ch.RELEASED, hold) == current_holds
    claim_of = lambda t: (t.namespace, t.claim)  # noqa: E731
    assert set(net(ch.IDLE_STARTED, ch.IDLE_ENDED, claim_of)) == {
        (k.namespace, k.name) for k in index.idle_claims()
    }
    waiting = {
        (key_of(r).namespace, key_of(r).name)
        for r in index.records("ResourceClaim")
        if r.allocation is None
    }
    assert set(net(ch.WAIT_STARTED, ch.WAIT_ENDED, claim_of)) == waiting
    assert set(net(ch.CLAIM_CREATED, ch.CLAIM_DELETED, claim_of)) == {
        (key_of(r).namespace, key_of(r).name) for r in index.records("ResourceClaim")
    }
    devices = lambda t: (t.pool, t.device)  # noqa: E731
    assert set(net(ch.DEVICE_APPEARED, ch.DEVICE_DISAPPEARED, devices)) == {
        (e.key.pool, e.key.device) for e in index.devices()
    }
    assert all(
        v == 1
        for v in net(
            ch.CONSUMER_ADDED, ch.CONSUMER_REMOVED, lambda t: (t.claim, t.claim_uid, t.pod_uid)
        ).values()
    )
