"""Fields Kubernetes 1.35-1.37 added, decoded from every API version that has them.

Each object is written in its version's own shape (v1 and v1beta2 put device fields at the top
level, v1beta1 under `basic`), as the API server serves it; `kubernetes/api` types.go at
v0.35, v0.36 and master says which version has which field. A field the mirror does not know
yet never costs the object: it is decoded all the same.
"""

from __future__ import annotations

import orjson
import pytest

from dra_mirror.service.model.decode import decode_object
from dra_mirror.service.model.records import ClaimRecord, PodRecord, SliceRecord

GPU = "gpu.nvidia.com"
DRA = "resource.k8s.io"

# Device fields of 1.35 (binding conditions), 1.36 (list attributes, the alpha node-allocatable
# mappings) and 1.37 (nodeAllocatableResources).
DEVICE_FIELDS = {
    "attributes": {
        "uuid": {"string": "GPU-1"},
        "cores": {"ints": [0, 1, 2]},
        "links": {"bools": [True, False]},
        "profiles": {"strings": ["1g.10gb", "2g.20gb"]},
        "firmware": {"versions": ["1.2.3", "1.3.0"]},
    },
    "capacity": {"memory": {"value": "80Gi"}},
    "bindsToNode": True,
    "bindingConditions": ["dra.example.com/attached"],
    "bindingFailureConditions": ["dra.example.com/attach-failed"],
    "nodeAllocatableResources": {
        "memory": {"overhead": {"perPod": "2Gi"}},
        "cpu": {"mapping": {"deviceMultiplier": "8"}},
    },
    "nodeAllocatableResourceMappings": {"memory": {"allocationMultiplier": "2Gi"}},
}
SLICE_FIELDS = {
    "partitionTypeAttribute": f"{GPU}/profile",
    "skipNodeOperations": ["NodePrepareResources", "NodeUnprepareResources"],
}


def _slice(version: str) -> dict:
    device = {"name": "gpu-0", **DEVICE_FIELDS}
    if version == "v1beta1":
        device = {"name": "gpu-0", "basic": DEVICE_FIELDS}
    return {
        "apiVersion": f"{DRA}/{version}",
        "kind": "ResourceSlice",
        "metadata": {"name": "n1-gpu", "uid": "s1", "resourceVersion": "1"},
        "spec": {
            "driver": GPU,
            "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1},
            "nodeName": "n1",
            "devices": [device],
            "someFieldOf138": {"anything": True},  # newer than the mirror: ignored
            **SLICE_FIELDS,
        },
    }


def _decode(kind: str, raw: dict) -> object:
    return decode_object(kind, orjson.dumps(raw), cluster="east")


@pytest.mark.parametrize("version", ["v1", "v1beta2", "v1beta1"])
def test_slices_keep_the_newer_device_and_slice_fields(version: str) -> None:
    record = _decode("ResourceSlice", _slice(version))
    assert isinstance(record, SliceRecord)
    assert record.partition_type_attribute == f"{GPU}/profile"
    assert record.skip_node_operations == ("NodePrepareResources", "NodeUnprepareResources")
    (device,) = record.devices
    attributes = {name: (a.type, a.value) for name, a in device.attributes.items()}
    assert attributes == {
        f"{GPU}/uuid": ("string", "GPU-1"),
        f"{GPU}/cores": ("ints", [0, 1, 2]),
        f"{GPU}/links": ("bools", [True, False]),
        f"{GPU}/profiles": ("strings", ["1g.10gb", "2g.20gb"]),
        f"{GPU}/firmware": ("versions", ["1.2.3", "1.3.0"]),
    }
    assert device.uuid == "GPU-1"
    assert device.binds_to_node is True
    assert device.binding_conditions == ("dra.example.com/attached",)
    assert device.binding_failure_conditions == ("dra.example.com/attach-failed",)
    assert device.node_allocatable_resources == DEVICE_FIELDS["nodeAllocatableResources"]
    assert device.node_allocatable_resource_mappings == {"memory": {"allocationMultiplier": "2Gi"}}


def test_every_version_gives_the_same_record() -> None:
    records = [_decode("ResourceSlice", _slice(v)) for v in ("v1", "v1beta2", "v1beta1")]
    assert records[0] == records[1] == records[2]


