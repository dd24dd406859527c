"""Fragmentation (service.diagnostics.fragmentation) on the simulator's H200s with random MIG
layouts, against a brute-force recount from the raw objects: every placement of every
profile tried against the counters the allocated devices consume, summed by hand."""

from __future__ import annotations

import random
from fractions import Fraction
from typing import Any

import pytest

from dra_mirror.service.diagnostics.fragmentation import fragmentation
from dra_mirror.service.diagnostics.ledger import Ledger
from dra_mirror.service.diagnostics.placement import allocate
from dra_mirror.service.model.holdings import Holdings
from dra_mirror.service.model.index import ClusterIndex, Event
from dra_mirror.service.model.normalize import normalize
from dra_mirror.service.model.quantity import parse_quantity
from dra_mirror.service.model.records import (
    DEVICE_CLASS,
    RESOURCE_CLAIM,
    RESOURCE_SLICE,
    Allocation,
)
from dra_mirror.service.sim.hardware import DeviceGroup, device_class, node_slices
from tests.conftest import REPO_ROOT
from tests.diagnostics.builders import CLUSTER, claim, request

CLASSES = ("gpu.nvidia.com", "mig.nvidia.com")


def _claim(name: str, node: str, devices: list[str]) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}"},
        "spec": {"devices": {"requests": [{"name": "r", "exactly": {
            "deviceClassName": "mig.nvidia.com", "count": len(devices)}}]}},
        "status": {"allocation": {"devices": {"results": [
            {"request": "r", "driver": "gpu.nvidia.com", "pool": node, "device": d}
            for d in devices
        ]}}},
    }  # fmt: skip


def _overlaps(a: dict[str, Any], b: dict[str, Any]) -> bool:
    used = [set(d["consumesCounters"][0]["counters"]) for d in (a, b)]
    return any(n.startswith("memory-slice-") for n in used[0] & used[1])


def world(seed: int, nodes: int = 2, gpus: int = 3) -> dict[str, list[dict[str, Any]]]:
    """Raw objects: H200 nodes; on each GPU a random layout — free, whole, or a random set of
    non-overlapping MIG placements."""
    rng = random.Random(seed)
    slices: list[dict[str, Any]] = []
    claims: list[dict[str, Any]] = []
    for n in range(nodes):
        node = f"h200-{n}"
        found = node_slices(node, f"uid-{node}", [DeviceGroup("nvidia-h200", gpus)], seed="s")
        for i, s in enumerate(found):  # the API server names what generateName asks
            s["metadata"]["name"] = f"{s['metadata']['generateName']}{i}"
        slices.extend(found)
        devices = [d for s in found for d in s["spec"].get("devices") or []]
        for minor in range(gpus):
            mine = [d for d in devices if d["name"].split("-")[1] == str(minor)]
            whole, parts = mine[0], mine[1:]
            layout = rng.choice(("free", "whole", "mig", "mig", "mig"))
            if layout == "whole":
                claims.append(_claim(f"{node}-{minor}-whole", node, [whole["name"]]))
            elif layout == "mig":
                taken: list[dict[str, Any]] = []
                for part in rng.sample(parts, len(parts)):
                    if rng.random() < 0.5 and not any(_overlaps(part, t) for t in taken):
                        taken.append(part)
                for i, part in enumerate(taken):
                    claims.append(_claim(f"{node}-{minor}-{i}", node, [part["name"]]))
    classes = [device_class(name) for name in CLASSES]
    return {"resourceslices": slices, "resourceclaims": claims, "deviceclasses": classes}


def mirrored(raw: dict[str, list[dict[str, Any]]]) -> tuple[ClusterIndex, Ledger]:
    index = ClusterIndex(CLUSTER)
    for plural, kind in (("deviceclasses", DEVICE_CLASS), ("resourceslices", RESOURCE_SLICE),
                         ("resourceclaims", RESOURCE_CLAIM)):  # fmt: skip
        records = [normalize(kind, o, cluster=CLUSTER) for o in raw[plural]]
        index.apply([Event("ADDED", r) for r in records], at="2026-11-30T00:00:00Z")
    return index, Ledger(index)


