"""Every contention figure, recounted naively from the raw objects of each minute.

Nothing of the code under test is imported: the rules are docs/history.md's Definitions,
read straight off the raw slices, claims and pods (`tests.oracle.audit_world.snapshots`),
and every state is sampled minute by minute (every change happens on a minute):

* a GPU is the devices consuming one counter set, or a parent device and the static MIG
  devices naming it by `parentUUID`, or a device of its own; it counts 1 in inventory through
  its whole device (a counter set's device consuming all of it, a static MIG parent), else
  through its first partition by name; NICs are no GPU;
* a hold takes 1 of a whole device, a partition's memory slices over the set's (never the
  larger share of multiprocessors), a static MIG device's memory over its parent's, a share
  its consumed capacity over the device's;
* a claim is idle-held in a minute it is allocated and no pod its `reservedFor` names is
  Running, or scheduled and Pending for less than the grace since its `startTime`;
* a claim waits in a minute it exists unallocated and an unfinished pod names it; a wait ends
  served (allocated) or abandoned (the claim gone, or no such pod); one under way when the
  mirror first listed the cluster (minute 0) is left out of the percentiles;
* a class counts the devices its selector accepts or that were allocated for it, and the
  whole device of every GPU with a device it accepts.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from tests.oracle.audit_world import GPU_DRIVER, GRACE

Snapshot = dict[tuple[str, str, str], dict[str, Any]]
SELECTS = {"gpu": "gpu.nvidia.com", "mig": "mig.nvidia.com", "nic": "nic"}  # type -> class


def _number(quantity: str) -> Fraction:
    return Fraction(quantity.removesuffix("Gi").removesuffix("G"))


def _attr(device: dict, name: str) -> str | None:
    value = device.get("attributes", {}).get(name)
    return value["string"] if value else None


@dataclass
class Published:
    node: str
    driver: str
    pool: str
    name: str
    gpu: str | None  # the physical GPU (None: not a GPU)
    counts: int  # 1 on the device that counts its GPU in inventory
    weight: Fraction  # of its GPU, when held whole
    whole: bool  # the device standing for its GPU (its whole device)
    capacity: dict[str, Fraction] = field(default_factory=dict)
    type: str = ""


def published(snapshot: Snapshot) -> dict[tuple[str, str, str], Published]:
    """Every published device by (driver, pool, name), read off the raw slices."""
    out: dict[tuple[str, str, str], Published] = {}
    for (kind, _, _), raw in snapshot.items():
        if kind != "ResourceSlice":
            continue
        spec = raw["spec"]
        driver, pool, node = spec["driver"], spec["pool"]["name"], spec.get("nodeName", "")
        sets = {s["name"]: s["counters"] for s in spec.get("sharedCounters", [])}
        devices = spec.get("devices", [])
        by_uuid = {_attr(d, "uuid"): d for d in devices if _attr(d, "uuid")}
        members: dict[str, list[str]] = defaultdict(list)
        for d in devices:
            capacity = {k: _number(v["value"]) for k, v in d.get("capacity", {}).items()}
            kind_ = _attr(d, "type") or ""
            entry = Published(node, driver, pool, d["name"], None, 0, Fraction(1), True,
                              capacity, kind_)  # fmt: skip
            if driver == GPU_DRIVER:
                if d.get("consumesCounters"):
                    use = d["consumesCounters"][0]
                    total = sets[use["counterSet"]]
                    slices = [n for n in total if n.startswith("memory-slice-")]
                    taken = sum(1 for n in slices if n in use["counters"])
                    entry.gpu = f"{pool}/{use['counterSet']}"
                    entry.weight = Fraction(taken, len(slices))
                    entry.whole = all(n in use["counters"] for n in total)
                    members[entry.gpu].append(d["name"])
                elif (parent := _attr(d, "parentUUID")) is not None:
                    entry.gpu = parent
                    entry.whole = False
                    entry.weight = capacity["memory"] / _number(
                        by_uuid[parent]["capacity"]["memory"]["value"]
                    )
                else:
                    entry.gpu = _attr(d, "uuid") or f"{pool}/{d['name']}"
                    entry.counts = 1
            out[(driver, pool, d["name"])] = entry
        for names in members.values():
            wholes = sorted(n for n in names if out[(driver, pool, n)].whole)
            out[(driver, pool, (wholes or sorted(names))[0])].counts = 1
    return out


def _claims(snapshot: Snapshot) -> dict[tuple[str, str], dict]:
    return {(ns, name): raw for (k, ns, name), raw in snapshot.items() if k == "ResourceClaim"}


def _active(snapshot: Snapshot, namespace: str, consumer: dict, t: int) -> bool:
    pod = snapshot.get(("Pod", namespace, consumer["name"]))
    if pod is None or pod["metadata"]["uid"] != consumer["uid"]:
        return False
    phase = pod["status"]["phase"]
    if phase == "Running":
        return True
    if phase != "Pending" or not pod["spec"].get("nodeName"):
        return False
    start = pod["status"]["startTime"]  # "2026-03-02THH:MM:00Z"
    minute = (int(start[11:13]) - 10) * 60 + int(start[14:16])
    return t < minute + GRACE


def _waiting(snapshot: Snapshot, namespace: str, name: str, claim: dict) -> bool:
    if claim.get("status", {}).get("allocation"):
        return False
    return any(
        k == "Pod" and ns == namespace and pod["status"]["phase"] not in ("Succeeded", "Failed")
        and any(c.get("resourceClaimName") == name for c in pod["spec"]["resourceClaims"])
        for (k, ns, _), pod in snapshot.items()
    )  # fmt: skip


@dataclass
class Figures:
    available: float | None = None
    allocated: float = 0.0
    idle: float = 0.0
    gpu_available: float | None = None
    gpu_allocated: float = 0.0
    gpu_idle: float = 0.0
    waited: int = 0
    p50: float | None = None
    p95: float | None = None
    longest: float | None = None
    abandoned: int = 0
    peak: int = 0

    def finished(self) -> dict[str, Any]:
        util = self.allocated / self.available * 100 if self.available else None
        gutil = self.gpu_allocated / self.gpu_available * 100 if self.gpu_available else None
        return {
            "deviceHoursAvailable": self.available, "deviceHoursAllocated": self.allocated,
            "deviceHoursIdle": self.idle, "utilization": util,
            "gpuHoursAvailable": self.gpu_available, "gpuHoursAllocated": self.gpu_allocated,
            "gpuHoursIdle": self.gpu_idle, "gpuUtilization": gutil,
            "claimsWaited": self.waited, "waitP50Seconds": self.p50,
            "waitP95Seconds": self.p95, "waitMaxSeconds": self.longest,
            "claimsAbandoned": self.abandoned, "peakPending": self.peak,
        }  # fmt: skip


def _rank(values: list[int], fraction: float) -> int:
    ordered = sorted(values)
    return ordered[math.ceil(fraction * len(ordered)) - 1]


def expected(
    snapshots: list[Snapshot], cluster: str, group_by: str, bucket: int
) -> dict[tuple[str, int], dict[str, Any]]:
    """(group, bucket index) -> every figure of the row, for the window [0, END)."""
    rows: dict[tuple[str, int], Figures] = defaultdict(Figures)
    inventory = group_by != "NAMESPACE"
    # class membership is kept without time: every class that ever selected a device, or a
    # device of its GPU, or was allocated it
    members: dict[tuple[str, str, str], set[str]] = defaultdict(set)
    for snapshot in snapshots:
        devices = published(snapshot)
        for key, d in devices.items():
            if d.type in SELECTS:
                members[key].add(SELECTS[d.type])
                for other_key, other in devices.items():
                    if other.gpu is not None and other.gpu == d.gpu and other.whole:
                        members[other_key].add(SELECTS[d.type])
        for claim in _claims(snapshot).values():
            klass = claim["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"]
            for r in (
                claim.get("status", {}).get("allocation", {}).get("devices", {}).get("results", [])
            ):
                members[(r["driver"], r["pool"], r["device"])].add(klass)
    waits: dict[tuple[str, str], list[list[Any]]] = defaultdict(list)  # [start, end, reason, group]
    for t, snapshot in enumerate(snapshots):
        idx = t // bucket
        devices = published(snapshot)
        if inventory:
            for key, d in devices.items():
                groups = {"NODE": [d.node], "CLUSTER": [cluster]}.get(group_by) or sorted(
                    members[key]
                )
                for g in groups:
                    row = rows[(g, idx)]
                    row.available = (row.available or 0.0) + 1 / 60
                    gpu = d.counts if d.gpu is not None else 0
                    row.gpu_available = (row.gpu_available or 0.0) + gpu / 60
        waiting_now: dict[str, int] = defaultdict(int)
        for (ns, name), claim in _claims(snapshot).items():
            klass = claim["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"]
            status = claim.get("status", {})
            results = status.get("allocation", {}).get("devices", {}).get("results", [])
            idle = bool(results) and not any(
                _active(snapshot, ns, c, t) for c in status.get("reservedFor", [])
            )
            for r in results:
                d = devices[(r["driver"], r["pool"], r["device"])]
                weight = d.weight
                if r.get("shareID"):
                    ((cap, used),) = r["consumedCapacity"].items()
                    weight = min(_number(used) / d.capacity[cap], Fraction(1)) * d.weight
                weight = weight if d.gpu is not None else Fraction(0)
                g = {"CLASS": klass, "NAMESPACE": ns, "NODE": d.node, "CLUSTER": cluster}[group_by]
                row = rows[(g, idx)]
                row.allocated += 1 / 60
                row.gpu_allocated += float(weight) / 60
                if idle:
                    row.idle += 1 / 60
                    row.gpu_idle += float(weight) / 60
            wait_group = {"CLASS": klass, "NAMESPACE": ns, "NODE": "", "CLUSTER": cluster}[group_by]
            spells = waits[(ns, name)]
            if _waiting(snapshot, ns, name, claim):
                waiting_now[wait_group] += 1
                if not spells or spells[-1][1] is not None:
                    spells.append([t, None, None, wait_group])
            elif spells and spells[-1][1] is None:
                spells[-1][1:3] = [t, "served" if results else "abandoned"]
        for (ns, name), spells in waits.items():  # a claim gone ends its wait
            if spells and spells[-1][1] is None and (ns, name) not in _claims(snapshot):
                spells[-1][1:3] = [t, "abandoned"]
        for g, count in waiting_now.items():
            rows[(g, idx)].peak = max(rows[(g, idx)].peak, count)
    served: dict[tuple[str, int], list[tuple[str, int]]] = defaultdict(list)
    for (_, name), spells in waits.items():
        for start, end, reason, g in spells:
            if reason == "abandoned":
                rows[(g, start // bucket)].abandoned += 1
            elif reason == "served" and start > 0:  # minute 0: under way when first listed
                served[(g, start // bucket)].append((name, (end - start) * 60))
    for key, found in served.items():
        durations = [d for _, d in found]
        row = rows[key]
        row.waited = len({n for n, _ in found})
        row.p50, row.p95 = _rank(durations, 0.5), _rank(durations, 0.95)
        row.longest = max(durations)
    if not inventory:
        for row in rows.values():
            row.available = row.gpu_available = None
    else:
        for row in rows.values():
            row.available = row.available or 0.0
            row.gpu_available = row.gpu_available or 0.0
    return {key: row.finished() for key, row in rows.items()}
