"""DeviceTaintRules: one taint for every device a rule's selector picks, and a device's taints.

A DeviceTaintRule (resource.k8s.io v1alpha3 from 1.33, v1beta2 from 1.36, v1 from 1.37) "adds
one taint to all devices which match the selector. This has the same effect as if the taint
was specified directly in the ResourceSlice by the DRA driver" (resource/v1/types.go). So:

* `spec.deviceSelector`: "All selector criteria must be satisfied for a device to match. The
  empty selector matches all devices. Without a selector, no devices are matched." The
  criteria are `driver`, `pool` and `device` (the device's name). `deviceClassName` and
  `selectors` (CEL) existed in 1.33/1.34 and are tombstoned since 1.35: the API server no
  longer serves them, so they are not read here either (a rule is matched as a 1.35+ server
  and the eviction controller match it, on driver/pool/device alone);
* a rule selects devices by name, not by slice: a device an allocation result names and no
  slice publishes is selected too (the eviction controller matches allocated devices);
* `spec.taint` is a DeviceTaint (key, value, effect None/NoSchedule/NoExecute, timeAdded),
  kept raw as the slice's taints are; "consumers must treat unknown effects like None";
* `status.conditions` (EvictionInProgress, 1.35+) are carried raw.

A device's taints are its slice's, then one per rule selecting it in rule-name order
(`DeviceEntry.rule_taints`, filled by the index); `taints_of(entry)` gives them all for the
rules that read taints (pool counts, the allocator, explainClaim, findDevices, the metrics),
and `untolerated` is the toleration rule of the API (DeviceToleration) over them.

Promises: pure; O(rules) per device, O(devices) per rule event (rules are few).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from msgspec import Struct
from msgspec.structs import replace

from dra_mirror.service.model import api
from dra_mirror.service.model.metadata import object_meta
from dra_mirror.service.model.records import (
    DEVICE_TAINT_RULE,
    DeviceEntry,
    DeviceKey,
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


class DeviceTaintRuleSpec(_Wire):
    device_selector: DeviceTaintSelector | None = None
    taint: api.Raw | None = None


class DeviceTaintRuleStatus(_Wire):
    conditions: list[api.Raw] | None = None


class DeviceTaintRule(_Wire):
    metadata: api.ObjectMeta
    spec: DeviceTaintRuleSpec | None = None
    status: DeviceTaintRuleStatus | None = None


def taint_rule_record(wire: DeviceTaintRule, *, cluster: str) -> TaintRuleRecord:
    """The record of a decoded DeviceTaintRule (ValueError when its taint has no key)."""
    spec = wire.spec or DeviceTaintRuleSpec()
    taint = dict(spec.taint or {})
    if not isinstance(taint.get("key"), str) or not taint["key"]:
        raise ValueError("spec.taint.key: required")
    selector = spec.device_selector
    return TaintRuleRecord(
        meta=object_meta(DEVICE_TAINT_RULE, wire.metadata, cluster=cluster),
        selector=TaintSelector(selector.driver, selector.pool, selector.device)
        if selector is not None
        else None,
        taint=taint,
        conditions=tuple((wire.status.conditions or ()) if wire.status is not None else ()),
    )


# --- matching -----------------------------------------------------------------------------------


def selects(rule: TaintRuleRecord, key: DeviceKey) -> bool:
    """Whether the rule's selector picks the device (see the module docstring)."""
    selector = rule.selector
    if selector is None:
        return False
    return (
        (selector.driver is None or selector.driver == key.driver)
        and (selector.pool is None or selector.pool == key.pool)
        and (selector.device is None or selector.device == key.device)
    )


def rule_taints(rules: Iterable[TaintRuleRecord], key: DeviceKey) -> tuple[RuleTaint, ...]:
    """The taints the rules put on one device, in rule-name order."""
    found = [RuleTaint(r.meta.name, r.taint) for r in rules if selects(r, key)]
    found.sort(key=lambda t: t.rule)
    return tuple(found)


def with_rules(entry: DeviceEntry, rules: Iterable[TaintRuleRecord]) -> DeviceEntry:
    """The entry with the taints `rules` put on it now (the same object when unchanged)."""
    found = rule_taints(rules, entry.key)
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
