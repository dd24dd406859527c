"""Validation of the supply side: DeviceClasses and ResourceSlices, as kube-apiserver's
resource.k8s.io/v1 validation checks them (k8s.io/kubernetes pkg/apis/resource/validation).

* a class: its selectors (at most 32, CEL at most 10 KiB) and opaque configs;
* a slice: driver, pool (name as DNS subdomains separated by `/`, generation ≥ 0,
  resourceSliceCount > 0), exactly one node selection (nodeName, nodeSelector with one term,
  allNodes, or perDeviceNodeSelection), sharedCounters or devices but not both, and the device
  limits (128 devices, 64 with taints or counters);
* a device: its name, at most 32 attributes and capacities together (each a qualified name;
  an attribute exactly one typed value, strings ≤ 64 bytes, versions semantic), capacity
  requestPolicy only on shareable devices, counters consumed, taints with a known effect, and
  per-device node selection only when the slice asks for it.

Promises: pure; each rule adds causes to the `Checker` it is given.
"""

from __future__ import annotations

from typing import Any

from dra_mirror.service.sim.field_errors import (
    DNS_SUBDOMAIN,
    MAX_ATTRIBUTE_VALUE,
    MAX_ATTRIBUTES_AND_CAPACITIES,
    MAX_CONFIGS,
    MAX_CONSUMES_COUNTERS,
    MAX_COUNTER_SETS,
    MAX_COUNTERS_PER_SET,
    MAX_DEVICES,
    MAX_DEVICES_WITH_TAINTS_OR_COUNTERS,
    MAX_TAINTS,
    SEMVER,
    Checker,
    quoted,
)

__all__ = ["device_class", "opaque", "resource_slice"]

_TAINT_EFFECTS = {"None", "NoSchedule", "NoExecute"}


def device_class(c: Checker, obj: dict) -> None:
    spec = obj.get("spec") or {}
    c.selectors("spec.selectors", spec.get("selectors"))
    c.too_many("spec.config", spec.get("config"), MAX_CONFIGS)
    for i, cfg in enumerate(spec.get("config") or []):
        opaque(c, f"spec.config[{i}].opaque", (cfg or {}).get("opaque"))


def opaque(c: Checker, field: str, opaque: Any) -> None:
    if not c.required(field, opaque):
        return
    c.dns_subdomain(f"{field}.driver", opaque.get("driver"), 63)
    c.required(f"{field}.parameters", opaque.get("parameters"))


def node_selection(c: Checker, field: str, holder: dict, per_device_ok: bool) -> list[str]:
    names = ["nodeName", "nodeSelector", "allNodes"] + (
        ["perDeviceNodeSelection"] if per_device_ok else []
    )
    present = [n for n in names if holder.get(n) not in (None, "", False)]
    for flag in ("allNodes", "perDeviceNodeSelection"):
        if flag in present and holder[flag] is not True:
            c.add(f"{field}.{flag}", "Invalid value: must be true when set")
    if "nodeName" in present:
        c.dns_subdomain(f"{field}.nodeName", holder["nodeName"])
    if "nodeSelector" in present:
        terms = (holder["nodeSelector"] or {}).get("nodeSelectorTerms") or []
        if len(terms) != 1:
            c.add(
                f"{field}.nodeSelector.nodeSelectorTerms",
                "Invalid value: must have exactly one node selector term",
            )
    return present


