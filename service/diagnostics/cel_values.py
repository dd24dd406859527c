"""CEL expressions whose value is read, not only whether it holds: a derived attribute
(KEP-6080) compiled in a device selector's environment and evaluated on one device to a scalar
(string, int, bool, semver) or a list of scalars; any other value is an evaluation error.
Compiled once per expression, cached as selectors are."""

from __future__ import annotations

from typing import Any

from dra_mirror.service.diagnostics import cel_library
from dra_mirror.service.diagnostics.cel import (
    _COMPILED_LIMIT,
    _ENV,
    MAX_EXPRESSION_LENGTH,
    SelectorError,
    SelectorEvalError,
    _register_domains,
    cel,
    clean,
    device_data,
)
from dra_mirror.service.model.records import Device

_SCALARS = ("INT", "UINT", "STRING", "BOOL")


def _scalar(kind: str, value: Any) -> bool:
    if kind in _SCALARS:
        return True
    # a semver is a map of one key (cel_library), the only map allowed
    return (
        kind.startswith("MAP")
        and isinstance(value, dict)
        and set(value) == {cel_library.SEMVER_KEY}
    )


class ValueExpression:
    """A compiled expression whose value is read, not only whether it holds: a derived
    attribute (KEP-6080) evaluates, in a selector's environment, to a scalar (string, int,
    bool, semver) or a list of scalars; any other value is an evaluation error."""

    __slots__ = ("_program", "expression")

    def __init__(self, expression: str, program: Any) -> None:
        self.expression = expression
        self._program = program

    def value(self, device: Device, driver: str) -> Any:
        """The value on one device, or the SelectorEvalError evaluation gave (returned)."""
        try:
            result = self._program.eval(data={"device": device_data(device, driver)})
        except RuntimeError as error:
            return SelectorEvalError(self.expression, clean(str(error)))
        kind, value = result.type().name(), result.value()
        if result.type() == cel.Type.ERROR:
            return SelectorEvalError(self.expression, clean(str(value)))
        if _scalar(kind, value):
            return value
        if kind.startswith("LIST") and all(_scalar(v.type().name(), v.value()) for v in value):
            return [v.value() for v in value]
        return SelectorEvalError(
            self.expression, f"must evaluate to a scalar or a list of scalars, got {kind}"
        )


_values: dict[str, ValueExpression | SelectorError] = {}


def compile_value(expression: str) -> ValueExpression:
    """The compiled expression (cached, as selectors are); raises SelectorError."""
    if len(expression) > MAX_EXPRESSION_LENGTH:
        raise SelectorError(
            expression[:200],
            f"expression is {len(expression)} characters long; the API allows at most "
            f"{MAX_EXPRESSION_LENGTH}",
        )
    hit = _values.get(expression)
    if hit is None:
        try:
            hit = ValueExpression(expression, _ENV.compile(expression))
            _register_domains(expression)
        except RuntimeError as e:
            hit = SelectorError(expression, clean(str(e)))
        if len(_values) >= _COMPILED_LIMIT:
            _values.clear()
        _values[expression] = hit
    if isinstance(hit, SelectorError):
        raise hit
    return hit
