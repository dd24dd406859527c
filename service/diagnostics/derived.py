"""Derived attributes (KEP-6080, alpha, DRADerivedAttributes): what kube-scheduler does with
them, for explainClaim and lint.

A request may define `derivedAttributes` (`exactly`, a `firstAvailable` subrequest, or the
flat v1beta1 request): each a `name` and a CEL `expression` over `device` (the environment of a
device selector), evaluated on every candidate device — after the request's selectors — to a
scalar (string, int, bool, semver) or a list of scalars; `constraints[].matchAttribute` and
`distinctAttribute` then read it as if the device published it (a derived name shadows a
published attribute of the same name). The KEP's rules kept here:

* "When pod scheduling encounters CEL runtime errors (such as looking up an attribute that
  isn't defined) for some devices, it will abort allocation and fail scheduling for the Pod",
  even when other devices or nodes evaluate: `failures(claim, …)` finds the first such error
  of each derived attribute among the request's candidates; a value of another type is an
  error too;
* a derived attribute only matters through a constraint naming it: one that no constraint
  applying to its request names is computed for nothing (`unused`);
* the allocator reads a derived value where a constraint names it (`tagged_value`), before
  the device's own attribute of that name, typed as a published attribute would be;
* at most `MAX_PER_REQUEST` (32) derived attributes per request, the limit lint holds a
  request to (the KEP's draft API at kubernetes/enhancements 436e2198 wrote `maxItems=8`;
  kube-apiserver enforces whichever its release has).

Promises: pure; each expression is compiled once (`service.diagnostics.cel_values.compile_value`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dra_mirror.service.diagnostics.candidates import alternatives, match
from dra_mirror.service.diagnostics.cel import SelectorError, SelectorEvalError
from dra_mirror.service.diagnostics.cel_library import SEMVER_KEY
from dra_mirror.service.diagnostics.cel_values import compile_value
from dra_mirror.service.model.records import (
    ClaimRecord,
    DerivedAttribute,
    DeviceClassRecord,
    DeviceEntry,
    Request,
)

__all__ = [
    "MAX_PER_REQUEST",
    "DerivedFailure",
    "derived_of",
    "failures",
    "tagged_value",
    "unused",
]

MAX_PER_REQUEST = 32  # derivedAttributes per request


@dataclass(frozen=True)
class DerivedFailure:
    """A derived attribute whose expression fails on a candidate device (scheduling aborts)."""

    request: str  # "req" or "req/sub"
    name: str
    expression: str
    device: str  # "driver/pool/device"; "" when the expression does not compile
    message: str


def derived_of(request: Request) -> list[tuple[str, tuple[DerivedAttribute, ...]]]:
    """(request or "req/sub", its derived attributes) for the request and each subrequest."""
    out = [(request.name, request.derived_attributes)] if request.derived_attributes else []
    out += [
        (f"{request.name}/{sub.name}", sub.derived_attributes)
        for sub in request.first_available
        if sub.derived_attributes
    ]
    return out


def failures(
    claim: ClaimRecord,
    classes: Mapping[str, DeviceClassRecord],
    devices: Sequence[DeviceEntry],
) -> list[DerivedFailure]:
    """The first evaluation error of each derived attribute of the claim, on the devices its
    request's class and selectors leave (the scheduler's candidates)."""
    found: list[DerivedFailure] = []
    for request in claim.requests:
        derived = dict(derived_of(request))
        if not derived:
            continue
        for alt in alternatives(request):
            attributes = derived.get(alt.result_name, ())
            if not attributes:
                continue
            candidates = match(alt, classes, devices).devices
            for attribute in attributes:
                failure = _first_failure(alt.result_name, attribute, candidates)
                if failure is not None:
                    found.append(failure)
    return found


def _first_failure(
    request: str, attribute: DerivedAttribute, candidates: Iterable[DeviceEntry]
) -> DerivedFailure | None:
    try:
        expression = compile_value(attribute.expression)
    except SelectorError as error:
        return DerivedFailure(request, attribute.name, attribute.expression, "", error.message)
    for entry in candidates:
        value = expression.value(entry.device, entry.key.driver)
        if isinstance(value, SelectorEvalError):
            key = entry.key
            device = f"{key.driver}/{key.pool}/{key.device}"
            return DerivedFailure(
                request, attribute.name, attribute.expression, device, value.message
            )
    return None


Constraint = tuple[tuple[str, ...], str | None, str | None]


def unused(request: str, derived: Iterable[str], constraints: Iterable[Constraint]) -> list[str]:
    """The derived names of `request` ("req" or "req/sub") that no constraint applying to it
    names (`constraints`: each (the requests it applies to, empty for all; matchAttribute;
    distinctAttribute)). A constraint naming "req" applies to each of its subrequests."""
    used: set[str] = set()
    for requests, match_attribute, distinct_attribute in constraints:
        if not requests or any(r in (request, request.split("/")[0]) for r in requests):
            used.update(n for n in (match_attribute, distinct_attribute) if n)
    return [name for name in derived if name not in used]


def _tag(value: Any) -> tuple[str, Any] | None:
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, int):
        return ("int", value)
    if isinstance(value, str):
        return ("string", value)
    if isinstance(value, dict) and SEMVER_KEY in value:
        return ("version", str(value[SEMVER_KEY]))
    return None


def tagged_value(attribute: DerivedAttribute, entry: DeviceEntry) -> tuple[str, Any] | None:
    """The derived value on one device as (type, value), typed as the allocator compares
    published attributes ("int", 3), lists as ("ints", (3, 4)); None when it fails."""
    try:
        value = compile_value(attribute.expression).value(entry.device, entry.key.driver)
    except SelectorError:
        return None
    if isinstance(value, SelectorEvalError):
        return None
    if isinstance(value, list):
        tags = [_tag(v) for v in value]
        if not tags or any(t is None for t in tags):
            return None
        kind = tags[0][0] if tags[0] is not None else ""
        return (f"{kind}s", tuple(t[1] for t in tags if t is not None))
    return _tag(value)


def derived_places(requests: Sequence[Mapping[str, Any]], base: str) -> list[tuple[str, str, Any]]:
    """Where each request of a claim spec defines derived attributes: (path, request name,
    the list as written) for `exactly`, the flat v1beta1 request and each subrequest."""
    out: list[tuple[str, str, Any]] = []
    for i, request in enumerate(requests):
        name = str(request.get("name"))
        path = f"{base}.devices.requests[{i}]"
        out.append(
            (f"{path}.exactly", name, (request.get("exactly") or {}).get("derivedAttributes"))
        )
        out.append((path, name, request.get("derivedAttributes")))  # v1beta1's flat request
        for j, sub in enumerate(request.get("firstAvailable") or []):
            sub_name = f"{name}/{sub.get('name')}"
            out.append((f"{path}.firstAvailable[{j}]", sub_name, sub.get("derivedAttributes")))
    return out
