"""DeviceTaintRules as 1.33 and 1.34 serve them (resource.k8s.io/v1alpha3, slices and classes at
v1beta1): `deviceClassName` and CEL `selectors` narrow what a rule selects, as the rule tracker
of those versions reads them (service.model.taint_rules)."""

from __future__ import annotations

from typing import Any

from dra_mirror.service.diagnostics.cel import rule_selector_matches
from dra_mirror.service.model import changes as ch
from dra_mirror.service.model.index import ADDED, DELETED, MODIFIED, ClusterIndex, Event
from dra_mirror.service.model.normalize import normalize
from dra_mirror.service.model.pool_status import pool_statuses
from dra_mirror.service.model.records import (
    DEVICE_CLASS,
    DEVICE_TAINT_RULE,
    RESOURCE_SLICE,
    DeviceClassRecord,
    DeviceKey,
    SliceRecord,
    TaintRuleRecord,
)
from dra_mirror.service.model.taint_rules import RuleMatching, selects
from tests.model.builders import CLUSTER, DRIVER

MODEL = f'device.attributes["{DRIVER}"].model'
D0, D1 = DeviceKey(CLUSTER, DRIVER, "n1", "gpu-0"), DeviceKey(CLUSTER, DRIVER, "n1", "gpu-1")


def _meta(name: str) -> dict[str, Any]:
    return {"name": name, "uid": f"uid-{name}", "resourceVersion": "1"}


def _slice() -> SliceRecord:
    devices = [
        {"name": f"gpu-{i}", "basic": {"attributes": {"model": {"string": model}}}}
        for i, model in enumerate(("a100", "h100"))
    ]
    raw = {
        "apiVersion": "resource.k8s.io/v1beta1",
        "kind": RESOURCE_SLICE,
        "metadata": _meta("n1-gpu"),
        "spec": {"driver": DRIVER, "nodeName": "n1", "devices": devices,
                 "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1}},
    }  # fmt: skip
    record = normalize(RESOURCE_SLICE, raw, cluster=CLUSTER)
    assert isinstance(record, SliceRecord)
    return record


def _class(name: str, *expressions: str) -> DeviceClassRecord:
    raw = {
        "apiVersion": "resource.k8s.io/v1beta1",
        "kind": DEVICE_CLASS,
        "metadata": _meta(name),
        "spec": {"selectors": [{"cel": {"expression": e}} for e in expressions]},
    }
    record = normalize(DEVICE_CLASS, raw, cluster=CLUSTER)
    assert isinstance(record, DeviceClassRecord)
    return record


def _rule(name: str, selector: dict[str, Any]) -> TaintRuleRecord:
    raw = {
        "apiVersion": "resource.k8s.io/v1alpha3",
        "kind": DEVICE_TAINT_RULE,
        "metadata": _meta(name),
        "spec": {"deviceSelector": selector,
                 "taint": {"key": f"example.com/{name}", "effect": "NoExecute"}},
    }  # fmt: skip
    record = normalize(DEVICE_TAINT_RULE, raw, cluster=CLUSTER)
    assert isinstance(record, TaintRuleRecord)
    return record


def _cel(*expressions: str) -> list[dict[str, Any]]:
    return [{"cel": {"expression": e}} for e in expressions]


def _ruled(index: ClusterIndex) -> dict[str, list[str]]:
    return {e.key.device: [t.rule for t in e.rule_taints] for e in index.devices()}


def test_a_rule_naming_a_class_taints_what_the_class_selects_and_follows_the_class() -> None:
    index = ClusterIndex(CLUSTER, selector_matcher=rule_selector_matches)
    index.resync(RESOURCE_SLICE, [_slice()], at="t0")
    by_class = _rule("by-class", {"deviceClassName": "gpu.example.com"})
    assert (
        by_class.selector is not None and by_class.selector.device_class_name == "gpu.example.com"
    )
    index.apply([Event(ADDED, by_class)], at="t1")
    assert _ruled(index) == {"gpu-0": [], "gpu-1": []}  # the class does not exist: no device
    a100 = _class("gpu.example.com", f'device.driver == "{DRIVER}"', f'{MODEL} == "a100"')
    changes = index.apply([Event(ADDED, a100)], at="t2")
    assert _ruled(index) == {"gpu-0": ["by-class"], "gpu-1": []}
    assert [t.device for t in changes.transitions if t.type == ch.DEVICE_CHANGED] == ["gpu-0"]
    index.apply([Event(MODIFIED, _class("gpu.example.com", f'{MODEL} == "h100"'))], at="t3")
    assert _ruled(index) == {"gpu-0": [], "gpu-1": ["by-class"]}
    index.apply([Event(DELETED, a100)], at="t4")
    assert _ruled(index) == {"gpu-0": [], "gpu-1": []}


def test_a_rule_with_cel_selectors_taints_only_the_devices_they_select() -> None:
    index = ClusterIndex(CLUSTER, selector_matcher=rule_selector_matches)
    by_cel = _rule("by-cel", {"driver": DRIVER, "selectors": _cel(f'{MODEL} == "h100"')})
    assert by_cel.selector is not None and by_cel.selector.selectors == (f'{MODEL} == "h100"',)
    index.resync(DEVICE_TAINT_RULE, [by_cel], at="t0")
    index.resync(RESOURCE_SLICE, [_slice()], at="t1")
    assert _ruled(index) == {"gpu-0": [], "gpu-1": ["by-cel"]}
    [status] = pool_statuses(
        [_slice()], [], [by_cel], classes=[], selector_matcher=rule_selector_matches
    )
    assert (status.total, status.unavailable, status.available) == (2, 1, 1)


def test_every_selector_must_hold_and_one_that_fails_selects_nothing() -> None:
    device = _slice().devices[0]  # an a100
    a100 = _class("a100", f'{MODEL} == "a100"')
    matching = RuleMatching({"a100": a100, "empty": _class("empty")}.get, rule_selector_matches)

    def picks(selector: dict[str, Any], on: Any = device, how: RuleMatching = matching) -> bool:
        return selects(_rule("r", selector), D0, on, how)

    assert picks({"deviceClassName": "a100"})
    assert picks({"deviceClassName": "empty"})  # a class without selectors adds no condition
    assert not picks({"deviceClassName": "a100", "selectors": _cel(f'{MODEL} == "h100"')})
    assert not picks({"selectors": _cel(f'device.attributes["{DRIVER}"].missing == 1')})
    assert not picks({"selectors": _cel('"not a bool"')})
    assert not picks({"selectors": _cel("true")}, on=None)  # no slice publishes it
    assert picks({})  # driver/pool/device alone: as 1.35+ reads every rule
    assert not picks({"selectors": _cel("true")}, how=RuleMatching())  # no CEL engine given
