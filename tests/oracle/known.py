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

from tests.oracle import reading
from tests.oracle.compare import Mismatch


@dataclass(frozen=True)
class Defect:
    name: str
    reason: str


DEFECTS = {
    d.name: d
    for d in (
        Defect("held-but-unpublished", "a device held by a claim but published by no slice: whoHolds by driver/pool/device answers nothing, and following the allocation to its `slice` fails the claim's whole allocation"),
        Defect("published-not-served", "Device.published (API.md) is not in the graph"),
        Defect("pool-status-not-served", "pool status as KEP-5677 counts it is not in the graph"),
        Defect("taint-rules-not-mirrored", "DeviceTaintRules are not watched: their taints are missing from Device.taints"),
        Defect("capacity-names-unqualified", "remainingCapacity subtracts nothing when consumedCapacity names a capacity without its domain (device capacities are qualified, consumedCapacity keys are not)"),
        Defect("admin-access-consumes", "an adminAccess allocation makes its device HELD and takes its capacity and counters, though admin-access claims ignore ordinary claims and allocations"),
        Defect("history-identity-before-slice", "an allocation folded before the slice of its device is recorded without the device's uuid: whoHeld(uuid) and deviceHistory miss it"),
    )
}  # fmt: skip


def xfail(name: str) -> pytest.MarkDecorator:
    return pytest.mark.xfail(strict=True, reason=f"{name}: {DEFECTS[name].reason}")


def _device_key(text: str) -> tuple[str, str, str]:
    driver, pool, device = text.split("/", 2)
    return driver, pool, device


def _visible(machine: Any, kind: str) -> list[dict]:
    return [o for (k, _, _), o in machine.visible.items() if k == kind]


def _holds(machine: Any, key: tuple[str, str, str]) -> list[dict]:
    return [
        r for claim in _visible(machine, "ResourceClaim") for r in reading.results(claim)
        if (r.get("driver"), r.get("pool"), r.get("device")) == key
    ]  # fmt: skip


def _unpublished(truth: Any, key: tuple[str, str, str]) -> bool:
    device = truth.devices.get(key)
    return device is not None and not device.published


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


def _before_slice(machine: Any, interval: Any) -> bool:
    """The holding may have been folded before the slice of its device: the device was not
    published when it began, or it began at a step that listed claims before slices."""
    return not interval.published_at_start or interval.since in machine.claims_first


def _history(m: Mismatch, machine: Any) -> str | None:
    if m.area == "history.intervals":
        intervals = [
            i
            for i in machine.timeline.intervals()
            if "/".join((i.holding.driver, i.holding.pool, i.holding.device)) == m.key
        ]
        if any(_before_slice(machine, i) for i in intervals):
            return "history-identity-before-slice"
        return None
    if m.area == "history.whoHeld":
        uuid, instant = m.key.split("@")
        key = next(k for k, u in machine.timeline.uuids.items() if u == uuid)
        intervals = [
            i for i in machine.timeline.intervals()
            if (i.holding.driver, i.holding.pool, i.holding.device) == key and i.since <= instant and (i.until is None or instant < i.until)
        ]  # fmt: skip
        if any(_before_slice(machine, i) for i in intervals):
            return "history-identity-before-slice"
    return None


def classify(m: Mismatch, *, truth: Any, machine: Any) -> str | None:
    """The known defect that explains `m`, or None."""
    if m.area.startswith("history."):
        return _history(m, machine)
    errors = (
        " ".join(m.actual)
        if isinstance(m.actual, list) and all(isinstance(a, str) for a in m.actual)
        else ""
    )
    if m.area == "device.published" and "Cannot query field 'published'" in errors:
        return "published-not-served"
    if m.area == "pools" and "Cannot query field 'resourcePools'" in errors:
        return "pool-status-not-served"
    if m.area == "whoHolds" and _unpublished(truth, _device_key(m.key)) and m.actual == []:
        return "held-but-unpublished"
    # the resolver's "slice … is gone" LookupError, masked by the error policy as ours
    dangling = "is gone" in errors or "internal error" in errors
    if m.area == "claim.slices" and any(s is None for *_, s in m.expected) and dangling:
        return "held-but-unpublished"
    if m.area == "device.taints":
        key = _device_key(m.key)
        if set(m.expected) - _rule_taints(machine, key) == set(m.actual):
            return "taint-rules-not-mirrored"
    if m.area in ("device.status", "device.remaining", "device.holders"):
        key = _device_key(m.key)
        holds = _holds(machine, key)
        if m.area == "device.remaining" and any(
            "/" not in name for r in holds for name in r.get("consumedCapacity") or {}
        ):
            return "capacity-names-unqualified"
        if any(r.get("adminAccess") for r in holds):
            return "admin-access-consumes"
        if m.area == "device.status" and (m.expected, m.actual) == ("free", "blocked"):
            siblings = [k for k in truth.devices if k[:2] == key[:2] and k != key]
            if any(h.admin_access for k in siblings for h in truth.devices[k].holders):
                return "admin-access-consumes"  # an admin-held partition took the counters
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
