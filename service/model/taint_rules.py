"""DeviceTaintRules: one taint for every device a rule's selector picks, and a device's taints.

A DeviceTaintRule (resource.k8s.io v1alpha3 from 1.33, v1beta2 from 1.36, v1 from 1.37) "adds
one taint to all devices which match the selector. This has the same effect as if the taint
was specified directly in the ResourceSlice by the DRA driver" (resource/v1/types.go). So:

* `spec.deviceSelector`: "All selector criteria must be satisfied for a device to match. The
  empty selector matches all devices. Without a selector, no devices are matched." The
  criteria are `driver`, `pool` and `device` (the device's name);
* 1.33 and 1.34 serve two more criteria in v1alpha3 (kubernetes/api v0.33/v0.34
  resource/v1alpha3/types.go DeviceTaintSelector), tombstoned in 1.35 (supporting them "would
  depend on copying the device attributes into the ResourceClaim allocation result"): a
  1.35+ server never serves them, so nothing here changes for it. Where they are served they
  are matched as the 1.33/1.34 rule tracker that feeds kube-scheduler and the eviction
  controller matches them (k8s.io/dynamic-resource-allocation v0.33/v0.34
  resourceslice/tracker/tracker.go `applyPatches`; pkg/controller/devicetainteviction takes its
  taints from that tracker's patched slices):
  - `deviceClassName`: "the selectors defined there must be satisfied by a device to be
    selected". A class that does not exist selects no device ("DeviceTaintRule does not
    apply, DeviceClass does not exist"); a class without selectors adds no condition;
  - `selectors`: CEL, "all of these selectors must be satisfied", and the class's too: every
    class selector and every rule selector must hold, with driver, pool and device;
  - an expression that fails on a device (a missing attribute, a result that is not a bool)
    does not select it (`continue devices`; a rule's own selector also gets a CELRuntimeError
    event on the rule). One that does not compile (API validation refuses it, so only a
    server downgrade leaves one) selects no device here; the tracker there fails the whole
    slice's update instead, a state no reading of the objects can reproduce;
  - only a device a slice publishes can be selected by a rule using either criterion: the
    tracker patches slices, and the 1.33/1.34 eviction controller looks an allocated device
    up in those slices ("Unknown device? Can't be tainted..."). A DeviceClass change
    re-matches the rules naming it (the tracker resyncs every slice on a class event);
  - the CEL engine is not the model's: `SelectorMatcher` is passed in (service.diagnostics
    provides it); without one, a rule needing an expression selects nothing;
* a rule selecting by driver/pool/device alone selects by name, not by slice: a device an
  allocation result names and no slice publishes is selected too (the 1.35+ eviction
  controller matches allocated devices; the 1.33/1.34 one reads published slices only, but
  nothing a server serves tells 1.34 from 1.35 here, so the 1.35+ reading is kept);
* `spec.taint` is a DeviceTaint (key, value, effect None/NoSchedule/NoExecute, timeAdded),
  kept raw as the slice's taints are; "consumers must treat unknown effects like None";
* `status.conditions` (EvictionInProgress, 1.35+) are carried raw.

A device's taints are its slice's, then one per rule selecting it in rule-name order
(`DeviceEntry.rule_taints`, filled by the index); `taints_of(entry)` gives them all for the
rules that read taints (pool counts, the allocator, explainClaim, findDevices, the metrics),
and `untolerated` is the toleration rule of the API (DeviceToleration) over them.

Promises: pure; O(rules) per device (plus the CEL of the rules that use it), O(devices) per
rule event or DeviceClass event naming a rule's class (rules are few).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from msgspec import Struct
from msgspec.structs import replace

from dra_mirror.service.model import api
from dra_mirror.service.model.metadata import cel_expressions
from dra_mirror.service.model.records import (
    Device,
    DeviceClassRecord,
    DeviceEntry,
    DeviceKey,
    Meta,
    RuleTaint,
    TaintRuleRecord,
    TaintSelector,
)

# DeviceTaint.effect values that keep a device from claims not tolerating them. None (and any
# effect this version does not know) has no effect.
UNAVAILABLE_EFFECTS = frozenset({"NoSchedule", "NoExecute"})


# --- wire shape ---------------------------------------------------------------------------------


class _Wire(Struct, rename="camel", gc=False):
    pass


class DeviceTaintSelector(_Wire):
    driver: str | None = None
    pool: str | None = None
    device: str | None = None
    device_class_name: str | None = None  # 1.33/1.34 v1alpha3 only
    selectors: list[api.DeviceSelector] | None = None  # 1.33/1.34 v1alpha3 only


class DeviceTaintRuleSpec(_Wire):
    device_selector: DeviceTaintSelector | None = None
    taint: api.Raw | None = None


class DeviceTaintRuleStatus(_Wire):
    conditions: list[api.Raw] | None = None


class DeviceTaintRule(_Wire):
    metadata: api.ObjectMeta
    spec: DeviceTaintRuleSpec | None = None
    status: DeviceTaintRuleStatus | None = None


def taint_rule_record(wire: DeviceTaintRule, meta: Meta, _shared: object = None) -> TaintRuleRecord:
    """The record of a decoded DeviceTaintRule (ValueError when its taint has no key)."""
    spec = wire.spec or DeviceTaintRuleSpec()
    taint = dict(spec.taint or {})
    if not isinstance(taint.get("key"), str) or not taint["key"]:
        raise ValueError("spec.taint.key: required")
    selector = spec.device_selector
    return TaintRuleRecord(
        meta=meta,
        selector=TaintSelector(
            selector.driver,
            selector.pool,
            selector.device,
            device_class_name=selector.device_class_name,
            selectors=cel_expressions(selector.selectors),
        )
        if selector is not None
        else None,
        taint=taint,
        conditions=tuple((wire.status.conditions or ()) if wire.status is not None else ()),
    )


# --- matching -----------------------------------------------------------------------------------


class SelectorMatcher(Protocol):
    """One CEL device selector on one device: True only when it evaluates to true (an
    expression that does not compile, fails, or gives a non-bool is False)."""

    def __call__(self, expression: str, device: Device, driver: str) -> bool: ...


def _no_class(name: str) -> DeviceClassRecord | None:
    return None


@dataclass(frozen=True, slots=True)
class RuleMatching:
    """What the 1.33/1.34 criteria (deviceClassName, selectors) need beyond the device: the
    cluster's DeviceClasses by name and the CEL matcher."""

    classes: Callable[[str], DeviceClassRecord | None] = _no_class
    matcher: SelectorMatcher | None = None


