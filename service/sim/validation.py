"""Validation and defaulting of written objects, following kube-apiserver's rules for DRA.

`validate(plural, obj)` returns a list of `StatusCause`-shaped dicts
(`{reason, message, field}`); an empty list means the object is acceptable. The rules are
the ones that matter to a mirror and that appear in `docs/dra-api.md` §2: name formats,
required fields, one-of groups and the size limits (128 devices per slice, 64 with taints or
counters, 32 attributes + capacities per device, 32 requests, 256 reservedFor …). Field
paths are written in the v1 shape, as kube-apiserver reports them after conversion.

`default(plural, obj)` fills what the API server defaults on the way in (request
`allocationMode: ExactCount`, `count: 1`). Both are pure functions of the object.
"""

from __future__ import annotations

import json
import re
from typing import Any

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_C_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_LABEL_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_SEMVER = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(-((0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*)(\.(0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*))*))?"
    r"(\+([0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*))?$"
)
_TAINT_EFFECTS = {"None", "NoSchedule", "NoExecute"}
_ALLOCATION_MODES = {"ExactCount", "All"}

# Limits from k8s.io/api resource/v1 (1.35), see docs/dra-api.md §2.
MAX_DEVICES = 128
MAX_DEVICES_WITH_TAINTS_OR_COUNTERS = 64
MAX_ATTRIBUTES_AND_CAPACITIES = 32
MAX_COUNTER_SETS = 8
MAX_COUNTERS_PER_SET = 32
MAX_CONSUMES_COUNTERS = 2
MAX_TAINTS = 16
MAX_REQUESTS = 32
MAX_SUBREQUESTS = 8
MAX_SELECTORS = 32
MAX_CONSTRAINTS = 32
MAX_CONFIGS = 32
MAX_RESULTS = 32
MAX_RESERVED_FOR = 256
MAX_CEL_LENGTH = 10 * 1024
MAX_ATTRIBUTE_VALUE = 64

Causes = list[dict[str, str]]


def _q(value: Any) -> str:
    """A value as Go's %q prints it in field errors ("nameValue", not 'nameValue')."""
    return json.dumps(value, default=str)


class _Checker:
    def __init__(self) -> None:
        self.causes: Causes = []

    def add(self, field: str, message: str, reason: str = "FieldValueInvalid") -> None:
        self.causes.append({"reason": reason, "message": message, "field": field})

    def required(self, field: str, value: Any) -> bool:
        if value in (None, "", [], {}):
            self.add(field, "Required value", "FieldValueRequired")
            return False
        return True

    def too_many(self, field: str, items: Any, limit: int) -> None:
        if items is not None and len(items) > limit:
            self.add(
                field,
                f"Too many: {len(items)}: must have at most {limit} items",
                "FieldValueTooMany",
            )

    def dns_label(self, field: str, value: Any) -> None:
        if self.required(field, value) and (
            not isinstance(value, str) or len(value) > 63 or not _DNS_LABEL.match(value)
        ):
            self.add(field, f"Invalid value: {_q(value)}: must be a lowercase RFC 1123 label")

    def dns_subdomain(self, field: str, value: Any, limit: int = 253) -> None:
        if self.required(field, value) and (
            not isinstance(value, str) or len(value) > limit or not _DNS_SUBDOMAIN.match(value)
        ):
            self.add(field, f"Invalid value: {_q(value)}: must be a lowercase RFC 1123 subdomain")

    def qualified_name(self, field: str, value: str) -> None:
        """Attribute/capacity keys: C identifier ≤32, optionally `<dns subdomain ≤63>/`."""
        domain, _, ident = value.rpartition("/")
        if domain and (len(domain) > 63 or not _DNS_SUBDOMAIN.match(domain)):
            self.add(field, f"Invalid value: {_q(value)}: the domain must be a DNS subdomain")
        if len(ident) > 32 or not _C_IDENTIFIER.match(ident):
            self.add(field, f"Invalid value: {_q(value)}: must be a C identifier of ≤32 characters")

    def one_of(self, field: str, present: list[str]) -> None:
        if not present:
            self.add(
                field, "Required value: exactly one of the fields must be set", "FieldValueRequired"
            )
        elif len(present) > 1:
            self.add(field, f"Invalid value: {present}: exactly one field must be set")

    def selectors(self, field: str, selectors: Any) -> None:
        self.too_many(field, selectors, MAX_SELECTORS)
        for i, sel in enumerate(selectors or []):
            expr = ((sel or {}).get("cel") or {}).get("expression")
            if self.required(f"{field}[{i}].cel.expression", expr) and len(expr) > MAX_CEL_LENGTH:
                self.add(f"{field}[{i}].cel.expression", "Too long", "FieldValueTooLong")


