"""Compatibility groups in the allocator (KEP-5963, "Example 3"): MIG partitions and vGPU
profiles of one GPU draw on one counter set; devices on a shared counter set co-allocate only
where their groups intersect (or neither declares any), read for held devices from the snapshot
on their allocation result. Objects shaped as the KEP writes them (SOURCES.md)."""

from __future__ import annotations

from typing import Any

from dra_mirror.service.diagnostics.explain import explain_claim
from dra_mirror.service.diagnostics.ledger import Ledger
from dra_mirror.service.diagnostics.placement import Unsatisfiable, allocate
from dra_mirror.service.model.holdings import Holdings
from dra_mirror.service.model.index import ClusterIndex, Event
from dra_mirror.service.model.normalize import normalize
from dra_mirror.service.model.records import (
    DEVICE_CLASS,
    RESOURCE_CLAIM,
    RESOURCE_SLICE,
    Allocation,
    ClaimRecord,
    key_of,
)

DRIVER = "gpu.example.com"
SET = "gpu-0-counters"


def device(name: str, kind: str, sms: str, groups: list[str] | None) -> dict[str, Any]:
    consumption: dict[str, Any] = {
        "counterSet": SET,
        "counters": {"multiprocessors": {"value": sms}},
    }
    if groups is not None:
        consumption["compatibilityGroups"] = groups
    return {
        "name": name,
        "attributes": {"type": {"string": kind}},
        "consumesCounters": [consumption],
    }


def world(groups: bool = True) -> list[dict[str, Any]]:
    mig, vgpu = (["mig"], ["vgpu"]) if groups else (None, None)
    pool = {"name": "node-1-pool", "generation": 1, "resourceSliceCount": 2}
    return [
        {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
         "metadata": {"name": DRIVER}, "spec": {"selectors": [{"cel": {"expression": f"device.driver == '{DRIVER}'"}}]}},
        {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
         "metadata": {"name": "node-1-gpu-0-counters"},
         "spec": {"driver": DRIVER, "pool": pool, "allNodes": True,
                  "sharedCounters": [{"name": SET, "counters": {"multiprocessors": {"value": "100"}}}]}},
        {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
         "metadata": {"name": "node-1-gpu-0-devices"},
         "spec": {"driver": DRIVER, "pool": pool, "nodeName": "node-1",
                  "devices": [device("gpu-0-mig-1g-0", "mig-1g", "20", mig),
                              device("gpu-0-mig-1g-1", "mig-1g", "20", mig),
                              device("gpu-0-vgpu-0", "vgpu", "50", vgpu),
                              device("gpu-0-vgpu-1", "vgpu", "50", vgpu)]}},
    ]  # fmt: skip


def claim_for(name: str, *kinds: str, allocated: dict | None = None) -> dict[str, Any]:
    requests = [
        {"name": f"gpu{i}", "exactly": {"deviceClassName": DRIVER, "selectors": [
            {"cel": {"expression": f"device.attributes['{DRIVER}'].type == '{kind}'"}}]}}
        for i, kind in enumerate(kinds)
    ]  # fmt: skip
    body: dict[str, Any] = {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
        "spec": {"devices": {"requests": requests}},
    }  # fmt: skip
    if allocated is not None:
        body["status"] = {"allocation": {"devices": {"results": [
            {"request": "gpu0", "driver": DRIVER, "pool": "node-1-pool", **allocated}]}}}  # fmt: skip
    return body


POD_A_MIG = {"device": "gpu-0-mig-1g-0", "compatibilityGroups": {SET: ["mig"]}}


def place(objects: list[dict[str, Any]], claim: dict[str, Any]):
    index = ClusterIndex("c")
    records = [normalize(o["kind"], o, cluster="c") for o in objects]
    index.apply([Event("ADDED", r) for r in records], at="2026-12-01T00:00:00Z")
    devices = list(index.devices())
    claims = [c for c in index.records(RESOURCE_CLAIM) if isinstance(c, ClaimRecord)]
    ledger = Ledger(Holdings.build(devices, claims, slices=index.records(RESOURCE_SLICE)))
    classes = {c.meta.name: c for c in index.records(DEVICE_CLASS)}
    record = normalize("ResourceClaim", claim, cluster="c")
    assert isinstance(record, ClaimRecord)
    result = allocate(record, classes=classes, devices=devices, ledger=ledger)
    return result, (record, classes, devices, ledger, {key_of(c): c for c in claims})


def test_a_vgpu_is_refused_beside_a_held_mig_partition():
    pod_a = claim_for("pod-a-gpu", "mig-1g", allocated=POD_A_MIG)
    vgpu, (record, classes, devices, ledger, claims) = place(
        [*world(), pod_a], claim_for("pod-b-gpu", "vgpu")
    )
    assert isinstance(vgpu, Unsatisfiable)  # 20 + 50 <= 100 SMs: only the groups refuse it
    diagnosis = explain_claim(record, classes=classes, devices=devices, ledger=ledger,
                              claims=claims, pods=[], nodes=[])  # fmt: skip
    assert diagnosis.verdict == "all-held" and "default/pod-a-gpu" in diagnosis.message
    assert diagnosis.message.endswith(
        "; 2 matching device(s) refused by compatibility groups (KEP-5963): their counter set "
        "already serves partitions of another group"
    )
    mig, _ = place([*world(), pod_a], claim_for("pod-b-gpu", "mig-1g"))
    assert isinstance(mig, Allocation)
    [result] = mig.results
    assert result.device == "gpu-0-mig-1g-1"
    assert result.compatibility_groups == {SET: ("mig",)}  # the snapshot the scheduler writes


def test_one_claim_cannot_mix_groups_on_one_counter_set():
    mixed, _ = place(world(), claim_for("mixed", "mig-1g", "vgpu"))
    assert isinstance(mixed, Unsatisfiable)
    two, _ = place(world(), claim_for("two", "mig-1g", "mig-1g"))
    assert isinstance(two, Allocation) and len(two.results) == 2


def test_the_snapshot_counts_not_the_slice():
    # Allocated before the driver declared groups: no snapshot, so the held partition is
    # "undeclared" and no device declaring groups joins it on that counter set.
    old = claim_for("pod-a-gpu", "mig-1g", allocated={"device": "gpu-0-mig-1g-0"})
    mig, _ = place([*world(), old], claim_for("pod-b-gpu", "mig-1g"))
    assert isinstance(mig, Unsatisfiable)


def test_without_groups_only_the_counters_decide():
    pod_a = claim_for("pod-a-gpu", "mig-1g", allocated={"device": "gpu-0-mig-1g-0"})
    vgpu, _ = place([*world(groups=False), pod_a], claim_for("pod-b-gpu", "vgpu"))
    assert isinstance(vgpu, Allocation) and vgpu.results[0].compatibility_groups == {}
