"""The index's central property (STYLE.md point 2): folding ANY event sequence into a
ClusterIndex gives the same records, reverse maps, devices, device statuses and idle claims
as a fresh index built from the final state; and the Changes it emitted, replayed, rebuild
that state, with transitions that balance (every allocation released at most once, …)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from msgspec.structs import replace

from dra_mirror.service.model import changes as ch
from dra_mirror.service.model.delta import IndexDelta
from dra_mirror.service.model.index import RELATIONS, ClusterIndex, Event
from dra_mirror.service.model.records import KINDS, ClaimRecord, Consumer, PodRecord, Record, key_of
from tests.model.builders import CLUSTER, claim, device, node, pod, slice_

POOLS = ("n0", "n1", "net")
DEVICE_NAMES = ("d0", "d1", "d2")
CLAIMS = ("c0", "c1", "c2")
PODS = ("p0", "p1", "p2")


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
    return claim(
        draw(st.sampled_from(CLAIMS)),
        uid=draw(st.sampled_from(("u1", "u2"))),
        devices=tuple(held),
        shares={dev: {"gpu.nvidia.com/memory": "1Gi"} for _, dev in held} if shared else None,
        consumers=tuple(
            draw(
                st.lists(
                    st.tuples(st.sampled_from(PODS), st.sampled_from(("pu1", "pu2"))),
                    unique_by=lambda c: c[0],
                    max_size=2,
                )
            )
        ),
        class_name=draw(st.sampled_from(("gpu", "mig"))),
        deleted=draw(st.booleans()),
        rv=str(draw(st.integers(0, 3))),
    )


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
    return pod(
        draw(st.sampled_from(PODS)),
        uid=draw(st.sampled_from(("pu1", "pu2"))),
        phase=draw(st.sampled_from(("Running", "Pending", "Succeeded", "Failed"))),
        node=draw(st.sampled_from(("n0", "n1", None))),
        claims=tuple(entries),
        rv=str(draw(st.integers(0, 3))),
    )


records = st.one_of(slices(), claims(), pods(), st.sampled_from([node("n0"), node("n1")]))


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
    devices = {entry.key: entry for entry in index.devices()}
    return {
        "records": {kind: {key_of(r): r for r in index.records(kind)} for kind in KINDS},
        "links": {r: {k: dict(v) for k, v in index.links.mapping(r).items()} for r in RELATIONS},
        "devices": devices,
        "statuses": {key: index.device_status(key) for key in devices},
        "idle": set(index.idle_claims()),
    }


def fresh(final: dict[Any, Record]) -> ClusterIndex:
    index = ClusterIndex(CLUSTER)
    for kind in KINDS:
        index.resync(kind, [r for k, r in final.items() if k.kind == kind], at="t")
    return index


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_folding_any_events_equals_building_from_the_final_state(data: st.DataObject) -> None:
    index = ClusterIndex(CLUSTER, deltas=True)
    for kind in KINDS:  # the reactor lists every kind first (an empty cluster here)
        index.resync(kind, [], at="t0")
    mirror = _DeltaMirror()
    final: dict[Any, Record] = {}
    replayed: dict[Any, Record] = {}
    transitions: list[ch.Transition] = []
    for position in range(data.draw(st.integers(0, 12), label="batches")):
        batch = []
        for _ in range(data.draw(st.integers(1, 5), label="batch size")):
            event = _step(data, final)
            batch.append(event)
            if event.type == "DELETED":
                final.pop(key_of(event.record), None)
            else:
                final[key_of(event.record)] = event.record
        changes = index.apply(batch, at=f"t{position}")
        keys = [key_of(r) for r in changes.upserts] + [key_of(r) for r in changes.deletes]
        assert len(keys) == len(set(keys)), "a key twice in one Changes"
        for record in changes.deletes:
            replayed.pop(key_of(record), None)
        for record in changes.upserts:
            replayed[key_of(record)] = record
        transitions.extend(changes.transitions)
        mirror.apply(index.take_delta())

    folded = state(index)
    assert folded == state(fresh(final))
    # Stores that only carry Changes out end with the index's records.
    assert replayed == {k: r for by_kind in folded["records"].values() for k, r in by_kind.items()}
    # The raw records are the final ones (claims differ only by the template the index fills).
    assert {
        k: replace(r, template_name=None) if isinstance(r, ClaimRecord) else r
        for k, r in replayed.items()
    } == final
    _transitions_balance(index, transitions)
    # A store writing only the deltas ends with the index's derived state.
    assert mirror.links == {
        (r, k, v): p
        for r in RELATIONS
        for k, vs in index.links.mapping(r).items()
        for v, p in vs.items()
    }
    assert mirror.devices == folded["devices"]
    assert mirror.idle == {k: index.idle_since(k) for k in index.idle_claims()}


class _DeltaMirror:
    """What a remote store holds when it writes nothing but each batch's IndexDelta."""

    def __init__(self) -> None:
        self.links: dict[tuple, Any] = {}
        self.devices: dict[Any, Any] = {}
        self.idle: dict[Any, str] = {}

    def apply(self, delta: IndexDelta) -> None:
        for relation, key, value in delta.links_removed():
            self.links.pop((relation, key, value), None)
        for relation, key, value, payload in delta.links_added():
            self.links[(relation, key, value)] = payload
        for key, entry in delta.devices.items():
            if entry is None:
                self.devices.pop(key, None)
            else:
                self.devices[key] = entry
        for key, since in delta.idle.items():
            if since is None:
                self.idle.pop(key, None)
            else:
                self.idle[key] = since


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
