"""Device selectors (CEL) evaluated the way the Kubernetes API server and kube-scheduler do.

A DeviceClass selector or a request selector is a CEL expression over one variable, `device`:

* `device.driver` — the driver name of the slice the device is in;
* `device.attributes["<domain>"].<id>` — typed values: int, bool, string, version (a Semver,
  compared with `compareTo`/`isGreaterThan`/…), and the 1.36 list forms as lists;
* `device.capacity["<domain>"].<id>` — Quantities (`compareTo(quantity("16Gi")) >= 0`);
* `device.allowMultipleAllocations` — bool.

Kubernetes semantics kept here: an unknown domain is an empty map (so
`has(device.attributes["x.io"].a)` is false) while a missing attribute is an evaluation error;
the result must be a bool; the `strings` extension (`lowerAscii`, `split`, …) and `cel.bind`
are available, as are `quantity`/`semver` (see `cel_library`).

Errors (`SelectorError`, `SelectorEvalError`, `SelectorTooCostly`) are `cel_errors`'s.

A derived attribute's expression (KEP-6080) is compiled by `compile_value` in the same
environment; its value must be a scalar or a list of scalars.

Promises: `compile_selector` compiles each expression text once per process (failures are
cached too); `Selector.matches` is pure and re-entrant. The CEL engine is cel-expr-python
(Google's cel-cpp); docs/cel.md records why, with figures.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from cel_expr_python import cel
from cel_expr_python.ext.ext_bindings import ExtBindings
from cel_expr_python.ext.ext_strings import ExtStrings

from dra_mirror.service.diagnostics import cel_library
from dra_mirror.service.diagnostics.cel_errors import (
    SelectorError,
    SelectorEvalError,
    SelectorTooCostly,
    clean,
    raise_if_over_budget,
)
from dra_mirror.service.model.records import Device, DeviceEntry

__all__ = [
    "Selector",
    "SelectorError",
    "SelectorEvalError",
    "SelectorTooCostly",
    "compile_selector",
    "device_data",
    "rule_selector_matches",
]


_ENV = cel.NewEnv(
    variables={"device": cel.Type.DYN},
    extensions=[ExtStrings(), ExtBindings()],
    functions=cel_library.FUNCTIONS,
)

# Domains that expressions index `device.attributes` / `device.capacity` with. Kubernetes
# answers an unknown domain with an empty map; cel-cpp would fail on the missing key, so every
# device's maps carry an empty entry for each such domain it lacks.
_DOMAIN_INDEX = re.compile(r"""(?:attributes|capacity)\s*\[\s*(['"])(.*?)\1\s*\]""")
_referenced_domains: set[str] = set()
_domains_generation = 0

# Per-device CEL input, built once. Keyed by id(); the entry holds the Device itself, so the
# id cannot be reused while the entry lives, and `is` confirms the hit.
_DATA_CACHE_LIMIT = 500_000
# Inputs are larger (a nested dict per device) and needed only on a miss of the answer
# memories below, so fewer are kept.
_INPUT_CACHE_LIMIT = 50_000
_data_cache: dict[int, tuple[Device, str, int, dict[str, Any]]] = {}


# `device.attributes["d"].name` / `device.capacity["d"].name` with literal domain and name.
_REFERENCE = re.compile(
    r"""\bdevice\s*\.\s*(attributes|capacity)\s*\[\s*(['"])([^'"\\]*)\2\s*\]"""
    r"""\s*\.\s*([A-Za-z_][A-Za-z0-9_]*)\b(?!\s*\()"""  # a field, not a method of the map
)
_PLAIN = re.compile(r"\bdevice\s*\.\s*(?:driver|allowMultipleAllocations)\b")
_MISSING = object()


def _projection(expression: str) -> tuple[tuple[str, str, str], ...] | None:
    """The (kind, domain, name) values an expression can read, when it reads the device only
    through literal references; None when it may read more (a bare `device.attributes`, a
    `cel.bind` of a domain map, the word `device` anywhere else)."""
    rest = _PLAIN.sub(" ", _REFERENCE.sub(" ", expression))
    if re.search(r"\bdevice\b", rest):
        return None
    return tuple(sorted({(m[0], m[2], m[3]) for m in _REFERENCE.findall(expression)}))


class Selector:
    """One compiled selector, reused for every device.

    Answers are remembered two ways. When the expression reads the device only through literal
    references (`device.driver`, `device.attributes["d"].name`, …) — every selector in the
    fixtures does — the answer is a function of those few values, so it is remembered per
    distinct tuple of them: 40,000 GPUs of three kinds cost three evaluations. Otherwise it is
    remembered per Device object (records are immutable; a new version is a new object)."""

    __slots__ = ("_by_values", "_program", "_reads", "_results", "expression")

    def __init__(self, expression: str, program: Any) -> None:
        self.expression = expression
        self._program = program
        projection = _projection(expression)
        # (reads an attribute?, qualified key, domain, name) per value the expression reads.
        self._reads = (
            None
            if projection is None
            else tuple((k == "attributes", f"{d}/{n}", d, n) for k, d, n in projection)
        )
        self._by_values: dict[tuple[Any, ...], bool | SelectorEvalError] = {}
        # Per Device object. A selector's answers never depend on domains registered later:
        # the domains it indexes are registered when it is compiled, before it evaluates.
        self._results: dict[int, tuple[Device, str, bool | SelectorEvalError]] = {}

    def matches(self, device: Device, driver: str) -> bool:
        """Whether the device passes; raises SelectorEvalError when evaluation fails."""
        answer = self.answer(device, driver)
        if answer is True or answer is False:
            return answer
        raise answer

    def answer(self, device: Device, driver: str) -> bool | SelectorEvalError:
        """The remembered answer for a device: True, False, or the evaluation error."""
        hit = self._results.get(id(device))
        if hit is not None and hit[0] is device and hit[1] == driver:
            return hit[2]
        if self._reads is not None:
            answer = self._by_projection(device, driver)
        else:
            answer = self.evaluate(device, driver)
        if len(self._results) >= _DATA_CACHE_LIMIT:
            self._results.clear()
        self._results[id(device)] = (device, driver, answer)
        return answer

    def select(
        self, entries: Iterable[DeviceEntry], *, stop_over_budget: bool = False
    ) -> tuple[list[DeviceEntry], list[tuple[DeviceEntry, SelectorEvalError]]]:
        """The entries that pass, and those whose evaluation failed (with the error).
        `stop_over_budget`: the first evaluation over CEL's budget raises `SelectorTooCostly`
        instead of going on to the next device (each would cost the whole budget again)."""
        stop = stop_over_budget
        if self._reads is not None:
            return self._select_by_values(entries, stop)
        passing: list[DeviceEntry] = []
        failed: list[tuple[DeviceEntry, SelectorEvalError]] = []
        results = self._results
        for entry in entries:
            device = entry.device
            driver = entry.key.driver
            hit = results.get(id(device))
            if hit is not None and hit[0] is device and hit[1] == driver:
                answer = hit[2]
            else:
                answer = self.answer(device, driver)
            if answer is True:
                passing.append(entry)
            elif answer is not False:
                raise_if_over_budget(answer, stop)
                failed.append((entry, answer))
        return passing, failed

    def _select_by_values(
        self, entries: Iterable[DeviceEntry], stop: bool = False
    ) -> tuple[list[DeviceEntry], list[tuple[DeviceEntry, SelectorEvalError]]]:
        """`select` for an expression that reads only literal references: each device's
        projection is read inline (no call, no per-device memory to fill: a first pass over
        400,000 devices costs what a repeated one does). An attribute is keyed by its record
        (frozen: equal records are equal type and value), falling back to the `_by_projection`
        key when its value is a list (not hashable)."""
        passing: list[DeviceEntry] = []
        failed: list[tuple[DeviceEntry, SelectorEvalError]] = []
        keep = passing.append
        by_values = self._by_values
        reads = self._reads or ()
        missing = _MISSING
        for entry in entries:
            device = entry.device
            driver = entry.key.driver
            key: list[Any] = [driver, device.shareable]
            for is_attribute, qualified, domain, name in reads:
                if is_attribute:
                    values: Any = device.attributes
                    value = values.get(qualified, missing)
                    if value is missing and domain == driver:
                        value = values.get(name, missing)
                    key.append(value)
                else:
                    values = device.capacity
                    value = values.get(qualified, missing)
                    if value is missing and domain == driver:
                        value = values.get(name, missing)
                    key.append(value if value is missing else value.value)
            projected = tuple(key)
            try:
                answer = by_values.get(projected)
            except TypeError:  # a list-valued attribute
                answer = self._by_projection(device, driver)
            else:
                if answer is None:
                    answer = self._by_projection(device, driver)
                    by_values[projected] = answer
            if answer is True:
                keep(entry)
            elif answer is not False:
                raise_if_over_budget(answer, stop)
                failed.append((entry, answer))
        return passing, failed

    def _by_projection(self, device: Device, driver: str) -> bool | SelectorEvalError:
        key: list[Any] = [driver, device.shareable]
        for is_attribute, qualified, domain, name in self._reads or ():
            values = device.attributes if is_attribute else device.capacity
            value: Any = values.get(qualified, _MISSING)
            if value is _MISSING and domain == driver:
                value = values.get(name, _MISSING)
            if value is _MISSING:
                key.append(_MISSING)
            elif is_attribute:
                raw = value.value
                key.append((value.type, tuple(raw) if isinstance(raw, list) else raw))
            else:
                key.append(value.value)
        projected = tuple(key)
        answer = self._by_values.get(projected)
        if answer is None:
            answer = self.evaluate(device, driver)
            if len(self._by_values) >= _DATA_CACHE_LIMIT:
                self._by_values.clear()
            self._by_values[projected] = answer
        return answer

    def evaluate(self, device: Device, driver: str) -> bool | SelectorEvalError:
        """Evaluate without the per-device memory (returns the error instead of raising)."""
        try:
            result = self._program.eval(data={"device": device_data(device, driver)})
        except RuntimeError as error:  # cel-cpp stopped the evaluation (its budget, mostly)
            message = clean(str(error))
            if "budget" in message.lower():
                return SelectorEvalError(
                    self.expression, "the selector is over CEL's evaluation budget (its "
                    "comprehensions iterate too much); Kubernetes would refuse its cost too",
                    budget=True,
                )  # fmt: skip
            return SelectorEvalError(self.expression, message)
        value = result.value()
        if value is True or value is False:
            return value
        if result.type() == cel.Type.ERROR:
            return SelectorEvalError(self.expression, clean(str(value)))
        return SelectorEvalError(
            self.expression, f"selector must evaluate to bool, got {result.type().name()}"
        )

    def __repr__(self) -> str:
        return f"Selector({self.expression!r})"


_COMPILED_LIMIT = 10_000
_compiled: dict[str, Selector | SelectorError] = {}
# resource.k8s.io validates selector expressions to at most 10 Ki characters
# (CELSelectorExpressionMaxLength): no DeviceClass or claim carries a longer one, and a
# client's findDevices selector is held to the same limit before anything compiles it.
MAX_EXPRESSION_LENGTH = 10 * 1024


def compile_selector(expression: str) -> Selector:
    """The compiled selector for an expression (cached); raises SelectorError."""
    if len(expression) > MAX_EXPRESSION_LENGTH:  # refused uncompiled, and not cached
        raise SelectorError(
            expression[:200],
            f"selector is {len(expression)} characters long; the API allows at most "
            f"{MAX_EXPRESSION_LENGTH}",
        )
    hit = _compiled.get(expression)
    if hit is None:
        hit = _compile(expression)
        if len(_compiled) >= _COMPILED_LIMIT:
            # Clients send selectors too (findDevices): keep the cache bounded.
            _compiled.clear()
        _compiled[expression] = hit
    if isinstance(hit, SelectorError):
        raise hit
    return hit


def _compile(expression: str) -> Selector | SelectorError:
    try:
        program = _ENV.compile(expression)
    except RuntimeError as e:
        return SelectorError(expression, clean(str(e)))
    returns = program.return_type()
    if returns not in (cel.Type.BOOL, cel.Type.DYN):
        return SelectorError(expression, f"selector must evaluate to bool, not {returns.name()}")
    _register_domains(expression)
    return Selector(expression, program)


def _register_domains(expression: str) -> None:
    """Give every device an empty map for each domain `expression` indexes (see _DOMAIN_INDEX)."""
    global _domains_generation
    domains = {m[2] for m in _DOMAIN_INDEX.finditer(expression)} - _referenced_domains
    if domains:
        _referenced_domains.update(domains)
        _domains_generation += 1


def rule_selector_matches(expression: str, device: Device, driver: str) -> bool:
    """A DeviceTaintRule's selector (or its DeviceClass's) on one device, as the 1.33/1.34
    rule tracker treats it (service.model.taint_rules.SelectorMatcher): True only when it
    evaluates to true; one that does not compile, fails or is not a bool selects nothing."""
    try:
        selector = compile_selector(expression)
    except SelectorError:
        return False
    return selector.answer(device, driver) is True


def device_data(device: Device, driver: str) -> dict[str, Any]:
    """The `device` variable for one device, as the CEL environment sees it (cached)."""
    hit = _data_cache.get(id(device))
    if hit is not None and hit[0] is device and hit[1] == driver and hit[2] == _domains_generation:
        return hit[3]
    data = _build(device, driver)
    if len(_data_cache) >= _INPUT_CACHE_LIMIT:
        _data_cache.clear()
    _data_cache[id(device)] = (device, driver, _domains_generation, data)
    return data


def _build(device: Device, driver: str) -> dict[str, Any]:
    attributes: dict[str, dict[str, Any]] = {d: {} for d in _referenced_domains}
    for key, attribute in device.attributes.items():
        domain, name = _split(key, driver)
        attributes.setdefault(domain, {})[name] = _attribute_value(attribute.type, attribute.value)
    capacity: dict[str, dict[str, Any]] = {d: {} for d in _referenced_domains}
    for key, cap in device.capacity.items():
        domain, name = _split(key, driver)
        try:
            value: Any = cel_library.quantity_value(cap.value)
        except ValueError:
            continue  # the API server rejects such a slice; nothing to compare against
        capacity.setdefault(domain, {})[name] = value
    return {
        "driver": driver,
        "attributes": attributes,
        "capacity": capacity,
        "allowMultipleAllocations": device.shareable,
    }


def _split(key: str, driver: str) -> tuple[str, str]:
    domain, sep, name = key.rpartition("/")
    return (domain, name) if sep else (driver, key)


def _attribute_value(kind: str, value: Any) -> Any:
    if kind == "version":
        return _version(value)
    if kind == "versions":
        return [_version(v) for v in value]
    if kind in ("ints", "bools", "strings"):
        return list(value)
    return value


def _version(text: str) -> Any:
    try:
        return cel_library.semver_value(text)
    except ValueError:
        return text  # invalid versions never pass API validation; keep the text visible


# What a derived attribute may evaluate to (KEP-6080): a scalar, or a list of scalars.