def validate(plural: str, obj: dict) -> Causes:
    """Problems with `obj` as a new or updated object of `plural`; [] when it is valid."""
    c = _Checker()
    meta = obj.get("metadata") or {}
    if not isinstance(meta, dict):
        c.add("metadata", "Invalid value: must be an object")
        return c.causes
    for field in ("labels", "annotations"):
        if not isinstance(meta.get(field) or {}, dict):
            c.add(f"metadata.{field}", "Invalid value: must be a map of strings")
            return c.causes
    name = meta.get("name")
    if plural == "namespaces":
        c.dns_label("metadata.name", name)
    else:
        c.dns_subdomain("metadata.name", name)
    if meta.get("namespace") not in (None, ""):
        c.dns_label("metadata.namespace", meta["namespace"])
    for key, value in (meta.get("labels") or {}).items():
        _label(c, "metadata.labels", key, value)
    check = _CHECKS.get(plural)
    if check is not None:
        try:
            check(c, obj)
        except (AttributeError, TypeError, KeyError, ValueError) as error:
            # A field of the wrong JSON type (a string where a list belongs …): the real
            # server fails to decode such a body; here it is one more cause, never a crash.
            c.add("spec", f"Invalid value: malformed object ({type(error).__name__}: {error})")
    return c.causes


def validate_update(plural: str, old: dict, new: dict) -> Causes:
    """Immutable fields: a claim's and a template's spec, a slice's driver, pool and node."""
    c = _Checker()
    if plural in ("resourceclaims", "resourceclaimtemplates") and old.get("spec") != new.get(
        "spec"
    ):
        c.add("spec", "Invalid value: field is immutable")
    if plural == "resourceslices":
        o, n = old.get("spec") or {}, new.get("spec") or {}
        for field in ("driver", "nodeName"):
            if o.get(field) != n.get(field):
                c.add(f"spec.{field}", "Invalid value: field is immutable")
        if (o.get("pool") or {}).get("name") != (n.get("pool") or {}).get("name"):
            c.add("spec.pool.name", "Invalid value: field is immutable")
    return c.causes


def default(plural: str, obj: dict) -> dict:
    """Apply kube-apiserver's defaults for DRA requests in place; returns `obj`."""
    try:
        _default_requests(plural, obj)
    except (AttributeError, TypeError):
        pass  # malformed: validate() reports it
    return obj


def _default_requests(plural: str, obj: dict) -> None:
    spec = None
    if plural == "resourceclaims":
        spec = obj.get("spec")
    elif plural == "resourceclaimtemplates":
        spec = (obj.get("spec") or {}).get("spec")
    for req in ((spec or {}).get("devices") or {}).get("requests") or []:
        for exact in [req.get("exactly"), *(req.get("firstAvailable") or [])]:
            if isinstance(exact, dict):
                exact.setdefault("allocationMode", "ExactCount")
                if exact["allocationMode"] == "ExactCount":
                    exact.setdefault("count", 1)


def _label(c: _Checker, field: str, key: str, value: Any) -> None:
    prefix, _, label = key.rpartition("/")
    if prefix and not _DNS_SUBDOMAIN.match(prefix):
        c.add(f"{field}", f"Invalid value: {_q(key)}: prefix must be a DNS subdomain")
    if len(label) > 63 or not _LABEL_NAME.match(label):
        c.add(f"{field}", f"Invalid value: {_q(key)}: name part must be a valid label name")
    if not isinstance(value, str) or len(value) > 63 or not _LABEL_VALUE.match(value):
        c.add(f"{field}", f"Invalid value: {_q(value)}: a valid label value")


def _device_class(c: _Checker, obj: dict) -> None:
    spec = obj.get("spec") or {}
    c.selectors("spec.selectors", spec.get("selectors"))
    c.too_many("spec.config", spec.get("config"), MAX_CONFIGS)
    for i, cfg in enumerate(spec.get("config") or []):
        _opaque(c, f"spec.config[{i}].opaque", (cfg or {}).get("opaque"))


