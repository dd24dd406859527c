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


DEFECTS = {
    d.name: d
    for d in (
        Defect("taint-rules-not-mirrored", "DeviceTaintRules are not watched: their taints are missing from Device.taints"),
    )
}  # fmt: skip


def xfail(name: str) -> pytest.MarkDecorator:
    return pytest.mark.xfail(strict=True, reason=f"{name}: {DEFECTS[name].reason}")


def _device_key(text: str) -> tuple[str, str, str]:
    driver, pool, device = text.split("/", 2)
    return driver, pool, device


def _visible(machine: Any, kind: str) -> list[dict]:
    return [o for (k, _, _), o in machine.visible.items() if k == kind]


def _rule_taints(machine: Any, key: tuple[str, str, str]) -> set[tuple[str, str, str]]:
    found = set()
    for rule in _visible(machine, "DeviceTaintRule"):
        selector, taint = rule["spec"].get("deviceSelector"), rule["spec"]["taint"]
        if selector is not None and all(
            selector.get(k) in (None, v)
            for k, v in zip(("driver", "pool", "device"), key, strict=True)
        ):
            found.add((taint["key"], taint.get("value") or "", taint["effect"]))
    return found


def classify(m: Mismatch, *, truth: Any, machine: Any) -> str | None:
    """The known defect that explains `m`, or None."""
    if m.area.startswith("history."):
        return None
    if m.area in ("pool.unavailableDevices", "pool.availableDevices"):
        driver, pool = m.key.split("/", 1)
        rules = [
            (r["spec"].get("deviceSelector") or {}) for r in _visible(machine, "DeviceTaintRule")
        ]
        if any(r.get("driver") in (None, driver) and r.get("pool") in (None, pool) for r in rules):
            return "taint-rules-not-mirrored"
    if m.area == "device.taints":
        key = _device_key(m.key)
        if set(m.expected) - _rule_taints(machine, key) == set(m.actual):
            return "taint-rules-not-mirrored"
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
