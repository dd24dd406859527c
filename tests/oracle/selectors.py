"""The oracle's reading of the CEL device selectors of a 1.33/1.34 DeviceTaintRule and of the
DeviceClass it names, straight from the raw objects.

The rule (k8s.io/dynamic-resource-allocation v0.33/v0.34 resourceslice/tracker/tracker.go,
`applyPatches`, which feeds kube-scheduler and the 1.33/1.34 eviction controller): a device is
selected when every CEL selector of the class and every one of the rule holds; an expression
that fails on the device (a missing attribute, a result that is not a bool) does not select
it; a class that does not exist selects nothing.

The CEL engine is cel-expr-python, called directly (none of the mirror's code): `device` is
`{driver, attributes: {domain: {name: value}}, capacity, allowMultipleAllocations}` with an
unqualified attribute name in the driver's domain (the API's CEL environment). Naive on
purpose: int, bool and string attributes only, no capacity; the oracle's scenarios read
nothing else.
"""

from __future__ import annotations

from typing import Any

from cel_expr_python import cel

from tests.oracle.reading import Raw

_ENV = cel.NewEnv(variables={"device": cel.Type.DYN})


def expressions(selectors: Any) -> list[str]:
    """The CEL expressions of a `selectors` list (DeviceSelector: only `cel` is defined)."""
    return [
        s["cel"]["expression"]
        for s in selectors or []
        if isinstance(s, dict) and isinstance(s.get("cel"), dict)
    ]


def _input(device: Raw, driver: str) -> dict[str, Any]:
    attributes: dict[str, dict[str, Any]] = {}
    for key, attr in (device.get("attributes") or {}).items():
        domain, sep, name = key.rpartition("/")
        domain = domain if sep else driver
        for member in ("string", "int", "bool"):
            if isinstance(attr, dict) and member in attr:
                attributes.setdefault(domain, {})[name] = attr[member]
    return {
        "driver": driver,
        "attributes": attributes,
        "capacity": {},
        "allowMultipleAllocations": bool(device.get("allowMultipleAllocations")),
    }


def holds(expression: str, device: Raw, driver: str) -> bool:
    """Whether the expression evaluates to true on the device (failures and non-bools: no)."""
    try:
        program = _ENV.compile(expression)
    except RuntimeError:
        return False
    result = program.eval(data={"device": _input(device, driver)})
    return result.value() is True
