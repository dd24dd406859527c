"""The operations manual's "When Nothing Is Allocated" rows, each staged in a simulated cluster
(the simulator schedules the pods with the shared allocator; what it cannot place stays
Pending), mirrored as records and diagnosed by explain_claim with the exact verdict.

Staged (cluster `manual`):

* a claim for a DeviceClass that does not exist (a typo);
* a claim whose selector matches no device (an H200 in a cluster of A100s and H100s);
* an A100 held by a hand-made claim nobody uses: the next A100 pod finds every A100 held — one
  holder, idle;
* one H100 and two single-replica deployments asking for it through templates: the first pod
  took it, sharing is off for the second;
* a DeviceClass of a driver that is not installed (gpu.amd.com) on a cluster with a
  device-plugin GPU node.

The last row of the table (allocated, but the pod Pending for CPU) cannot be staged: the
simulator's scheduler does not count CPU; `test_explain` covers it with records.
"""

from __future__ import annotations

import pytest

from dra_mirror.service.sim.scenario import build_world, parse_scenario
from tests.diagnostics.conftest import Cluster, mirror
from tests.diagnostics.manifests import A100, H100, template, workload

SCENARIO = {
    "name": "manual",
    "seed": 3,
    "clusters": [
        {
            "name": "manual",
            "namespaces": ["ops"],
            "deviceClasses": ["gpu.nvidia.com"],
            "nodes": [
                {"name": "a100-0", "devices": [{"profile": "nvidia-a100-80gb-pcie", "count": 1}]},
                {"name": "h100-0", "devices": [{"profile": "nvidia-h100-80gb-hbm3", "count": 1}]},
                {"name": "legacy-0", "devicePlugin": {"nvidia.com/gpu": "2"}},
            ],
            "objects": [
                {
                    "apiVersion": "resource.k8s.io/v1",
                    "kind": "DeviceClass",
                    "metadata": {"name": "gpu.amd.com"},
                    "spec": {
                        "selectors": [{"cel": {"expression": "device.driver == 'gpu.amd.com'"}}]
                    },
                },
                {
                    "apiVersion": "resource.k8s.io/v1",
                    "kind": "ResourceClaim",
                    "metadata": {"name": "forgotten", "namespace": "ops"},
                    "spec": {
                        "devices": {
                            "requests": [
                                {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}
                            ]
                        }
                    },
                    "status": {
                        "allocation": {
                            "devices": {
                                "results": [
                                    {
                                        "request": "gpu",
                                        "driver": "gpu.nvidia.com",
                                        "pool": "a100-0",
                                        "device": "gpu-0",
                                    }
                                ]
                            },
                            "nodeSelector": {
                                "nodeSelectorTerms": [
                                    {
                                        "matchFields": [
                                            {
                                                "key": "metadata.name",
                                                "operator": "In",
                                                "values": ["a100-0"],
                                            }
                                        ]
                                    }
                                ]
                            },
                        }
                    },
                },
                template("typo", "gpu.nvidia.cmo"),
                template(
                    "h200",
                    "gpu.nvidia.com",
                    "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H200'",
                ),
                template("a100", "gpu.nvidia.com", A100),
                template("h100", "gpu.nvidia.com", H100),
                template("amd", "gpu.amd.com"),
            ],
            "workloads": [
                workload("typo", "typo"),
                workload("h200", "h200"),
                workload("a100", "a100"),
                workload("first", "h100"),
                workload("second", "h100"),
                workload("amd", "amd"),
            ],
        }
    ],
}


@pytest.fixture(scope="module")
def manual() -> Cluster:
    world = build_world(parse_scenario(SCENARIO))
    return mirror(world.stores["manual"])


def diagnose(cluster: Cluster, workload_name: str):
    [pod] = [p for p in cluster.pods if p.meta.name.startswith(f"{workload_name}-")]
    [claim] = [c for k, c in cluster.claims.items() if k.name.startswith(f"{pod.meta.name}-gpu-")]
    return pod, cluster.explain(claim)


def test_the_scheduler_left_exactly_the_staged_pods_pending(manual: Cluster) -> None:
    pending = sorted(p.meta.name.split("-")[0] for p in manual.pods if p.phase == "Pending")
    assert pending == ["a100", "amd", "h200", "second", "typo"]


def test_device_class_does_not_exist(manual: Cluster) -> None:
    pod, d = diagnose(manual, "typo")
    assert d.verdict == "class-missing"
    assert d.message == "request gpu: DeviceClass gpu.nvidia.cmo does not exist"
    assert [k.name for k in d.pods] == [pod.meta.name]


def test_no_device_matches_the_conditions(manual: Cluster) -> None:
    _, d = diagnose(manual, "h200")
    assert d.verdict == "no-match"
    assert d.message == (
        "request gpu: no device matches the conditions: "
        "\"device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H200'\" rejected 2 of 2 "
        "(GPU nodes where gpu.nvidia.com publishes no devices: legacy-0)"
    )


def test_no_devices_left_held_by_an_idle_claim(manual: Cluster) -> None:
    _, d = diagnose(manual, "a100")
    assert d.verdict == "all-held"
    assert d.message == (
        "request gpu: no devices left: every matching device is held by ops/forgotten (idle); "
        "1 of them idle (GPU nodes where gpu.nvidia.com publishes no devices: legacy-0)"
    )
    [holder] = d.holders
    assert (holder.claim.name, holder.idle, holder.pods) == ("forgotten", True, [])


def test_sharing_is_off_and_another_pod_took_the_device_first(manual: Cluster) -> None:
    [first] = [p for p in manual.pods if p.meta.name.startswith("first-")]
    assert (first.phase, first.node_name) == ("Running", "h100-0")
    _, d = diagnose(manual, "second")
    assert d.verdict == "sharing-off"
    [holder] = d.holders
    assert holder.running and holder.pods[0].name == first.meta.name
    assert d.message.startswith(
        f"request gpu: sharing is off and another pod took the device first: ops/{first.meta.name} "
        f"(through ops/{holder.claim.name})"
    )


def test_the_driver_publishes_no_devices(manual: Cluster) -> None:
    _, d = diagnose(manual, "amd")
    assert d.verdict == "driver-missing"
    assert d.nodes_without_driver == ["legacy-0"]
    assert d.message == (
        "request gpu: the driver gpu.amd.com publishes no devices (no ResourceSlice from it); "
        "GPU nodes without its devices: legacy-0"
    )
