"""Expected audit figures computed naively, minute by minute, from the truth tables of
`tests.history.script` (never from the event script or the code under test)."""

from __future__ import annotations

import math

from tests.history.script import (
    END,
    TRUTH_ALLOCATIONS,
    TRUTH_IDLE,
    TRUTH_INVENTORY,
    TRUTH_WAITS,
)

CLUSTER = "east"


def _covers(start: int, end: int | None, minute: int) -> bool:
    return start <= minute < (END if end is None else end)


def _idle(claim: str, minute: int) -> bool:
    return any(c == claim and _covers(s, e, minute) for c, s, e in TRUTH_IDLE)


def _rank(values: list[int], fraction: float) -> int:
    ordered = sorted(values)
    return ordered[math.ceil(fraction * len(ordered)) - 1]


def expected_contention(group_by: str, bucket_minutes: int) -> list[dict]:
    """Rows as dicts of (cluster, group, bucket start minute, figures), nonzero rows only."""
    rows = []
    alloc_group = {
        "CLASS": lambda a: "h200",
        "NAMESPACE": lambda a: a[1],
        "NODE": lambda a: a[3],
        "CLUSTER": lambda a: CLUSTER,
    }[group_by]
    wait_group = {
        "CLASS": lambda w: "h200",
        "NAMESPACE": lambda w: w[1],
        "NODE": lambda w: "",
        "CLUSTER": lambda w: CLUSTER,
    }[group_by]
    inventory_group = {
        "CLASS": lambda d: "h200",  # every device of the script was allocated for h200
        "NAMESPACE": None,
        "NODE": lambda d: d[1],
        "CLUSTER": lambda d: CLUSTER,
    }[group_by]
    groups = {alloc_group(a) for a in TRUTH_ALLOCATIONS} | {wait_group(w) for w in TRUTH_WAITS}
    if inventory_group:
        groups |= {inventory_group(d) for d in TRUTH_INVENTORY}
    for group in sorted(groups):
        for lo in range(0, END, bucket_minutes):
            minutes = range(lo, min(lo + bucket_minutes, END))
            allocated = sum(
                1 for a in TRUTH_ALLOCATIONS for m in minutes
                if alloc_group(a) == group and _covers(a[4], a[5], m)
            )  # fmt: skip
            idle = sum(
                1 for a in TRUTH_ALLOCATIONS for m in minutes
                if alloc_group(a) == group and _covers(a[4], a[5], m) and _idle(a[0], m)
            )  # fmt: skip
            available = None
            if inventory_group:
                available = sum(
                    1 for d in TRUTH_INVENTORY for m in minutes
                    if inventory_group(d) == group and _covers(d[3], d[4], m)
                )  # fmt: skip
            waits = [
                w
                for w in TRUTH_WAITS
                if wait_group(w) == group and lo <= w[2] < lo + bucket_minutes
            ]
            served = [w for w in waits if w[4] == "served" and w[3] > w[2]]
            durations = [(w[3] - w[2]) * 60 for w in served]
            abandoned = sum(1 for w in waits if w[4] == "abandoned")
            peak = max(
                sum(1 for w in TRUTH_WAITS if wait_group(w) == group and _covers(w[2], w[3], m))
                for m in minutes
            )
            if not (allocated or idle or available or durations or peak or abandoned):
                continue
            row = {
                "cluster": CLUSTER,
                "group": group,
                "bucket": lo,
                "available": None if available is None else available / 60,
                "allocated": allocated / 60,
                "idle": idle / 60,
                "utilization": (allocated / 60) / (available / 60) * 100.0 if available else None,
                "waited": len({w[0] for w in served}),
                "p50": _rank(durations, 0.5) if durations else None,
                "p95": _rank(durations, 0.95) if durations else None,
                "max": max(durations) if durations else None,
                "peak": peak,
                "abandoned": abandoned,
            }
            rows.append(row)
    return rows


def expected_idle_holders() -> list[tuple[str, float, float]]:
    """(claim, idle device-hours, held device-hours) over the whole window, ranked."""
    out = []
    for claim in sorted({a[0] for a in TRUTH_ALLOCATIONS}):
        held = sum(1 for a in TRUTH_ALLOCATIONS if a[0] == claim for m in range(END)
                   if _covers(a[4], a[5], m))  # fmt: skip
        idle = sum(1 for a in TRUTH_ALLOCATIONS if a[0] == claim for m in range(END)
                   if _covers(a[4], a[5], m) and _idle(claim, m))  # fmt: skip
        if idle:
            out.append((claim, idle / 60, held / 60))
    return sorted(out, key=lambda r: (-r[1], r[0]))