NO_CEL = RuleMatching()


def may_select(rule: TaintRuleRecord, key: DeviceKey) -> bool:
    """Whether the rule's driver/pool/device criteria pick the device (all a rule without
    the 1.33/1.34 criteria has; a necessary condition for every rule)."""
    selector = rule.selector
    if selector is None:
        return False
    return (
        (selector.driver is None or selector.driver == key.driver)
        and (selector.pool is None or selector.pool == key.pool)
        and (selector.device is None or selector.device == key.device)
    )


def names_class(rule: TaintRuleRecord, name: str) -> bool:
    """Whether the rule's deviceClassName is `name` (a change of that class re-matches it)."""
    return rule.selector is not None and rule.selector.device_class_name == name


def selects(
    rule: TaintRuleRecord,
    key: DeviceKey,
    device: Device | None = None,
    matching: RuleMatching = NO_CEL,
) -> bool:
    """Whether the rule's selector picks the device; `device` is the published device (None:
    no slice publishes it). See the module docstring."""
    if not may_select(rule, key):
        return False
    selector = rule.selector
    assert selector is not None
    if selector.device_class_name is None and not selector.selectors:
        return True
    if device is None:
        return False  # the 1.33/1.34 criteria select published devices only
    expressions: tuple[str, ...] = selector.selectors
    if selector.device_class_name is not None:
        device_class = matching.classes(selector.device_class_name)
        if device_class is None:
            return False  # "DeviceTaintRule does not apply, DeviceClass does not exist"
        expressions = (*device_class.selectors, *expressions)
    if not expressions:
        return True
    matcher = matching.matcher
    if matcher is None:
        return False
    return all(matcher(e, device, key.driver) for e in expressions)


def rule_taints(
    rules: Iterable[TaintRuleRecord],
    key: DeviceKey,
    device: Device | None = None,
    matching: RuleMatching = NO_CEL,
) -> tuple[RuleTaint, ...]:
    """The taints the rules put on one device, in rule-name order (`device` as in `selects`)."""
    found = [RuleTaint(r.meta.name, r.taint) for r in rules if selects(r, key, device, matching)]
    found.sort(key=lambda t: t.rule)
    return tuple(found)


def with_rules(
    entry: DeviceEntry, rules: Iterable[TaintRuleRecord], matching: RuleMatching = NO_CEL
) -> DeviceEntry:
    """The entry with the taints `rules` put on it now (the same object when unchanged)."""
    device = entry.device if entry.published else None
    found = rule_taints(rules, entry.key, device, matching)
    return entry if found == entry.rule_taints else replace(entry, rule_taints=found)


def taints_of(entry: DeviceEntry) -> tuple[dict[str, Any], ...]:
    """Every taint of a device: its slice's, then the rules'."""
    if not entry.rule_taints:
        return entry.device.taints
    return (*entry.device.taints, *(t.taint for t in entry.rule_taints))


def unavailable(taints: Iterable[Mapping[str, Any]]) -> bool:
    """A NoSchedule or NoExecute taint among them (KEP-5677: the device is unavailable)."""
    return any(t.get("effect") in UNAVAILABLE_EFFECTS for t in taints)


def tolerated(taint: Mapping[str, Any], tolerations: Sequence[Mapping[str, Any]]) -> bool:
    """DeviceToleration: an empty key with operator Exists matches every taint; an empty
    effect matches every effect; Exists matches any value, Equal (the default) the same value."""
    for toleration in tolerations:
        effect = toleration.get("effect") or ""
        if effect and effect != taint.get("effect"):
            continue
        key = toleration.get("key") or ""
        if (toleration.get("operator") or "Equal") == "Exists":
            if not key or key == taint.get("key"):
                return True
        elif key == taint.get("key") and (toleration.get("value") or "") == (
            taint.get("value") or ""
        ):
            return True
    return False


def untolerated(
    taints: Iterable[Mapping[str, Any]], tolerations: Sequence[Mapping[str, Any]]
) -> list[Mapping[str, Any]]:
    """The NoSchedule/NoExecute taints the tolerations do not tolerate: they keep a request
    off the device (effect None and unknown effects never do)."""
    return [
        t
        for t in taints
        if t.get("effect") in UNAVAILABLE_EFFECTS and not tolerated(t, tolerations)
    ]


def shown(entry: DeviceEntry) -> list[dict[str, Any]]:
    """Every taint of a device with where it comes from: `{…taint, "rule": name}` for a rule's."""
    return [dict(t) for t in entry.device.taints] + [
        {**t.taint, "rule": t.rule} for t in entry.rule_taints
    ]
