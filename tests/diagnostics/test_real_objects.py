"""The allocator and the selectors on real objects from ../shared/fixtures/upstream, normalized
by the model as the mirror would: the CNI DRA driver's shareable NIC (whose claim the real
kube-scheduler allocated — we must write the same allocation) and dra-example-driver's GPUs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest
import yaml

from dra_mirror.service.diagnostics.placement import Ledger, Unsatisfiable, allocate
from dra_mirror.service.model.holdings import Holdings
from dra_mirror.service.model.index import ClusterIndex, Event
from dra_mirror.service.model.normalize import normalize
from dra_mirror.service.model.records import (
    Allocation,
    ClaimRecord,
    DeviceClassRecord,
    DeviceEntry,
    key_of,
)

CLUSTER = "kind"


def load(shared_dir: Path, name: str) -> list[dict[str, Any]]:
    docs = yaml.safe_load_all((shared_dir / "fixtures" / "upstream" / name).read_text())
    out = []
    for doc in docs:
        out.extend(
            doc["items"] if doc and doc.get("kind", "").endswith("List") else [doc] if doc else []
        )
    return out


def devices_of(*slices: dict[str, Any]) -> list[DeviceEntry]:
    index = ClusterIndex(CLUSTER)
    records = [normalize("ResourceSlice", s, cluster=CLUSTER) for s in slices]
    index.apply([Event("ADDED", r) for r in records], at="2026-11-30T00:00:00Z")
    return sorted(index.devices(), key=lambda e: e.key)


@pytest.fixture
def cni(shared_dir: Path) -> tuple[dict[str, DeviceClassRecord], list[DeviceEntry], ClaimRecord]:
    [cls] = load(shared_dir, "cni-dra-driver-demo.DeviceClass.yaml")
    [sl] = load(shared_dir, "cni-dra-driver-demo.ResourceSlice.yaml")
    [claim] = load(shared_dir, "cni-dra-driver-demo.ResourceClaim.yaml")
    device_class = normalize("DeviceClass", cls, cluster=CLUSTER)
    record = normalize("ResourceClaim", claim, cluster=CLUSTER)
    assert isinstance(device_class, DeviceClassRecord) and isinstance(record, ClaimRecord)
    return {device_class.meta.name: device_class}, devices_of(sl), record


def test_we_allocate_the_cni_claim_as_kube_scheduler_did(cni) -> None:
    classes, devices, real = cni
    pending = msgspec.structs.replace(real, allocation=None, reserved_for=(), state="pending")
    ours = allocate(
        pending,
        classes=classes,
        devices=devices,
        ledger=Ledger(Holdings.build(devices, [])),
        share_id=lambda: "8e7acdf9-0290-4ecd-a801-a654b021d2b7",
    )
    assert isinstance(ours, Allocation)
    assert real.allocation is not None
    # Same device, request, shareID, consumedCapacity (maxVirtualDevices rounded to the policy's
    # only valid value), node selector and the claim's configuration (source FromClaim).
    assert ours == msgspec.structs.replace(real.allocation, allocated_at=None)


def test_the_shared_nic_takes_more_claims_until_its_capacity_is_gone(cni) -> None:
    classes, devices, real = cni
    ledger = Ledger(Holdings.build(devices, [real]))
    pending = msgspec.structs.replace(real, allocation=None, reserved_for=(), state="pending")
    [eth0] = devices
    assert ledger.holders(eth0.key) == [key_of(real)]
    assert {k: str(v) for k, v in ledger.remaining_capacity(eth0).items()} == {
        "cni.dra.networking.x-k8s.io/maxVirtualDevices": "65534"
    }
    assert isinstance(
        allocate(pending, classes=classes, devices=devices, ledger=ledger), Allocation
    )
    # A request above the policy's only valid value ("1") can never be granted.
    [request] = pending.requests
    greedy = msgspec.structs.replace(
        pending,
        requests=(
            msgspec.structs.replace(
                request, capacity={"cni.dra.networking.x-k8s.io/maxVirtualDevices": "2"}
            ),
        ),
    )
    verdict = allocate(greedy, classes=classes, devices=devices, ledger=ledger)
    assert isinstance(verdict, Unsatisfiable)
    assert verdict.requests[0].verdict == "no-capacity"


def test_example_driver_gpus_and_the_prioritized_alternatives(shared_dir: Path) -> None:
    devices = devices_of(*load(shared_dir, "dra-example-driver-readme-resourceslices.List.yaml"))
    assert len(devices) == 8
    classes = {
        "gpu.example.com": DeviceClassRecord(
            meta=msgspec.structs.replace(_meta(), name="gpu.example.com"),
            selectors=("device.driver == 'gpu.example.com'",),
        )
    }
    templates = [
        normalize("ResourceClaimTemplate", doc, cluster=CLUSTER)
        for doc in load(shared_dir, "dra-example-driver-prioritized-alternatives.yaml")
        if doc.get("kind") == "ResourceClaimTemplate"
    ]
    assert len(templates) == 2
    ledger = Ledger(Holdings.build(devices, []))
    chosen = []
    for template in templates:
        claim = ClaimRecord(
            meta=msgspec.structs.replace(template.meta, name=f"{template.meta.name}-claim"),
            requests=template.requests,
            constraints=template.constraints,
        )
        allocation = allocate(claim, classes=classes, devices=devices, ledger=ledger)
        assert isinstance(allocation, Allocation), allocation
        chosen.append([r.request for r in allocation.results])
    # pod0's template: no BLEEDING-EDGE-GPU and no 1Ti GPU (they have 80Gi): the third choice.
    # pod1's template: LATEST-GPU-MODEL exists, so the first choice.
    assert chosen == [["gpu/older-gpu"], ["gpu/latest-gpu"]]


def _meta():
    from dra_mirror.service.model.records import Meta

    return Meta(cluster=CLUSTER, name="")
