"""The Kubernetes CEL extensions a device selector may call: Quantity and semver.

The API server's CEL environment for `CELDeviceSelector` (k8s.io/apiserver/pkg/cel/library)
adds two opaque types on top of standard CEL:

* **Quantity** — `quantity("16Gi")`, `isQuantity(s)`, and members `compareTo`,
  `isGreaterThan`, `isLessThan`, `add`, `sub` (a Quantity or an int), `asInteger`,
  `isInteger`, `asApproximateFloat`, `sign`. Device capacities are Quantities.
* **Semver** — `semver("1.2.3")` (`semver(s, true)` normalizes `v1.2` to `1.2.0`),
  `isSemver(s[, normalize])`, and members `compareTo`, `isGreaterThan`, `isLessThan`,
  `major`, `minor`, `patch`. Device attributes of type `version` are Semvers.
* **includes** — `attr.includes(v)` on any attribute: an element of a list attribute (1.36
  `ints`, `strings`, `bools`, `versions`) equals `v`, or a scalar attribute equals it
  (`device.attributes["resource.kubernetes.io"].numaNode.includes(0)` reads `0` and `[0, 1]`).

cel-expr-python (cel-cpp) has no Python-defined opaque types, so each value travels as a
one-entry map whose key cannot be written as a CEL field name: `{"k8s.quantity": "<exact
fraction>"}` and `{"k8s.semver": "<canonical version>"}`. Both strings are canonical, so CEL's
own `==` between two Quantities (or two Semvers) is equality of value, as in Kubernetes
(`quantity("1Gi") == quantity("1024Mi")`). Every member function checks the kind of both
operands; mixing them is an evaluation error, never a silent `false`.

Promises: pure functions, no state; `FUNCTIONS` is the list of declarations `cel.py` hands to
its environment.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from fractions import Fraction
from functools import lru_cache
from typing import Any

from cel_expr_python import cel

from dra_mirror.service.model.quantity import parse_quantity

QUANTITY_KEY = "k8s.quantity"
SEMVER_KEY = "k8s.semver"

_T = cel.Type
_OPAQUE = _T.Map(_T.STRING, _T.DYN)

# Semantic Versioning 2.0.0, as github.com/blang/semver parses it (no leading "v", no
# leading zeros in numeric identifiers).
_SEMVER = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*)(?:\.(?:0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*))*))?"
    r"(?:\+([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?$"
)


@lru_cache(maxsize=4096)
def quantity_value(text: str) -> dict[str, str]:
    """A Kubernetes quantity string as the CEL value selectors see (memoized: devices repeat
    the same few quantities; callers never mutate the map)."""
    return {QUANTITY_KEY: str(parse_quantity(text))}


@lru_cache(maxsize=4096)
def semver_value(text: str, *, normalize: bool = False) -> dict[str, str]:
    """A semantic version string as the CEL value selectors see (build metadata dropped:
    semver ordering and equality ignore it)."""
    major, minor, patch, pre = _parse_semver(text, normalize=normalize)
    canonical = f"{major}.{minor}.{patch}" + (f"-{pre}" if pre else "")
    return {SEMVER_KEY: canonical}


def _parse_semver(text: str, *, normalize: bool) -> tuple[int, int, int, str]:
    if normalize:
        # Kubernetes' normalization: strip a leading "v", fill missing minor/patch with 0.
        text = text.removeprefix("v")
        core, sep, rest = _split_core(text)
        parts = core.split(".")
        while len(parts) < 3:
            parts.append("0")
        parts = [p.lstrip("0") or "0" for p in parts]
        text = ".".join(parts) + sep + rest
    match = _SEMVER.match(text)
    if match is None:
        raise ValueError(f"invalid semver: {text!r}")
    return int(match[1]), int(match[2]), int(match[3]), match[4] or ""


def _split_core(text: str) -> tuple[str, str, str]:
    for i, ch in enumerate(text):
        if ch in "-+":
            return text[:i], ch, text[i + 1 :]
    return text, "", ""


@lru_cache(maxsize=4096)
def _fraction(canonical: str) -> Fraction:
    return Fraction(canonical)


@lru_cache(maxsize=4096)
def _semver_order(canonical: str) -> tuple[Any, ...]:
    major, minor, patch, pre = _parse_semver(canonical, normalize=False)
    if not pre:
        # A release sorts after every pre-release of the same version.
        return (major, minor, patch, 1, ())
    ids = tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in pre.split("."))
    return (major, minor, patch, 0, ids)


def _kind(value: Any) -> str:
    if isinstance(value, dict) and len(value) == 1:
        if QUANTITY_KEY in value:
            return QUANTITY_KEY
        if SEMVER_KEY in value:
            return SEMVER_KEY
    raise ValueError("not a Quantity or Semver value")


def _quantity(value: Any) -> Fraction:
    if _kind(value) != QUANTITY_KEY:
        raise ValueError("expected a Quantity")
    return _fraction(value[QUANTITY_KEY])


def _compare(a: Any, b: Any) -> int:
    kind = _kind(a)
    if _kind(b) != kind:
        raise ValueError("cannot compare a Quantity with a Semver")
    if kind == QUANTITY_KEY:
        q, r = _fraction(a[kind]), _fraction(b[kind])
        return (q > r) - (q < r)
    x, y = _semver_order(a[kind]), _semver_order(b[kind])
    return (x > y) - (x < y)


def _semver_part(index: int) -> Callable[[Any], int]:
    def part(value: Any) -> int:
        if _kind(value) != SEMVER_KEY:
            raise ValueError("expected a Semver")
        return int(_parse_semver(value[SEMVER_KEY], normalize=False)[index])

    return part


def _as_integer(value: Any) -> int:
    q = _quantity(value)
    if q.denominator != 1 or not -(2**63) <= q.numerator < 2**63:
        raise ValueError("cannot convert value to integer")
    return q.numerator


def _is_valid(parse: Callable[..., object]) -> Callable[..., bool]:
    def check(text: str, *args: Any) -> bool:
        try:
            parse(text, *args)
        except ValueError:
            return False
        return True

    return check


def _plus(sign: int) -> Callable[[Any, Any], dict[str, str]]:
    def arith(a: Any, b: Any) -> dict[str, str]:
        other = Fraction(b) if isinstance(b, int) else _quantity(b)
        return {QUANTITY_KEY: str(_quantity(a) + sign * other)}

    return arith


def _overload(oid: str, ret: Any, params: list[Any], impl: Any, *, member: bool = False) -> Any:
    return cel.Overload(oid, ret, params, is_member=member, impl=impl)


def _same(a: Any, b: Any) -> bool:
    """CEL equality of two attribute values: of one type (a bool is no int) and equal."""
    return type(a) is type(b) and a == b


def _includes(value: Any, wanted: Any) -> bool:
    """`attr.includes(v)` (KEP-5491's type-agnostic helper for list attributes): a list
    attribute includes `v` when one of its elements equals it; a scalar attribute when it
    equals `v` — so one selector reads both forms, as a driver moving from `int` to `ints`
    (`resource.kubernetes.io/numaNode`, KEP-6072) publishes either."""
    if isinstance(value, list):
        return any(_same(element, wanted) for element in value)
    return _same(value, wanted)


def _function(name: str, *overloads: Any) -> Any:
    return cel.FunctionDecl(name, list(overloads))


FUNCTIONS = [
    _function("quantity", _overload("quantity_string", _OPAQUE, [_T.STRING], quantity_value)),
    _function(
        "isQuantity",
        _overload("is_quantity_string", _T.BOOL, [_T.STRING], _is_valid(quantity_value)),
    ),
    _function(
        "semver",
        _overload("semver_string", _OPAQUE, [_T.STRING], semver_value),
        _overload(
            "semver_string_bool",
            _OPAQUE,
            [_T.STRING, _T.BOOL],
            lambda s, n: semver_value(s, normalize=n),
        ),
    ),
    _function(
        "isSemver",
        _overload("is_semver_string", _T.BOOL, [_T.STRING], _is_valid(semver_value)),
        _overload(
            "is_semver_string_bool",
            _T.BOOL,
            [_T.STRING, _T.BOOL],
            _is_valid(lambda s, n: semver_value(s, normalize=n)),
        ),
    ),
    _function(
        "compareTo", _overload("k8s_compare_to", _T.INT, [_OPAQUE, _OPAQUE], _compare, member=True)
    ),
    _function(
        "isGreaterThan",
        _overload(
            "k8s_is_greater_than",
            _T.BOOL,
            [_OPAQUE, _OPAQUE],
            lambda a, b: _compare(a, b) > 0,
            member=True,
        ),
    ),
    _function(
        "isLessThan",
        _overload(
            "k8s_is_less_than",
            _T.BOOL,
            [_OPAQUE, _OPAQUE],
            lambda a, b: _compare(a, b) < 0,
            member=True,
        ),
    ),
    _function(
        "add",
        _overload("quantity_add", _OPAQUE, [_OPAQUE, _OPAQUE], _plus(1), member=True),
        _overload("quantity_add_int", _OPAQUE, [_OPAQUE, _T.INT], _plus(1), member=True),
    ),
    _function(
        "sub",
        _overload("quantity_sub", _OPAQUE, [_OPAQUE, _OPAQUE], _plus(-1), member=True),
        _overload("quantity_sub_int", _OPAQUE, [_OPAQUE, _T.INT], _plus(-1), member=True),
    ),
    _function(
        "asInteger", _overload("quantity_as_integer", _T.INT, [_OPAQUE], _as_integer, member=True)
    ),
    _function(
        "isInteger",
        _overload(
            "quantity_is_integer",
            _T.BOOL,
            [_OPAQUE],
            lambda q: _quantity(q).denominator == 1,
            member=True,
        ),
    ),
    _function(
        "asApproximateFloat",
        _overload(
            "quantity_as_float", _T.DOUBLE, [_OPAQUE], lambda q: float(_quantity(q)), member=True
        ),
    ),
    _function(
        "sign",
        _overload(
            "quantity_sign",
            _T.INT,
            [_OPAQUE],
            lambda q: (_quantity(q) > 0) - (_quantity(q) < 0),
            member=True,
        ),
    ),
    _function("major", _overload("semver_major", _T.INT, [_OPAQUE], _semver_part(0), member=True)),
    _function("minor", _overload("semver_minor", _T.INT, [_OPAQUE], _semver_part(1), member=True)),
    _function("patch", _overload("semver_patch", _T.INT, [_OPAQUE], _semver_part(2), member=True)),
    _function(
        "includes",
        # one overload per value type: the runtime dispatches on concrete types only
        *(
            _overload(
                f"dra_includes_{name}{'_list' if listed else ''}",
                _T.BOOL,
                [_T.List(_T.DYN) if listed else kind, kind],
                _includes,
                member=True,
            )
            for name, kind in (
                ("int", _T.INT),
                ("bool", _T.BOOL),
                ("string", _T.STRING),
                ("semver", _OPAQUE),
            )
            for listed in (False, True)
        ),
    ),
]
