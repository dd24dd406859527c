"""The errors of CEL device selectors (service.diagnostics.cel), one boundary:

    SelectorError             the expression does not compile (syntax, unknown function,
     │                        a result that is not bool)
     ├── SelectorEvalError    it compiled, but failed on one device (missing attribute, bad
     │                        quantity, type mismatch, over CEL's evaluation budget: `budget`);
     │                        callers report it, never "no match"
     └── SelectorTooCostly    `Selector.select(…, stop_over_budget=True)`: it went over CEL's
                              evaluation budget on a device, and no other was evaluated (a
                              client's selector, findDevices: refused, not run on every device)

Messages are bounded (a compiler message repeats the source line, which a client can make a
megabyte long); `clean` drops cel-cpp's status code suffix. Pure.
"""

from __future__ import annotations

import re


class SelectorError(Exception):
    """A selector that does not compile; `message` is the CEL compiler's text, bounded: the
    compiler repeats the offending source line, which a client (or a cluster object) can make
    a megabyte long, so each line is cut at 200 characters and the text at 8 lines."""

    def __init__(self, expression: str, message: str) -> None:
        self.expression = expression
        self.message = _bounded(message)
        super().__init__(f"{self.message} (selector: {_bounded(expression, lines=1)})")


def _bounded(text: str, *, width: int = 200, lines: int = 8) -> str:
    kept = [line if len(line) <= width else line[:width] + "…" for line in text.splitlines()]
    return "\n".join(kept[:lines] + (["…"] if len(kept) > lines else []))


class SelectorEvalError(SelectorError):
    """A selector that failed to evaluate on a device; `budget`: it went over CEL's evaluation
    budget (cel-cpp's iteration budget for comprehensions)."""

    def __init__(self, expression: str, message: str, *, budget: bool = False) -> None:
        super().__init__(expression, message)
        self.budget = budget


class SelectorTooCostly(SelectorError):
    """A selector over CEL's evaluation budget, stopped at the first device (see `select`)."""


def raise_if_over_budget(answer: SelectorEvalError, stop: bool) -> None:
    if stop and answer.budget:
        raise SelectorTooCostly(answer.expression, answer.message)


def clean(message: str) -> str:
    # cel-cpp appends a status code ("[INVALID_ARGUMENT]") to compiler messages.
    return re.sub(r"\s*\[[A-Z_]+\]\s*$", "", message.strip())
