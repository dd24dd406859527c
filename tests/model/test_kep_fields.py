"""Alpha fields of resource.k8s.io the mirror carries, in every version that can hold them:
`derivedAttributes` on requests (KEP-6080, DRADerivedAttributes) and
`consumesCounters[].compatibilityGroups` on devices with the allocation's snapshot of them
(KEP-5963, DRADeviceCompatibilityGroups). The objects are the KEPs' own examples
(tests/fixtures/real/SOURCES.md); none of these fields is ever a reason to drop an object."""

from __future__ import annotations

import orjson
import pytest

from dra_mirror.service.model.decode import decode_object
from dra_mirror.service.model.records import (
    ClaimRecord,
    CounterConsumption,
    DerivedAttribute,
    SliceRecord,
)

DRA = "resource.k8s.io"
GPU_NUMA = DerivedAttribute("shared-numa-node", "device.attributes['gpu.nvidia.com'].numa")
NIC_NUMA = DerivedAttribute("shared-numa-node", "device.attributes['dra.net'].numaNode")


def numa_alignment_claim(version: str) -> dict:
    """KEP-6080's "GPU & NIC NUMA Alignment" claim (v1: under `exactly`; v1beta1: flat)."""
    gpu = {
        "deviceClassName": "gpu.nvidia.com",
        "count": 8,
        "derivedAttributes": [{"name": GPU_NUMA.name, "expression": GPU_NUMA.expression}],
    }
    nic = {
        "deviceClassName": "dranet",
        "count": 1,
        "derivedAttributes": [{"name": NIC_NUMA.name, "expression": NIC_NUMA.expression}],
    }
    if version == "v1beta1":
        requests = [{"name": "gpu", **gpu}, {"name": "nic", **nic}]
    else:
        requests = [{"name": "gpu", "exactly": gpu}, {"name": "nic", "exactly": nic}]
    return {
        "apiVersion": f"{DRA}/{version}",
        "kind": "ResourceClaim",
        "metadata": {"name": "gpu-numa-alignment-claim", "namespace": "default", "uid": "c1"},
        "spec": {"devices": {
            "requests": requests,
            "constraints": [{"matchAttribute": "shared-numa-node", "requests": ["gpu", "nic"]}],
        }},
    }  # fmt: skip


@pytest.mark.parametrize("version", ["v1", "v1beta2", "v1beta1"])
def test_derived_attributes_are_carried_from_every_version(version: str) -> None:
    record = decode_object(
        "ResourceClaim", orjson.dumps(numa_alignment_claim(version)), cluster="c"
    )
    assert isinstance(record, ClaimRecord)
    assert [(r.name, r.derived_attributes) for r in record.requests] == [
        ("gpu", (GPU_NUMA,)), ("nic", (NIC_NUMA,)),
    ]  # fmt: skip
    assert record.constraints[0].match_attribute == "shared-numa-node"


def test_derived_attributes_of_a_first_available_subrequest_are_carried() -> None:
    claim = numa_alignment_claim("v1")
    gpu = claim["spec"]["devices"]["requests"][0]
    claim["spec"]["devices"]["requests"][0] = {
        "name": "gpu", "firstAvailable": [{"name": "h200", **gpu["exactly"]}],
    }  # fmt: skip
    record = decode_object("ResourceClaim", orjson.dumps(claim), cluster="c")
    assert isinstance(record, ClaimRecord)
    (sub,) = record.requests[0].first_available
    assert (sub.name, sub.derived_attributes) == ("h200", (GPU_NUMA,))


def mig_and_vgpu_slice(version: str) -> dict:
    """KEP-5963's example: MIG partitions and vGPU profiles of one GPU, each group drawing on
    the GPU's counter set; MIG devices co-allocate with each other, never with a vGPU."""

    def device(name: str, kind: str, group: str, sms: str) -> dict:
        fields = {
            "attributes": {"type": {"string": kind}},
            "consumesCounters": [{"counterSet": "gpu-0-counters", "compatibilityGroups": [group],
                                  "counters": {"multiprocessors": {"value": sms}}}],
        }  # fmt: skip
        return {"name": name, "basic": fields} if version == "v1beta1" else {"name": name, **fields}

    return {
        "apiVersion": f"{DRA}/{version}",
        "kind": "ResourceSlice",
        "metadata": {"name": "node-1-gpus", "uid": "s1"},
        "spec": {
            "driver": "gpu.example.com", "nodeName": "node-1",
            "pool": {"name": "node-1", "generation": 1, "resourceSliceCount": 2},
            "devices": [device("gpu-0-mig-1g-0", "mig-1g", "mig", "20"),
                        device("gpu-0-vgpu-0", "vgpu", "vgpu", "50")],
        },
    }  # fmt: skip


@pytest.mark.parametrize("version", ["v1", "v1beta2", "v1beta1"])
def test_compatibility_groups_of_counter_consumption_are_carried(version: str) -> None:
    record = decode_object("ResourceSlice", orjson.dumps(mig_and_vgpu_slice(version)), cluster="c")
    assert isinstance(record, SliceRecord)
    assert [(d.name, d.consumes_counters) for d in record.devices] == [
        ("gpu-0-mig-1g-0", (CounterConsumption("gpu-0-counters", {"multiprocessors": "20"}, ("mig",)),)),
        ("gpu-0-vgpu-0", (CounterConsumption("gpu-0-counters", {"multiprocessors": "50"}, ("vgpu",)),)),
    ]  # fmt: skip


def test_the_allocation_keeps_the_groups_the_scheduler_recorded() -> None:
    claim = numa_alignment_claim("v1")
    claim["status"] = {"allocation": {"devices": {"results": [{
        "request": "gpu", "driver": "gpu.example.com", "pool": "node-1",
        "device": "gpu-0-mig-1g-0", "compatibilityGroups": {"gpu-0-counters": ["mig"]},
    }]}}}  # fmt: skip
    record = decode_object("ResourceClaim", orjson.dumps(claim), cluster="c")
    assert isinstance(record, ClaimRecord) and record.allocation is not None
    assert record.allocation.results[0].compatibility_groups == {"gpu-0-counters": ("mig",)}
