"""The index's cheaper mechanics give exactly what its plain event-by-event fold gives.

* `ClusterIndex(transitions=False)` (a mirror that records no history): the same state and the
  same Changes, transitions left out, for any sequence of events;
* the first LIST of a kind, folded in bulk (`resync` of a kind the index holds nothing of): the
  same state and the same Changes as its records applied one by one;
* the compact pod -> claims map of the claim side: what a map of sets answers.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from msgspec.structs import replace

from dra_mirror.service.model.claim_sets import ClaimsBy
from dra_mirror.service.model.index import MODIFIED, ClusterIndex, Event
from dra_mirror.service.model.kinds import KINDS
from dra_mirror.service.model.records import ObjectKey, Record
from tests.model.builders import CLUSTER
from tests.model.test_index_property import draw_world, state


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_an_index_without_transitions_folds_the_same_state_and_changes(
    data: st.DataObject,
) -> None:
    plain = ClusterIndex(CLUSTER)
    quiet = ClusterIndex(CLUSTER, transitions=False)
    final: dict[Any, Record] = {}
    listed = {kind: data.draw(st.booleans(), label=f"list {kind} first") for kind in KINDS}
    for kind in KINDS:
        if listed[kind]:
            assert replace(plain.resync(kind, [], at="t0"), transitions=[]) == quiet.resync(
                kind, [], at="t0"
            )
    for position, batch in enumerate(draw_world(data, final, "events")):
        expected = plain.apply(batch, at=f"t{position}")
        got = quiet.apply(batch, at=f"t{position}")
        assert got.transitions == []
        assert replace(expected, transitions=[]) == got
    for kind in KINDS:  # and a relist of what is there now
        records = [r for k, r in final.items() if k.kind == kind]
        expected = plain.resync(kind, records, at="t-end")
        assert replace(expected, transitions=[]) == quiet.resync(kind, records, at="t-end")
    assert state(plain) == state(quiet)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_a_first_list_folds_in_bulk_as_it_folds_record_by_record(data: st.DataObject) -> None:
    """`resync` of a kind the index holds nothing of folds the list in bulk; the same records
    applied as MODIFIED events one by one give the same Changes and the same state, in any
    listing order, with or without transitions and reverse-map deltas, a key listed twice
    included."""
    final: dict[Any, Record] = {}
    draw_world(data, final, "world")
    history = data.draw(st.booleans(), label="transitions and link deltas")
    bulk = ClusterIndex(CLUSTER, link_deltas=history, transitions=history)
    plain = ClusterIndex(CLUSTER, link_deltas=history, transitions=history)
    for kind in data.draw(st.permutations(KINDS), label="listing order"):
        records = [r for k, r in final.items() if k.kind == kind]
        if records and data.draw(st.booleans(), label=f"{kind} listed twice"):
            again = data.draw(st.sampled_from(records))
            records.append(replace(again, meta=replace(again.meta, resource_version="again")))
        expected = plain.apply([Event(MODIFIED, r) for r in records], at="t", listed=kind)
        assert bulk.resync(kind, records, at="t") == expected
    assert state(bulk) == state(plain)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.tuples(st.booleans(), st.sampled_from("pq"), st.sampled_from(("c0", "c1", "c2"))),
        max_size=30,
    )
)
def test_claims_by_a_key_answer_as_a_map_of_sets(steps: list[tuple[bool, str, str]]) -> None:
    """The claim side's compact pod -> claims map (a single claim kept as itself) answers as
    a plain map of sets under any sequence of links and unlinks."""
    compact: ClaimsBy[str] = ClaimsBy()
    plain: dict[str, set[ObjectKey]] = {}
    for add, pod, name in steps:
        claim = ObjectKey(CLUSTER, "ResourceClaim", "ns", name)
        if add:
            compact.add(pod, claim)
            plain.setdefault(pod, set()).add(claim)
        else:
            compact.discard(pod, claim)
            plain.get(pod, set()).discard(claim)
            if not plain.get(pod, True):
                del plain[pod]
        assert {pod: set(claims) for pod, claims in compact.items()} == plain
        assert all(set(compact.get(pod)) == plain.get(pod, set()) for pod in "pq")
        assert len(compact) == len(plain)