def resource_slice(c: Checker, obj: dict) -> None:
    spec: Any = obj.get("spec")  # JSON as sent
    if not c.required("spec", spec):
        return
    c.dns_subdomain("spec.driver", spec.get("driver"), 63)
    pool = spec.get("pool") or {}
    if c.required("spec.pool.name", pool.get("name")):
        for part in str(pool["name"]).split("/"):
            if not DNS_SUBDOMAIN.match(part) or len(pool["name"]) > 253:
                c.add(
                    "spec.pool.name",
                    f"Invalid value: {quoted(pool['name'])}: must be DNS subdomains separated by /",
                )
                break
    if not isinstance(pool.get("generation"), int) or pool["generation"] < 0:
        c.add("spec.pool.generation", "Invalid value: must be greater than or equal to 0")
    if not isinstance(pool.get("resourceSliceCount"), int) or pool["resourceSliceCount"] <= 0:
        c.add("spec.pool.resourceSliceCount", "Invalid value: must be greater than zero")
    selection = node_selection(c, "spec", spec, per_device_ok=True)
    c.one_of("spec", selection)
    devices = spec.get("devices") or []
    counter_sets = spec.get("sharedCounters") or []
    if devices and counter_sets:
        c.add("spec", "Invalid value: only one of `sharedCounters` or `devices` is allowed")
    c.too_many("spec.sharedCounters", counter_sets, MAX_COUNTER_SETS)
    for i, cs in enumerate(counter_sets):
        c.dns_label(f"spec.sharedCounters[{i}].name", (cs or {}).get("name"))
        c.too_many(
            f"spec.sharedCounters[{i}].counters", (cs or {}).get("counters"), MAX_COUNTERS_PER_SET
        )
    advanced = any(
        d.get("taints") or d.get("consumesCounters") for d in devices if isinstance(d, dict)
    )
    c.too_many(
        "spec.devices", devices, MAX_DEVICES_WITH_TAINTS_OR_COUNTERS if advanced else MAX_DEVICES
    )
    seen: set[object] = set()  # JSON values, malformed ones included
    for i, dev in enumerate(devices):
        device(c, f"spec.devices[{i}]", dev or {}, spec.get("perDeviceNodeSelection") is True)
        if (dev or {}).get("name") in seen:
            c.add(
                f"spec.devices[{i}].name",
                f"Duplicate value: {quoted(dev['name'])}",
                "FieldValueDuplicate",
            )
        seen.add((dev or {}).get("name"))


def device(c: Checker, field: str, dev: dict, per_device: bool) -> None:
    c.dns_label(f"{field}.name", dev.get("name"))
    attributes = dev.get("attributes") or {}
    capacity = dev.get("capacity") or {}
    if len(attributes) + len(capacity) > MAX_ATTRIBUTES_AND_CAPACITIES:
        c.add(
            field,
            f"Too many: {len(attributes) + len(capacity)}: must have at most "
            f"{MAX_ATTRIBUTES_AND_CAPACITIES} attributes and capacities combined",
            "FieldValueTooMany",
        )
    for key, attr in attributes.items():
        path = f"{field}.attributes[{key}]"
        c.qualified_name(path, key)
        members = [
            m
            for m in ("int", "bool", "string", "version", "ints", "bools", "strings", "versions")
            if (attr or {}).get(m) is not None
        ]
        c.one_of(path, members)
        if members == ["string"] and len(attr["string"]) > MAX_ATTRIBUTE_VALUE:
            c.add(f"{path}.string", "Too long: may not be more than 64 bytes", "FieldValueTooLong")
        if members == ["version"] and not SEMVER.match(str(attr["version"])):
            c.add(
                f"{path}.version",
                f"Invalid value: {quoted(attr['version'])}: must be a semantic version",
            )
    for key, cap in capacity.items():
        c.qualified_name(f"{field}.capacity[{key}]", key)
        c.required(f"{field}.capacity[{key}].value", (cap or {}).get("value"))
        if (cap or {}).get("requestPolicy") and dev.get("allowMultipleAllocations") is not True:
            c.add(
                f"{field}.capacity[{key}].requestPolicy",
                "Forbidden: allowed only when allowMultipleAllocations is true",
                "FieldValueForbidden",
            )
    c.too_many(f"{field}.consumesCounters", dev.get("consumesCounters"), MAX_CONSUMES_COUNTERS)
    for i, use in enumerate(dev.get("consumesCounters") or []):
        c.dns_label(f"{field}.consumesCounters[{i}].counterSet", (use or {}).get("counterSet"))
    c.too_many(f"{field}.taints", dev.get("taints"), MAX_TAINTS)
    for i, taint in enumerate(dev.get("taints") or []):
        c.required(f"{field}.taints[{i}].key", (taint or {}).get("key"))
        if (taint or {}).get("effect") not in _TAINT_EFFECTS:
            c.add(
                f"{field}.taints[{i}].effect",
                f"Unsupported value: {(taint or {}).get('effect')!r}",
                "FieldValueNotSupported",
            )
    present = node_selection(c, field, dev, per_device_ok=False)
    if per_device:
        c.one_of(field, present)
    elif present:
        c.add(
            field,
            "Forbidden: per-device node selection requires spec.perDeviceNodeSelection",
            "FieldValueForbidden",
        )
