"""DeviceTaintRules in the model: decoding every served version, selecting devices by
driver/pool/device (published or not), folding rule events in any order, and the pool counts.
"""

from __future__ import annotations

from typing import Any

import pytest

from dra_mirror.service.model import changes as ch
from dra_mirror.service.model.index import ADDED, DELETED, MODIFIED, ClusterIndex, Event
from dra_mirror.service.model.normalize import MalformedObject, normalize
from dra_mirror.service.model.pool_status import pool_statuses
from dra_mirror.service.model.records import (
    DEVICE_TAINT_RULE,
    RESOURCE_CLAIM,
    RESOURCE_SLICE,
    DeviceKey,
    RuleTaint,
    TaintRuleRecord,
    key_of,
)
from dra_mirror.service.model.taint_rules import shown, taints_of
from tests.model.builders import CLUSTER, DRIVER, claim, device, slice_
from tests.model.test_index_property import fresh, state

DRAIN = {"key": "example.com/drain", "value": "", "effect": "NoExecute"}
D0, D1 = DeviceKey(CLUSTER, DRIVER, "n1", "gpu-0"), DeviceKey(CLUSTER, DRIVER, "n1", "gpu-1")
SLICE = slice_("n1-gpu", pool="n1", node="n1", devices=(device("gpu-0"), device("gpu-1")))


def raw_rule(
    name: str, selector: dict[str, Any] | None, *, version: str = "v1", **taint: Any
) -> dict[str, Any]:
    spec: dict[str, Any] = {"taint": {**DRAIN, **taint}}
    if selector is not None:
        spec["deviceSelector"] = selector
    return {
        "apiVersion": f"resource.k8s.io/{version}",
        "kind": DEVICE_TAINT_RULE,
        "metadata": {"name": name, "uid": f"uid-{name}", "resourceVersion": "1"},
        "spec": spec,
    }


def rule(name: str, selector: dict[str, Any] | None, **taint: Any) -> TaintRuleRecord:
    record = normalize(DEVICE_TAINT_RULE, raw_rule(name, selector, **taint), cluster=CLUSTER)
    assert isinstance(record, TaintRuleRecord)
    return record


@pytest.mark.parametrize("version", ["v1alpha3", "v1beta2", "v1"])
def test_every_served_version_decodes_to_one_record(version: str) -> None:
    raw = raw_rule("drain", {"driver": DRIVER, "pool": "n1", "device": "gpu-0"}, version=version)
    raw["status"] = {"conditions": [{"type": "EvictionInProgress", "status": "False"}]}
    record = normalize(DEVICE_TAINT_RULE, raw, cluster=CLUSTER)
    assert isinstance(record, TaintRuleRecord)
    assert (record.selector.driver, record.selector.pool, record.selector.device) == (
        DRIVER, "n1", "gpu-0",
    )  # fmt: skip
    assert record.taint == DRAIN
    assert record.conditions[0]["type"] == "EvictionInProgress"
    assert key_of(record).kind == DEVICE_TAINT_RULE


def test_a_rule_without_a_taint_key_is_malformed() -> None:
    with pytest.raises(MalformedObject, match=r"spec\.taint\.key"):
        normalize(DEVICE_TAINT_RULE, raw_rule("bad", {}, key=""), cluster=CLUSTER)


def test_a_rule_selects_by_every_criterion_it_sets_and_nothing_without_a_selector() -> None:
    index = ClusterIndex(CLUSTER)
    index.resync(RESOURCE_SLICE, [SLICE], at="t0")
    rules = [
        rule("one", {"device": "gpu-1"}, key="example.com/one"),
        rule("pool", {"driver": DRIVER, "pool": "n1"}, key="example.com/pool"),
        rule("other-driver", {"driver": "nic.example.com"}, key="example.com/nic"),
        rule("none", None, key="example.com/none"),  # without a selector: no device
        rule("all", {}, key="example.com/all", effect="None"),  # the empty selector: every one
    ]
    index.resync(DEVICE_TAINT_RULE, rules, at="t1")
    entry0, entry1 = index.device(D0), index.device(D1)
    assert entry0 is not None and entry1 is not None
    assert [t.rule for t in entry0.rule_taints] == ["all", "pool"]
    assert [t.rule for t in entry1.rule_taints] == ["all", "one", "pool"]
    assert [t["key"] for t in taints_of(entry1)] == ["example.com/all", "example.com/one", "example.com/pool"]  # fmt: skip
    assert shown(entry1)[1] == {"key": "example.com/one", "value": "", "effect": "NoExecute", "rule": "one"}  # fmt: skip


def test_a_rule_event_changes_the_devices_it_selects_and_their_delta() -> None:
    index = ClusterIndex(CLUSTER)
    index.resync(RESOURCE_SLICE, [SLICE], at="t0")
    drain = rule("drain", {"device": "gpu-0"})
    changes = index.apply([Event(ADDED, drain)], at="t1")
    entry = index.device(D0)
    assert entry is not None and entry.rule_taints == (RuleTaint("drain", DRAIN),)
    assert changes.delta.devices == {D0: entry}
    changed = [t for t in changes.transitions if t.type == ch.DEVICE_CHANGED]
    assert [(t.device, t.data["taints"]) for t in changed] == [("gpu-0", [{**DRAIN, "rule": "drain"}])]  # fmt: skip
    assert [e.key for e in changes.events] == [D0]  # subscribers see the device change
    assert index.device_status(D0) == "free"  # tainted is unavailable, not held
    moved = rule("drain", {"device": "gpu-1"})
    changes = index.apply([Event(MODIFIED, moved)], at="t2")
    assert set(changes.delta.devices) == {D0, D1}
    assert index.device(D0).rule_taints == () and len(index.device(D1).rule_taints) == 1  # type: ignore[union-attr]
    index.apply([Event(DELETED, moved)], at="t3")
    assert index.device(D1).rule_taints == ()  # type: ignore[union-attr]


def test_rules_before_slices_and_held_devices_no_slice_publishes() -> None:
    held = claim("c0", devices=(("n9", "gpu-3"),))
    drain, pool = rule("drain", {"pool": "n9"}), rule("pool", {"pool": "n1"}, key="example.com/p")
    index = ClusterIndex(CLUSTER)
    index.resync(DEVICE_TAINT_RULE, [drain, pool], at="t0")  # rules listed first
    index.resync(RESOURCE_CLAIM, [held], at="t1")
    index.resync(RESOURCE_SLICE, [SLICE], at="t2")
    unpublished = index.device(DeviceKey(CLUSTER, DRIVER, "n9", "gpu-3"))
    assert unpublished is not None and not unpublished.published
    assert [t.rule for t in unpublished.rule_taints] == ["drain"]
    assert [t.rule for t in index.device(D0).rule_taints] == ["pool"]  # type: ignore[union-attr]
    world = {key_of(r): r for r in (held, drain, pool, SLICE)}
    assert state(index) == state(fresh(world))  # the order of arrival does not matter


def test_pool_counts_count_rule_taints_as_unavailable() -> None:
    drain = rule("drain", {"driver": DRIVER, "pool": "n1", "device": "gpu-1"})
    info = rule("info", {"device": "gpu-0"}, effect="None")
    west = normalize(DEVICE_TAINT_RULE, raw_rule("west", {}), cluster="west")  # not this one's
    [status] = pool_statuses([SLICE], [], [drain, info, west])
    assert (status.total, status.unavailable, status.available) == (2, 1, 1)