def recount(raw: dict[str, list[dict[str, Any]]]) -> dict[tuple[str, str], dict[str, Any]]:
    """(node, class) -> the figures, from the raw objects alone: a device is placeable when it
    is not allocated and, with every allocated device of its GPU, no counter exceeds the set."""
    sets: dict[tuple[str, str], dict[str, Fraction]] = {}
    devices: dict[tuple[str, str], dict[str, Any]] = {}
    for s in raw["resourceslices"]:
        pool = s["spec"]["pool"]["name"]
        for cs in s["spec"].get("sharedCounters") or []:
            sets[(pool, cs["name"])] = {
                n: parse_quantity(v["value"]) for n, v in cs["counters"].items()
            }
        for d in s["spec"].get("devices") or []:
            devices[(pool, d["name"])] = d
    allocated = {
        (r["pool"], r["device"])
        for c in raw["resourceclaims"]
        for r in c["status"]["allocation"]["devices"]["results"]
    }
    used: dict[tuple[str, str], dict[str, Fraction]] = {k: {} for k in sets}
    for pool, name in allocated:
        use = devices[(pool, name)]["consumesCounters"][0]
        counters = used[(pool, use["counterSet"])]
        for n, v in use["counters"].items():
            counters[n] = counters.get(n, Fraction(0)) + parse_quantity(v["value"])
    answer: dict[tuple[str, str], dict[str, Any]] = {}
    for cls in CLASSES:
        kind = "gpu" if cls == "gpu.nvidia.com" else "mig"
        for (pool, name), d in sorted(devices.items()):
            if d["attributes"]["type"]["string"] != kind:
                continue
            use = d["consumesCounters"][0]
            key = (pool, use["counterSet"])
            total, taken = sets[key], used[key]
            fits = (pool, name) not in allocated and all(
                taken.get(n, 0) + parse_quantity(v["value"]) <= total[n]
                for n, v in use["counters"].items()
            )
            row = answer.setdefault((pool, cls), {"gpus": {}, "placeable": set(), "all": {}})
            free = total["memory"] - taken.get("memory", 0)
            partly = any(taken.values()) and any(taken.get(n, 0) < v for n, v in total.items())
            row["gpus"][key] = (free, partly, row["gpus"].get(key, (0, 0, False))[2] or fits)
            profile = d["attributes"].get("profile", {}).get("string", "whole")
            slices = sum(n.startswith("memory-slice-") for n in use["counters"])
            memory = parse_quantity(use["counters"]["memory"]["value"])
            row["all"][profile] = (slices, memory, profile)  # equal sizes: by name
            if fits:
                row["placeable"].add(profile)
    for row in answer.values():
        gpus = row["gpus"].values()
        row["free"] = float(sum(f for f, _, _ in gpus))
        row["stranded"] = float(sum(f for f, partly, _ in gpus if partly))
        row["partly"] = sum(partly for _, partly, _ in gpus)
        row["can"] = sum(ok for _, _, ok in gpus)
        ordered = sorted(row["all"], key=lambda p: row["all"][p], reverse=True)
        row["largest"] = next((p for p in ordered if p in row["placeable"]), None)
        row["unplaceable"] = {p for p in ordered if p not in row["placeable"]}
    return answer