def _claim(version: str) -> dict:
    request = {"name": "gpu", "exactly": {"deviceClassName": "gpu"}}
    if version == "v1beta1":
        request = {"name": "gpu", "deviceClassName": "gpu"}
    result = {
        "request": "gpu", "driver": GPU, "pool": "n1", "device": "gpu-0",
        "bindingConditions": ["dra.example.com/attached"],
        "bindingFailureConditions": ["dra.example.com/attach-failed"],
        "skipNodeOperations": ["*"],
    }  # fmt: skip
    return {
        "apiVersion": f"{DRA}/{version}",
        "kind": "ResourceClaim",
        "metadata": {"name": "c", "namespace": "ns", "uid": "c1", "resourceVersion": "1"},
        "spec": {"devices": {"requests": [request]}},
        "status": {"allocation": {"devices": {"results": [result]}}},
    }


@pytest.mark.parametrize("version", ["v1", "v1beta2", "v1beta1"])
def test_allocation_results_keep_binding_conditions_and_skipped_operations(version: str) -> None:
    record = _decode("ResourceClaim", _claim(version))
    assert isinstance(record, ClaimRecord) and record.allocation is not None
    (result,) = record.allocation.results
    assert result.binding_conditions == ("dra.example.com/attached",)
    assert result.binding_failure_conditions == ("dra.example.com/attach-failed",)
    assert result.skip_node_operations == ("*",)


POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "w0", "namespace": "ns", "uid": "p1", "resourceVersion": "1"},
    "spec": {
        "schedulingGroup": {"podGroupName": "trainers"},
        "resourceClaims": [{"name": "gpu", "resourceClaimName": "shared"}],
        "containers": [
            {"name": "main", "resources": {"claims": [{"name": "gpu", "request": "r"}]}},
            {"name": "side", "resources": {"limits": {"nvidia.com/gpu": "1"}}},
        ],
    },
    "status": {
        "phase": "Running",
        "extendedResourceClaimStatus": {
            "resourceClaimName": "w0-extended-resources-abcde",
            "requestMappings": [
                {"containerName": "side", "resourceName": "nvidia.com/gpu",
                 "requestName": "container-1-request-0"},
            ],
        },
        "containerStatuses": [
            {
                "name": "main", "image": "cuda", "ready": True, "restartCount": 0,
                "allocatedResourcesStatus": [
                    {"name": "claim:gpu/r", "resources": [
                        {"resourceID": f"{GPU}/n1/gpu-0", "health": "Unhealthy",
                         "message": "XID 79"}]},
                ],
            },
            {
                "name": "side", "image": "cuda", "ready": True, "restartCount": 0,
                "allocatedResourcesStatus": [
                    {"name": "claim:w0-extended-resources-abcde/container-1-request-0",
                     "resources": [{"resourceID": f"{GPU}/pool/with/slashes/gpu-1",
                                    "health": "Healthy"}]},
                    # a device plugin's resource: not DRA's
                    {"name": "nvidia.com/gpu", "resources": [{"resourceID": "GPU-9"}]},
                ],
            },
        ],
    },
}  # fmt: skip


def test_pods_keep_their_group_extended_claim_and_device_health() -> None:
    pod = _decode("Pod", POD)
    assert isinstance(pod, PodRecord)
    assert pod.pod_group == "trainers"
    assert pod.extended_claim_name == "w0-extended-resources-abcde"
    assert [(r.container, r.resource, r.request) for r in pod.extended_requests] == [
        ("side", "nvidia.com/gpu", "container-1-request-0")
    ]
    health = [
        (h.container, h.claim_name, h.request, h.driver, h.pool, h.device, h.health, h.message)
        for h in pod.device_health
    ]
    assert health == [
        ("main", "shared", "r", GPU, "n1", "gpu-0", "Unhealthy", "XID 79"),
        ("side", "w0-extended-resources-abcde", "container-1-request-0", GPU,
         "pool/with/slashes", "gpu-1", "Healthy", None),
    ]  # fmt: skip


def test_a_pod_without_the_newer_fields_has_none_of_them() -> None:
    plain = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns"}}
    pod = _decode("Pod", plain)
    assert isinstance(pod, PodRecord)
    assert (pod.pod_group, pod.extended_requests, pod.device_health) == (None, (), ())