def _opaque(c: _Checker, field: str, opaque: Any) -> None:
    if not c.required(field, opaque):
        return
    c.dns_subdomain(f"{field}.driver", opaque.get("driver"), 63)
    c.required(f"{field}.parameters", opaque.get("parameters"))


def _node_selection(c: _Checker, field: str, holder: dict, per_device_ok: bool) -> list[str]:
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


def _resource_slice(c: _Checker, obj: dict) -> None:
    spec = obj.get("spec")
    if not c.required("spec", spec):
        return
    c.dns_subdomain("spec.driver", spec.get("driver"), 63)
    pool = spec.get("pool") or {}
    if c.required("spec.pool.name", pool.get("name")):
        for part in str(pool["name"]).split("/"):
            if not _DNS_SUBDOMAIN.match(part) or len(pool["name"]) > 253:
                c.add(
                    "spec.pool.name",
                    f"Invalid value: {_q(pool['name'])}: must be DNS subdomains separated by /",
                )
                break
    if not isinstance(pool.get("generation"), int) or pool["generation"] < 0:
        c.add("spec.pool.generation", "Invalid value: must be greater than or equal to 0")
    if not isinstance(pool.get("resourceSliceCount"), int) or pool["resourceSliceCount"] <= 0:
        c.add("spec.pool.resourceSliceCount", "Invalid value: must be greater than zero")
    selection = _node_selection(c, "spec", spec, per_device_ok=True)
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
    seen: set[str] = set()
    for i, dev in enumerate(devices):
        _device(c, f"spec.devices[{i}]", dev or {}, spec.get("perDeviceNodeSelection") is True)
        if (dev or {}).get("name") in seen:
            c.add(
                f"spec.devices[{i}].name",
                f"Duplicate value: {_q(dev['name'])}",
                "FieldValueDuplicate",
            )
        seen.add((dev or {}).get("name"))


