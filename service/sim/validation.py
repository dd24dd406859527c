"""Validation and defaulting of written objects, following kube-apiserver's rules for DRA.

`validate(plural, obj)` returns a list of `StatusCause`-shaped dicts
(`{reason, message, field}`); an empty list means the object is acceptable. The rules are the
ones that matter to a mirror, as kube-apiserver's resource.k8s.io/v1 validation has them:
name formats, required fields, one-of groups and the size limits (128 devices per slice, 64
with taints or counters, 32 attributes + capacities per device, 32 requests, 256 reservedFor
…). Field paths are written in the v1 shape, as kube-apiserver reports them after conversion.
The field errors, formats and limits are `service.sim.field_errors`, the rules for classes
and slices `service.sim.slice_rules`; those for metadata, claims, templates and pods are here.

`default(plural, obj)` fills what the API server defaults on the way in (request
`allocationMode: ExactCount`, `count: 1`). Both are pure functions of the object.
"""

from __future__ import annotations

from typing import Any

from dra_mirror.service.sim.field_errors import (
    MAX_CONFIGS,
    MAX_CONSTRAINTS,
    MAX_REQUESTS,
    MAX_RESERVED_FOR,
    MAX_RESULTS,
    MAX_SUBREQUESTS,
    Causes,
    Checker,
    label,
    quoted,
)
from dra_mirror.service.sim.slice_rules import device_class, opaque, resource_slice

_ALLOCATION_MODES = {"ExactCount", "All"}


def validate(plural: str, obj: dict) -> Causes:
    """Problems with `obj` as a new or updated object of `plural`; [] when it is valid."""
    c = Checker()
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
        label(c, "metadata.labels", key, value)
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
    c = Checker()
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


def _claim_spec(c: Checker, field: str, spec: Any) -> None:
    devices = (spec or {}).get("devices") or {}
    requests = devices.get("requests") or []
    c.too_many(f"{field}.devices.requests", requests, MAX_REQUESTS)
    names: set[object] = set()  # JSON values, malformed ones included
    for i, req in enumerate(requests):
        path = f"{field}.devices.requests[{i}]"
        req = req or {}
        c.dns_label(f"{path}.name", req.get("name"))
        if req.get("name") in names:
            c.add(f"{path}.name", f"Duplicate value: {quoted(req['name'])}", "FieldValueDuplicate")
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
                    f"Invalid value: {quoted(ref)}: must be the name of a request in the claim",
                )
    c.too_many(f"{field}.devices.config", devices.get("config"), MAX_CONFIGS)
    for i, cfg in enumerate(devices.get("config") or []):
        opaque(c, f"{field}.devices.config[{i}].opaque", (cfg or {}).get("opaque"))


def _exact(c: Checker, path: str, exact: dict) -> None:
    c.dns_subdomain(f"{path}.deviceClassName", exact.get("deviceClassName"))
    c.selectors(f"{path}.selectors", exact.get("selectors"))
    mode = exact.get("allocationMode") or "ExactCount"
    if mode not in _ALLOCATION_MODES:
        c.add(
            f"{path}.allocationMode", f"Unsupported value: {quoted(mode)}", "FieldValueNotSupported"
        )
    count = exact.get("count")
    if mode == "ExactCount" and count is not None and (not isinstance(count, int) or count <= 0):
        c.add(f"{path}.count", f"Invalid value: {count}: must be greater than zero")
    if mode == "All" and count not in (None, 0):
        c.add(
            f"{path}.count",
            f"Invalid value: {count}: must not be specified when allocationMode is All",
        )


def _resource_claim(c: Checker, obj: dict) -> None:
    _claim_spec(c, "spec", obj.get("spec"))
    status = obj.get("status") or {}
    results = (((status.get("allocation") or {}).get("devices") or {}).get("results")) or []
    c.too_many("status.allocation.devices.results", results, MAX_RESULTS)
    for i, res in enumerate(results):
        for f in ("request", "driver", "pool", "device"):
            c.required(f"status.allocation.devices.results[{i}].{f}", (res or {}).get(f))
    reserved = status.get("reservedFor") or []
    c.too_many("status.reservedFor", reserved, MAX_RESERVED_FOR)
    uids: set[object] = set()
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


def _claim_template(c: Checker, obj: dict) -> None:
    spec: Any = obj.get("spec")  # JSON as sent
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


def _pod(c: Checker, obj: dict) -> None:
    spec = obj.get("spec") or {}
    containers = spec.get("containers") or []
    c.required("spec.containers", containers)
    for kind in ("initContainers", "containers"):
        for i, ctr in enumerate(spec.get(kind) or []):
            c.dns_label(f"spec.{kind}[{i}].name", (ctr or {}).get("name"))
            c.required(f"spec.{kind}[{i}].image", (ctr or {}).get("image"))
    claim_names: set[object] = set()
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
    "deviceclasses": device_class,
    "resourceslices": resource_slice,
    "resourceclaims": _resource_claim,
    "resourceclaimtemplates": _claim_template,
    "pods": _pod,
}
