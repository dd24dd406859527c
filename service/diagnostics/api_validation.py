"""What kube-apiserver would refuse in a ResourceClaim or ResourceClaimTemplate, found offline.

`problems(doc)` reads one manifest as the API server's resource.k8s.io validation does
(pkg/apis/resource/validation, v1 and v1beta2 shapes; v1beta1's flat requests), so `lint` and
`plan` say "the API server would refuse this" instead of planning what can never be created:

* the shape of the version named by `apiVersion`: under `resource.k8s.io/v1` (and v1beta2) a
  request has exactly one of `exactly` and `firstAvailable`; v1beta1's flat fields
  (`deviceClassName`, `selectors`, `count`, `allocationMode`, `adminAccess`, `tolerations`,
  `capacity` on the request itself) are unknown fields there — kubectl's strict field
  validation refuses them, and without `exactly` the request has no device class at all;
* names: `metadata.name` a DNS subdomain — or absent when `metadata.generateName` is given
  (the API server picks the name); request and subrequest names DNS labels, unique;
  `deviceClassName` a DNS subdomain;
* counts and list limits: at most 32 requests, 32 constraints, 32 configs, 8 subrequests,
  32 selectors and 16 tolerations per request; `allocationMode` ExactCount or All; `count`
  at least 1 with ExactCount, absent with All; a constraint naming a request the claim does
  not have;
* CEL: each selector's expression compiled as kube-apiserver compiles it (the same
  environment, `service.diagnostics.cel`), at most 10 KiB; an expression that does not
  compile is `cel-invalid`, naming the error.

Promises: pure; never raises on a malformed manifest (what cannot be read is a problem).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dra_mirror.service.diagnostics.cel import SelectorError, compile_selector

API_INVALID = "api-invalid"
CEL_INVALID = "cel-invalid"

MAX_REQUESTS = 32
MAX_CONSTRAINTS = 32
MAX_CONFIGS = 32
MAX_SUBREQUESTS = 8
MAX_SELECTORS = 32
MAX_TOLERATIONS = 16
MAX_EXPRESSION = 10 * 1024
_FLAT = ("deviceClassName", "selectors", "count", "allocationMode", "adminAccess",
         "tolerations", "capacity")  # fmt: skip
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
KINDS = ("ResourceClaim", "ResourceClaimTemplate")


@dataclass(frozen=True)
class Problem:
    rule: str  # api-invalid | cel-invalid
    path: str
    message: str


def problems(doc: Mapping[str, Any]) -> list[Problem]:
    """What the API server would refuse in a ResourceClaim or ResourceClaimTemplate ([] for
    other kinds and for an acceptable object)."""
    if doc.get("kind") not in KINDS:
        return []
    found: list[Problem] = []
    try:
        _check(doc, found)
    except (AttributeError, TypeError, KeyError, ValueError) as error:
        found.append(Problem(API_INVALID, "", f"cannot be read: {error}"))
    return found


def _check(doc: Mapping[str, Any], found: list[Problem]) -> None:
    meta = doc.get("metadata") or {}
    name, generate = meta.get("name"), meta.get("generateName")
    if name:
        _subdomain(found, "metadata.name", name)
    elif not generate:
        found.append(Problem(API_INVALID, "metadata.name", "name or generateName is required"))
    if meta.get("namespace"):
        _label(found, "metadata.namespace", meta["namespace"])
    version = str(doc.get("apiVersion") or "").rpartition("/")[2]
    spec, base = doc.get("spec") or {}, "spec"
    if doc.get("kind") == "ResourceClaimTemplate":
        spec, base = spec.get("spec") or {}, "spec.spec"
    devices = spec.get("devices") or {}
    requests = devices.get("requests") or []
    _limit(found, f"{base}.devices.requests", requests, MAX_REQUESTS)
    _limit(found, f"{base}.devices.constraints", devices.get("constraints") or [], MAX_CONSTRAINTS)
    _limit(found, f"{base}.devices.config", devices.get("config") or [], MAX_CONFIGS)
    names = _names(found, f"{base}.devices.requests", requests)
    for i, request in enumerate(requests):
        _request(found, f"{base}.devices.requests[{i}]", request, version)
    for i, constraint in enumerate(devices.get("constraints") or []):
        for j, wanted in enumerate(constraint.get("requests") or []):
            if wanted.split("/")[0] not in names:
                found.append(Problem(
                    API_INVALID, f"{base}.devices.constraints[{i}].requests[{j}]",
                    f"Invalid value: {wanted!r}: must be the name of a request in the claim",
                ))  # fmt: skip


def _names(found: list[Problem], path: str, items: list[Mapping[str, Any]]) -> set[str]:
    """The names of a list of requests (or subrequests): each required, a DNS label, unique."""
    names: set[str] = set()
    for i, item in enumerate(items):
        name = item.get("name")
        if not name:
            found.append(Problem(API_INVALID, f"{path}[{i}].name", "Required value"))
            continue
        _label(found, f"{path}[{i}].name", name)
        if name in names:
            found.append(Problem(API_INVALID, f"{path}[{i}].name", f"Duplicate value: {name!r}"))
        names.add(name)
    return names


def _request(found: list[Problem], path: str, request: Mapping[str, Any], version: str) -> None:
    subrequests = request.get("firstAvailable")
    if version == "v1beta1":
        flat = {k: request[k] for k in _FLAT if k in request}
        if subrequests and flat:
            found.append(Problem(API_INVALID, path, "deviceClassName and firstAvailable are "
                                 "mutually exclusive"))  # fmt: skip
        elif not subrequests:
            _exact(found, path, request)
    else:
        flat_fields = [k for k in _FLAT if k in request]
        if flat_fields:
            found.append(Problem(
                API_INVALID, f"{path}.{flat_fields[0]}",
                f"unknown field {flat_fields[0]!r}: that is resource.k8s.io/v1beta1's request "
                f"shape; under resource.k8s.io/{version or 'v1'} put it under "
                f"{path.rsplit('.', 1)[-1]}.exactly",
            ))  # fmt: skip
        exact = request.get("exactly")
        if (exact is None) == (not subrequests):
            found.append(Problem(API_INVALID, path, "exactly one of exactly and firstAvailable is "
                                 "required"))  # fmt: skip
        elif exact is not None:
            _exact(found, f"{path}.exactly", exact)
    if subrequests:
        _limit(found, f"{path}.firstAvailable", subrequests, MAX_SUBREQUESTS)
        _names(found, f"{path}.firstAvailable", subrequests)
        for j, sub in enumerate(subrequests):
            _exact(found, f"{path}.firstAvailable[{j}]", sub)


def _exact(found: list[Problem], path: str, exact: Mapping[str, Any]) -> None:
    class_name = exact.get("deviceClassName")
    if not class_name:
        found.append(Problem(API_INVALID, f"{path}.deviceClassName", "Required value"))
    else:
        _subdomain(found, f"{path}.deviceClassName", class_name)
    mode = exact.get("allocationMode") or "ExactCount"
    count = exact.get("count")
    if mode not in ("ExactCount", "All"):
        found.append(Problem(API_INVALID, f"{path}.allocationMode",
                             f'Unsupported value: {mode!r}: supported values: "All", "ExactCount"'))  # fmt: skip
    elif mode == "ExactCount" and count is not None and (not isinstance(count, int) or count < 1):
        found.append(Problem(API_INVALID, f"{path}.count",
                             f"Invalid value: {count!r}: must be greater than zero"))  # fmt: skip
    elif mode == "All" and count not in (None, 0):
        found.append(Problem(API_INVALID, f"{path}.count",
                             f"Invalid value: {count!r}: must not be set with allocationMode All"))  # fmt: skip
    selectors = exact.get("selectors") or []
    _limit(found, f"{path}.selectors", selectors, MAX_SELECTORS)
    _limit(found, f"{path}.tolerations", exact.get("tolerations") or [], MAX_TOLERATIONS)
    for k, selector in enumerate(selectors):
        expression = ((selector or {}).get("cel") or {}).get("expression")
        where = f"{path}.selectors[{k}].cel.expression"
        if not isinstance(expression, str) or not expression.strip():
            found.append(Problem(API_INVALID, where, "Required value"))
            continue
        if len(expression) > MAX_EXPRESSION:
            found.append(Problem(API_INVALID, where, f"Too long: may not be more than "
                                 f"{MAX_EXPRESSION} bytes"))  # fmt: skip
            continue
        try:
            compile_selector(expression)
        except SelectorError as error:
            found.append(Problem(CEL_INVALID, where, f"compilation failed: {error.message}"))


def _limit(found: list[Problem], path: str, items: Any, most: int) -> None:
    if not isinstance(items, list):
        found.append(Problem(API_INVALID, path, "Invalid value: must be a list"))
    elif len(items) > most:
        found.append(Problem(API_INVALID, path, f"Too many: {len(items)}: must have at most "
                             f"{most} items"))  # fmt: skip


def _label(found: list[Problem], path: str, value: Any) -> None:
    if not isinstance(value, str) or len(value) > 63 or not _DNS_LABEL.match(value):
        found.append(Problem(API_INVALID, path, f"Invalid value: {value!r}: a lowercase RFC "
                             "1123 label (at most 63 characters, a-z, 0-9 and '-')"))  # fmt: skip


def _subdomain(found: list[Problem], path: str, value: Any) -> None:
    if not isinstance(value, str) or len(value) > 253 or not _DNS_SUBDOMAIN.match(value):
        found.append(Problem(API_INVALID, path, f"Invalid value: {value!r}: a lowercase RFC "
                             "1123 subdomain (at most 253 characters)"))  # fmt: skip