def _device(c: _Checker, field: str, dev: dict, per_device: bool) -> None:
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
        if members == ["version"] and not _SEMVER.match(str(attr["version"])):
            c.add(
                f"{path}.version",
                f"Invalid value: {_q(attr['version'])}: must be a semantic version",
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
    present = _node_selection(c, field, dev, per_device_ok=False)
    if per_device:
        c.one_of(field, present)
    elif present:
        c.add(
            field,
            "Forbidden: per-device node selection requires spec.perDeviceNodeSelection",
            "FieldValueForbidden",
        )


def _claim_spec(c: _Checker, field: str, spec: Any) -> None:
    devices = (spec or {}).get("devices") or {}
    requests = devices.get("requests") or []
    c.too_many(f"{field}.devices.requests", requests, MAX_REQUESTS)
    names: set[str] = set()
    for i, req in enumerate(requests):
        path = f"{field}.devices.requests[{i}]"
        req = req or {}
        c.dns_label(f"{path}.name", req.get("name"))
        if req.get("name") in names:
            c.add(f"{path}.name", f"Duplicate value: {_q(req['name'])}", "FieldValueDuplicate")
        names.add(req.get("name"))
        present = [k for k in ("exactly", "firstAvailable") if req.get(k)]
        c.one_of(path, present)
        if req.get("exactly"):
            _exact(c, f"{path}.exactly", req["exactly"])
        subs = req.get("firstAvailable") or []
        c.too_many(f"{path}.firstAvailable", subs, MAX_SUBREQUESTS)
        for j, sub in enumerate(subs):
            c.dns_label(f"{path}.firstAvailable[{j}].name", (sub or {}).get("name"))
            _exact(c, f"{path}.firstAvailable[{j}]", sub or {})
            if (sub or {}).get("adminAccess") is not None:
                c.add(f"{path}.firstAvailable[{j}].adminAccess", "Forbidden", "FieldValueForbidden")
    c.too_many(f"{field}.devices.constraints", devices.get("constraints"), MAX_CONSTRAINTS)
    for i, con in enumerate(devices.get("constraints") or []):
        for ref in (con or {}).get("requests") or []:
            if ref.split("/", 1)[0] not in names:
                c.add(
                    f"{field}.devices.constraints[{i}].requests",
                    f"Invalid value: {_q(ref)}: must be the name of a request in the claim",
                )
    c.too_many(f"{field}.devices.config", devices.get("config"), MAX_CONFIGS)
    for i, cfg in enumerate(devices.get("config") or []):
        _opaque(c, f"{field}.devices.config[{i}].opaque", (cfg or {}).get("opaque"))


def _exact(c: _Checker, path: str, exact: dict) -> None:
    c.dns_subdomain(f"{path}.deviceClassName", exact.get("deviceClassName"))
    c.selectors(f"{path}.selectors", exact.get("selectors"))
    mode = exact.get("allocationMode") or "ExactCount"
    if mode not in _ALLOCATION_MODES:
        c.add(f"{path}.allocationMode", f"Unsupported value: {_q(mode)}", "FieldValueNotSupported")
    count = exact.get("count")
    if mode == "ExactCount" and count is not None and (not isinstance(count, int) or count <= 0):
        c.add(f"{path}.count", f"Invalid value: {count}: must be greater than zero")
    if mode == "All" and count not in (None, 0):
        c.add(
            f"{path}.count",
            f"Invalid value: {count}: must not be specified when allocationMode is All",
        )


def _resource_claim(c: _Checker, obj: dict) -> None:
    _claim_spec(c, "spec", obj.get("spec"))
    status = obj.get("status") or {}
    results = (((status.get("allocation") or {}).get("devices") or {}).get("results")) or []
    c.too_many("status.allocation.devices.results", results, MAX_RESULTS)
    for i, res in enumerate(results):
        for f in ("request", "driver", "pool", "device"):
            c.required(f"status.allocation.devices.results[{i}].{f}", (res or {}).get(f))
    reserved = status.get("reservedFor") or []
    c.too_many("status.reservedFor", reserved, MAX_RESERVED_FOR)
    uids: set[str] = set()
    for i, ref in enumerate(reserved):
        for f in ("resource", "name", "uid"):
            c.required(f"status.reservedFor[{i}].{f}", (ref or {}).get(f))
        if (ref or {}).get("uid") in uids:
            c.add(f"status.reservedFor[{i}].uid", "Duplicate value", "FieldValueDuplicate")
        uids.add((ref or {}).get("uid"))
    if reserved and not status.get("allocation"):
        c.add(
            "status.reservedFor",
            "Forbidden: may not be set when the claim is not allocated",
            "FieldValueForbidden",
        )


def _claim_template(c: _Checker, obj: dict) -> None:
    spec = obj.get("spec")
    if not c.required("spec", spec):
        return
    extra = set(spec.get("metadata") or {}) - {"labels", "annotations"}
    if extra:
        c.add(
            "spec.metadata",
            f"Forbidden: only labels and annotations may be set, not {sorted(extra)}",
            "FieldValueForbidden",
        )
    _claim_spec(c, "spec.spec", spec.get("spec"))


def _pod(c: _Checker, obj: dict) -> None:
    spec = obj.get("spec") or {}
    containers = spec.get("containers") or []
    c.required("spec.containers", containers)
    for kind in ("initContainers", "containers"):
        for i, ctr in enumerate(spec.get(kind) or []):
            c.dns_label(f"spec.{kind}[{i}].name", (ctr or {}).get("name"))
            c.required(f"spec.{kind}[{i}].image", (ctr or {}).get("image"))
    claim_names: set[str] = set()
    for i, prc in enumerate(spec.get("resourceClaims") or []):
        prc = prc or {}
        c.dns_label(f"spec.resourceClaims[{i}].name", prc.get("name"))
        claim_names.add(prc.get("name"))
        c.one_of(
            f"spec.resourceClaims[{i}]",
            [k for k in ("resourceClaimName", "resourceClaimTemplateName") if prc.get(k)],
        )
    for kind in ("initContainers", "containers"):
        for i, ctr in enumerate(spec.get(kind) or []):
            for j, ref in enumerate(((ctr or {}).get("resources") or {}).get("claims") or []):
                if (ref or {}).get("name") not in claim_names:
                    c.add(
                        f"spec.{kind}[{i}].resources.claims[{j}].name",
                        "Not found: must be one of spec.resourceClaims",
                        "FieldValueNotFound",
                    )


_CHECKS = {
    "deviceclasses": _device_class,
    "resourceslices": _resource_slice,
    "resourceclaims": _resource_claim,
    "resourceclaimtemplates": _claim_template,
    "pods": _pod,
}
