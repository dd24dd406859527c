"""Capacity names written without their domain are in the driver's domain (QualifiedName):
the allocator compares a claim's `capacity.requests` and `consumedCapacity` with a device's
capacities qualified, and writes consumedCapacity as the slice spells each capacity."""

from __future__ import annotations

from typing import Any

import msgspec

from dra_mirror.service.diagnostics.placement import Ledger, Unsatisfiable, allocate
from dra_mirror.service.model.holdings import Holdings
from dra_mirror.service.model.index import ClusterIndex, Event
from dra_mirror.service.model.normalize import normalize
from dra_mirror.service.model.records import Allocation, ClaimRecord, DeviceClassRecord, Meta

CLUSTER, GPU = "east", "gpu.nvidia.com"
CLASS = DeviceClassRecord(
    meta=Meta(cluster=CLUSTER, name="gpu"), selectors=(f"device.driver == '{GPU}'",)
)
H200: dict[str, Any] = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "ResourceSlice",
    "metadata": {"name": "n1-gpu"},
    "spec": {
        "driver": GPU,
        "nodeName": "n1",
        "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1},
        "devices": [
            {
                "name": "gpu-0",
                "allowMultipleAllocations": True,
                "attributes": {"productName": {"string": "NVIDIA H200"}},
                "capacity": {"memory": {"value": "143771Mi"}},
            }
        ],
    },
}


def claim(name: str, memory: str, consumed: str | None = None) -> ClaimRecord:
    raw: dict[str, Any] = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "ml", "uid": f"uid-{name}"},
        "spec": {
            "devices": {
                "requests": [
                    {
                        "name": "gpu",
                        "exactly": {
                            "deviceClassName": "gpu",
                            "capacity": {"requests": {"memory": memory}},
                        },
                    }
                ]
            }
        },
    }
    if consumed is not None:
        result = {"request": "gpu", "driver": GPU, "pool": "n1", "device": "gpu-0"}
        result |= {"shareID": f"share-{name}", "consumedCapacity": {"memory": consumed}}
        raw["status"] = {"allocation": {"devices": {"results": [result]}}}
    record = normalize("ResourceClaim", raw, cluster=CLUSTER)
    assert isinstance(record, ClaimRecord)
    return record


def devices():
    index = ClusterIndex(CLUSTER)
    index.apply([Event("ADDED", normalize("ResourceSlice", H200, cluster=CLUSTER))], at="t")
    return list(index.devices())


def test_an_unqualified_request_takes_a_share_written_as_the_slice_writes_it() -> None:
    found = devices()
    allocation = allocate(
        claim("train", "40Gi"),
        classes={"gpu": CLASS},
        devices=found,
        ledger=Ledger(Holdings.build(found, [])),
        share_id=lambda: "s1",
    )
    assert isinstance(allocation, Allocation), allocation
    [result] = allocation.results
    assert (result.device, result.share_id) == ("gpu-0", "s1")
    assert result.consumed_capacity == {"memory": "40Gi"}


def test_unqualified_consumed_capacity_is_taken_from_the_device() -> None:
    found = devices()
    [entry] = found
    ledger = Ledger(Holdings.build(found, [claim("a", "100Gi", consumed="100Gi")]))
    assert {k: str(v) for k, v in ledger.remaining_capacity(entry).items()} == {
        f"{GPU}/memory": str((143771 - 102400) * 1024**2)
    }
    # 40Gi no longer fits beside 100Gi of 143771Mi; 20Gi does.
    verdict = allocate(claim("b", "41Gi"), classes={"gpu": CLASS}, devices=found, ledger=ledger)
    assert isinstance(verdict, Unsatisfiable)
    # What the shares left is named, asked vs left; the shares' claims are named as holders.
    [why] = verdict.requests
    assert why.verdict == "no-capacity" and why.held_by
    assert [str(s) for s in why.short] == [
        f"{GPU}/n1/gpu-0 (1 claims) has {GPU}/memory 41371Mi left, one share takes 41Gi"
    ]
    fits = allocate(claim("c", "20Gi"), classes={"gpu": CLASS}, devices=found, ledger=ledger)
    assert isinstance(fits, Allocation)
    assert msgspec.structs.asdict(fits.results[0])["consumed_capacity"] == {"memory": "20Gi"}
