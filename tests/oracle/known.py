"""The known disagreements between the mirror and the oracle: each a defect, named once.

Every `Defect` has a strict xfail test in `tests/oracle/test_defects.py` reproducing it in a
few objects (`xfail(NAME)` marks it), so the fix of the defect flips that test. The stateful
comparison (`tests.oracle.machine`) meets the same defects in random sequences; `classify`
says which defect explains one `Mismatch` — narrowly, from the situation that causes it, never
from the field alone — and the machine fails on any mismatch it cannot explain. Fixing a
defect: make its test pass, drop its `xfail` mark, and delete its entry and rule here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from tests.oracle.compare import Mismatch


@dataclass(frozen=True)
class Defect:
    name: str
    reason: str


# None known today: a new one is added here, with its rule in `classify` and its test.
DEFECTS: dict[str, Defect] = {}


def xfail(name: str) -> pytest.MarkDecorator:
    return pytest.mark.xfail(strict=True, reason=f"{name}: {DEFECTS[name].reason}")


def classify(m: Mismatch, *, truth: Any, machine: Any) -> str | None:
    """The known defect that explains `m`, or None (every mismatch is unknown today)."""
    return None


# Answers computed from others: known when the answers they are computed from are.
DERIVED = frozenset({"counts", "live.device"})


def derived(
    m: Mismatch, *, explained: list[tuple[Mismatch, str]], unknown: list[Mismatch]
) -> str | None:
    """A cluster's counts follow its device statuses; a subscriber's device status follows the
    graph's: such a mismatch is known when the same device (any device, for counts) is already
    wrong in the store for a known reason, and nothing there is wrong for an unknown one."""
    store = "memory" if m.store == "live" else m.store
    statuses = [(x, d) for x, d in explained if x.store == store and x.area == "device.status"]
    if m.area == "live.device":
        statuses = [(x, d) for x, d in statuses if x.key == m.key]
    if not statuses or any(x.store == store and x.area == "device.status" for x in unknown):
        return None
    return statuses[0][1]


def explain(
    found: list[Mismatch], *, truth: Any, machine: Any
) -> tuple[list[Mismatch], list[tuple[Mismatch, str]]]:
    """(the mismatches no known defect explains, the others with their defect)."""
    unknown: list[Mismatch] = []
    explained: list[tuple[Mismatch, str]] = []
    for mismatch in found:
        if mismatch.area in DERIVED:
            continue
        defect = classify(mismatch, truth=truth, machine=machine)
        if defect is None:
            unknown.append(mismatch)
        else:
            explained.append((mismatch, defect))
    for mismatch in found:
        if mismatch.area in DERIVED:
            defect = derived(mismatch, explained=explained, unknown=unknown)
            if defect is None:
                unknown.append(mismatch)
            else:
                explained.append((mismatch, defect))
    return unknown, explained