@pytest.mark.parametrize("seed", range(12))
def test_fragmentation_equals_a_brute_force_recount(seed: int) -> None:
    raw = world(seed)
    index, ledger = mirrored(raw)
    classes = {c.meta.name: c for c in index.records(DEVICE_CLASS)}
    rows = fragmentation(CLUSTER, index.devices(), ledger, classes)
    truth = recount(raw)
    assert {(r.node, r.class_name) for r in rows} == set(truth)
    for row in rows:
        want = truth[(row.node, row.class_name)]
        assert row.gpus == len(want["gpus"])
        assert row.free_memory == want["free"]
        assert row.stranded_memory == want["stranded"]
        assert row.gpus_partly_allocated == want["partly"]
        assert row.gpus_placeable == want["can"]
        assert row.largest_placeable == want["largest"]
        assert set(row.unplaceable) == want["unplaceable"]
        assert set().union(*(g.placeable for g in row.gpu_details)) == want["placeable"]
    # A store kept outside the process (Redis): the holds derived from one read, the same rows.
    holdings = Holdings.build(
        list(index.devices()),
        list(index.records(RESOURCE_CLAIM)),
        slices=list(index.records(RESOURCE_SLICE)),
    )
    assert fragmentation(CLUSTER, index.devices(), Ledger(holdings), classes) == rows


def test_what_is_placeable_the_allocator_places() -> None:
    raw = world(3)
    index, ledger = mirrored(raw)
    classes = {c.meta.name: c for c in index.records(DEVICE_CLASS)}
    devices = list(index.devices())
    for row in fragmentation(CLUSTER, devices, ledger, classes, class_name="mig.nvidia.com"):
        for profile in [*row.unplaceable, row.largest_placeable]:
            if profile is None:
                continue
            wanted = claim("try", request(
                device_class_name="mig.nvidia.com",
                selectors=(f"device.attributes['gpu.nvidia.com'].profile == '{profile}'",),
            ))  # fmt: skip
            found = allocate(wanted, classes=classes, devices=devices, ledger=ledger, node=row.node)
            assert isinstance(found, Allocation) == (profile == row.largest_placeable), profile


def test_the_sentence_names_the_largest_and_the_next_that_does_not_fit() -> None:
    # One H200 with 1g.18gb at slices 0 and 4 (placements of the sim): no 4-slice 3g.71gb or
    # 4g.71gb fits any more, a 2g.35gb still does (slices 2-3 or 6-7).
    raw = world(0, nodes=1, gpus=1)
    node = "h200-0"
    names = [d["name"] for s in raw["resourceslices"] for d in s["spec"].get("devices") or []]
    ones = [n for n in names if "-mig-1g18gb-19-" in n and n.rsplit("-", 1)[1] in ("0", "4")]
    raw["resourceclaims"] = [_claim(f"one-{i}", node, [n]) for i, n in enumerate(ones)]
    index, ledger = mirrored(raw)
    classes = {c.meta.name: c for c in index.records(DEVICE_CLASS)}
    [row] = fragmentation(CLUSTER, index.devices(), ledger, classes, class_name="mig.nvidia.com")
    assert row.largest_placeable == "2g.35gb"
    assert row.summary == (
        "1 of 1 GPU can take a mig.nvidia.com device, the largest a 2g.35gb; "
        "none can take a 3g.71gb"
    )
    assert row.unplaceable == ["7g.141gb", "4g.71gb", "3g.71gb"]
    assert row.stranded_memory == row.free_memory > 0


def test_the_documented_demo_sentence(east) -> None:
    """docs/graphql.md quotes what the demo's east-h200-1 says."""
    text = (REPO_ROOT / "docs" / "graphql.md").read_text()
    [quoted] = [line for line in text.splitlines() if line.startswith("east-h200-1 mig.nvidia")]
    [row] = fragmentation(
        "east", east.devices, east.ledger, east.classes,
        node="east-h200-1", class_name="mig.nvidia.com",
    )  # fmt: skip
    assert quoted == f"{row.node} {row.class_name}: {row.summary}"
    assert row.gpus == 4 and row.gpus_partly_allocated == 1 and row.largest_placeable == "2g.35gb"
    held_whole = [g for g in row.gpu_details if not g.partly_allocated and g.free_memory == 0]
    assert len(held_whole) == 3
