"""The index's cheaper mechanics give exactly what its plain event-by-event fold gives.

* `ClusterIndex(transitions=False)` (a mirror that records no history): the same state and the
  same Changes, transitions left out, for any sequence of events.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from msgspec.structs import replace

from dra_mirror.service.model.index import ClusterIndex
from dra_mirror.service.model.records import KINDS, Record
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
