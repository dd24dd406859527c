"""Alpha fields the oracle reads straight from the raw objects, to check that the mirror carries
them as written (it acts on none of them yet):

* DeviceRequest `derivedAttributes` (KEP-6080): "a set of virtual attributes computed via CEL
  expressions for each candidate device", on `exactly` (v1, v1beta2) or on the flat request
  (v1beta1), and on each `firstAvailable` subrequest;
* DeviceCounterConsumption `compatibilityGroups` (KEP-5963): "a driver-declared list of opaque
  group names for this counter-set consumption"; unset, null and empty all mean no groups.
"""

from __future__ import annotations

from tests.oracle import reading
from tests.oracle.reading import Raw

Derived = tuple[tuple[str, str, str], ...]  # (request or request/subrequest, name, expression)


def derived_attributes(claim: Raw) -> Derived:
    found = []
    for request in ((claim.get("spec") or {}).get("devices") or {}).get("requests") or []:
        name = request.get("name") or ""
        exact = request.get("exactly") or request
        for d in exact.get("derivedAttributes") or []:
            found.append((name, d.get("name") or "", d.get("expression") or ""))
        for sub in request.get("firstAvailable") or []:
            for d in sub.get("derivedAttributes") or []:
                found.append((f"{name}/{sub.get('name')}", d.get("name") or "", d.get("expression") or ""))  # fmt: skip
    return tuple(sorted(found))


def compatibility_groups(device: Raw) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """(counter set, groups) of each consumption that declares groups, by counter set."""
    return tuple(
        sorted(
            (c.get("counterSet") or "", tuple(c.get("compatibilityGroups") or ()))
            for c in device.get("consumesCounters") or []
            if c.get("compatibilityGroups")
        )
    )


def claims_derived(claims: list[Raw]) -> dict[tuple[str, str], Derived]:
    return {
        (reading.meta(c).get("namespace") or "", reading.meta(c).get("name") or ""): derived_attributes(c)
        for c in claims
    }  # fmt: skip
