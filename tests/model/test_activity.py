"""Starting is not idle (service.model.activity): a scheduled, Pending consumer keeps its claim
from idleness for the idle grace; the index's tick notices the grace running out."""

from __future__ import annotations

from msgspec.structs import replace

from dra_mirror.service.model import changes as ch
from dra_mirror.service.model.activity import seconds
from dra_mirror.service.model.index import ClusterIndex, Event
from tests.model.builders import claim, pod
from tests.model.test_index import N1, add, ck, listed_index, types

T0 = "2026-12-04T10:00:00Z"


def at(s: float) -> str:
    return f"2026-12-04T10:{int(s) // 60:02d}:{int(s) % 60:02d}Z"


def starting(name: str = "p1", *, phase: str = "Pending", rv: str = "1"):
    p = pod(name, node="n1", phase=phase, rv=rv, claims=(("gpu", "c1", None),))
    return replace(p, meta=replace(p.meta, created_at=T0))


def held_for(index: ClusterIndex) -> None:
    add(index, N1, starting(), at=at(0))
    reserved = claim("c1", devices=(("n1", "gpu-0"),), node="n1", consumers=(("p1", "uid-p1"),))
    changes = add(index, reserved, at=at(10))
    assert ch.IDLE_STARTED not in types(changes)  # its pod is starting, not idle


def test_a_starting_pod_keeps_its_claim_from_idleness_for_the_grace() -> None:
    index = listed_index()
    index.idle_grace = 600.0
    held_for(index)
    assert index.next_tick() == seconds(T0) + 600
    assert types(index.tick(at=at(599))) == []
    changes = index.tick(at=at(600))
    assert types(changes) == [ch.IDLE_STARTED]  # never came up: idle from the grace's end
    assert index.idle_since(ck("c1")) == at(600)
    assert index.next_tick() is None
    # it comes up after all: not idle any more
    changes = index.apply([Event("MODIFIED", starting(phase="Running", rv="2"))], at=at(700))
    assert types(changes) == [ch.IDLE_ENDED]


def test_a_pod_that_ends_while_starting_makes_its_claim_idle_at_once() -> None:
    index = listed_index()
    held_for(index)
    changes = index.apply([Event("MODIFIED", starting(phase="Failed", rv="2"))], at=at(30))
    assert types(changes) == [ch.IDLE_STARTED]
    assert index.idle_since(ck("c1")) == at(30)
    assert index.next_tick() is None


def test_without_times_a_starting_pod_stays_starting() -> None:
    index = listed_index()
    add(index, N1, pod("p1", node="n1", phase="Pending", claims=(("gpu", "c1", None),)))
    reserved = claim("c1", devices=(("n1", "gpu-0"),), node="n1", consumers=(("p1", "uid-p1"),))
    assert ch.IDLE_STARTED not in types(add(index, reserved))
    assert index.next_tick() is None  # no start time: no grace to run out
