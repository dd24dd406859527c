"""A small two-cluster DRA world as raw Kubernetes objects (resource.k8s.io/v1, core v1), and
the truth about it computed straight from those dicts — never through the graph's code.

east: nodes n1, n2. n1 has an H200-like GPU `gpu-0` partitioned by a counter set (MIG devices
`gpu-0-mig-1g` and `gpu-0-mig-2g`), a plain `gpu-1`, an old-generation slice (ignored), and a
shareable NIC `eth1` with consumable bandwidth. n2's pool is incomplete (1 of 2 slices).
Claims: a shared claim used by three replicas, a MIG claim, two NIC shares, an idle hand-made
claim, template claims (one allocated, one pending), a claim being deleted; a pod still asking
for `nvidia.com/gpu` limits. west: one node, one GPU held by a claim — so the bare name `gpu-0`
is ambiguous across clusters.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

GPU = "gpu.nvidia.com"
NIC = "cni.dra.networking.x-k8s.io"
CREATED = "2026-01-01T00:00:00Z"


def meta(name: str, namespace: str | None = None, **extra: Any) -> dict[str, Any]:
    m: dict[str, Any] = {
        "name": name,
        "uid": f"uid-{namespace or ''}-{name}",
        "creationTimestamp": CREATED,
    }
    if namespace:
        m["namespace"] = namespace
    m.update(extra)
    return m


def node(name: str, zone: str) -> dict[str, Any]:
    return {
        "metadata": meta(name, labels={"topology.kubernetes.io/zone": zone}),
        "status": {
            "allocatable": {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "2"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def device_class(name: str, expression: str) -> dict[str, Any]:
    return {"metadata": meta(name), "spec": {"selectors": [{"cel": {"expression": expression}}]}}


def gpu(name: str, uuid: str, kind: str = "gpu", counters: dict[str, str] | None = None) -> dict:
    device: dict[str, Any] = {
        "name": name,
        "attributes": {
            "type": {"string": kind},
            "uuid": {"string": uuid},
            "productName": {"string": "NVIDIA H200"},
        },
        "capacity": {"memory": {"value": "143771Mi" if kind == "gpu" else "18Gi"}},
    }
    if counters:
        device["consumesCounters"] = [
            {
                "counterSet": "gpu-0-counter-set",
                "counters": {k: {"value": v} for k, v in counters.items()},
            }
        ]
    return device


def slice_(
    name: str,
    driver: str,
    pool: str,
    node_name: str,
    devices: list[dict],
    *,
    generation: int = 1,
    count: int = 1,
    counters: list[dict] | None = None,
) -> dict:
    spec: dict[str, Any] = {
        "driver": driver,
        "pool": {"name": pool, "generation": generation, "resourceSliceCount": count},
        "nodeName": node_name,
    }
    if devices:
        spec["devices"] = devices
    if counters:
        spec["sharedCounters"] = counters
    return {"metadata": meta(name), "spec": spec}


SLICES_ALL = [f"memory-slice-{i}" for i in range(8)]


def claim(
    namespace: str,
    name: str,
    class_name: str,
    *,
    results: list[dict] | None = None,
    node_name: str | None = None,
    reserved: list[str] = (),
    count: int = 1,
    capacity: dict[str, str] | None = None,
    **meta_extra: Any,
) -> dict:
    exactly: dict[str, Any] = {
        "deviceClassName": class_name,
        "allocationMode": "ExactCount",
        "count": count,
    }
    if capacity:
        exactly["capacity"] = {"requests": capacity}
    body: dict[str, Any] = {
        "metadata": meta(name, namespace, **meta_extra),
        "spec": {"devices": {"requests": [{"name": "req", "exactly": exactly}]}},
        "status": {},
    }
    if results is not None:
        allocation: dict[str, Any] = {"devices": {"results": results}}
        if node_name:
            allocation["nodeSelector"] = {
                "nodeSelectorTerms": [
                    {
                        "matchFields": [
                            {"key": "metadata.name", "operator": "In", "values": [node_name]}
                        ]
                    }
                ]
            }
        body["status"]["allocation"] = allocation
    if reserved:
        body["status"]["reservedFor"] = [
            {"resource": "pods", "name": pod, "uid": f"uid-{namespace}-{pod}"} for pod in reserved
        ]
    return body


def result(driver: str, pool: str, device: str, **extra: Any) -> dict:
    return {"request": "req", "driver": driver, "pool": pool, "device": device, **extra}


def pod(
    namespace: str,
    name: str,
    *,
    node_name: str | None,
    phase: str,
    claims: dict[str, str] | None = None,
    templates: dict[str, tuple[str, str | None]] | None = None,
    limits: dict[str, str] | None = None,
    **meta_extra: Any,
) -> dict:
    pod_claims = [
        {"name": local, "resourceClaimName": real} for local, real in (claims or {}).items()
    ]
    statuses = []
    for local, (template, generated) in (templates or {}).items():
        pod_claims.append({"name": local, "resourceClaimTemplateName": template})
        statuses.append({"name": local, "resourceClaimName": generated})
    container: dict[str, Any] = {
        "name": "main",
        "image": "busybox",
        "resources": {"claims": [{"name": c["name"]} for c in pod_claims]},
    }
    if limits:
        container["resources"]["limits"] = limits
    spec: dict[str, Any] = {"containers": [container], "resourceClaims": pod_claims}
    if node_name:
        spec["nodeName"] = node_name
    status: dict[str, Any] = {"phase": phase}
    if statuses:
        status["resourceClaimStatuses"] = statuses
    return {"metadata": meta(name, namespace, **meta_extra), "spec": spec, "status": status}


def template_claim(namespace: str, pod_name: str, local: str, generated: str, template: str, **kw):
    owner = {
        "apiVersion": "v1",
        "kind": "Pod",
        "name": pod_name,
        "uid": f"uid-{namespace}-{pod_name}",
        "controller": True,
        "blockOwnerDeletion": True,
    }
    return claim(
        namespace,
        generated,
        "gpu.nvidia.com",
        ownerReferences=[owner],
        annotations={"resource.kubernetes.io/pod-claim-name": local},
        **kw,
    )


def east() -> dict[str, list[dict]]:
    counters = [{"name": "gpu-0-counter-set", "counters": {s: {"value": "1"} for s in SLICES_ALL}}]
    return {
        "Node": [node("n1", "a"), node("n2", "b")],
        "DeviceClass": [
            device_class(
                "gpu.nvidia.com",
                f"device.driver == '{GPU}' && device.attributes['{GPU}'].type == 'gpu'",
            ),
            device_class(
                "mig.nvidia.com",
                f"device.driver == '{GPU}' && device.attributes['{GPU}'].type == 'mig'",
            ),
            device_class("nic.example.com", f"device.driver == '{NIC}'"),
        ],
        "ResourceSlice": [
            slice_(
                "n1-gpu",
                GPU,
                "n1",
                "n1",
                [
                    gpu(
                        "gpu-0",
                        "GPU-00000000-0000-0000-0000-00000000000a",
                        counters=dict.fromkeys(SLICES_ALL, "1"),
                    ),
                    gpu(
                        "gpu-0-mig-1g",
                        "MIG-00000000-0000-0000-0000-0000000001a1",
                        "mig",
                        {"memory-slice-0": "1"},
                    ),
                    gpu(
                        "gpu-0-mig-2g",
                        "MIG-00000000-0000-0000-0000-0000000002a2",
                        "mig",
                        {"memory-slice-1": "1", "memory-slice-2": "1"},
                    ),
                    gpu("gpu-1", "GPU-00000000-0000-0000-0000-00000000000b"),
                ],
                count=2,
            ),
            slice_("n1-gpu-counters", GPU, "n1", "n1", [], count=2, counters=counters),
            slice_(
                "n1-gpu-old",
                GPU,
                "n1",
                "n1",
                [gpu("gpu-9", "GPU-00000000-0000-0000-0000-000000000009")],
                generation=0,
                count=1,
            ),
            slice_(
                "n2-gpu",
                GPU,
                "n2",
                "n2",
                [
                    gpu("gpu-0", "GPU-00000000-0000-0000-0000-00000000000c"),
                    gpu("gpu-1", "GPU-00000000-0000-0000-0000-00000000000d"),
                ],
                generation=3,
                count=2,
            ),
            slice_(
                "n1-nic",
                NIC,
                "n1",
                "n1",
                [
                    {
                        "name": "eth1",
                        "allowMultipleAllocations": True,
                        "attributes": {"interface": {"string": "eth1"}},
                        "capacity": {
                            "bandwidth": {
                                "value": "10G",
                                "requestPolicy": {
                                    "default": "1G",
                                    "validRange": {"min": "1G", "max": "10G", "step": "1G"},
                                },
                            }
                        },
                    }
                ],
            ),
        ],
        "ResourceClaimTemplate": [
            {
                "metadata": meta("single-gpu", "team-b"),
                "spec": {
                    "spec": {
                        "devices": {
                            "requests": [
                                {"name": "req", "exactly": {"deviceClassName": "gpu.nvidia.com"}}
                            ]
                        }
                    }
                },
            }
        ],
        "ResourceClaim": [
            claim(
                "team-a",
                "shared-gpu",
                "gpu.nvidia.com",
                results=[result(GPU, "n1", "gpu-1")],
                node_name="n1",
                reserved=["web-0", "web-1", "web-2"],
            ),
            claim(
                "team-a",
                "mig-claim",
                "mig.nvidia.com",
                results=[result(GPU, "n1", "gpu-0-mig-1g")],
                node_name="n1",
                reserved=["train-0"],
            ),
            claim(
                "team-a",
                "nic-a",
                "nic.example.com",
                capacity={f"{NIC}/bandwidth": "1G"},
                results=[
                    result(
                        NIC,
                        "n1",
                        "eth1",
                        shareID="share-a",
                        consumedCapacity={f"{NIC}/bandwidth": "1G"},
                    )
                ],
                node_name="n1",
                reserved=["web-0"],
            ),
            claim(
                "team-a",
                "nic-b",
                "nic.example.com",
                capacity={f"{NIC}/bandwidth": "2G"},
                results=[
                    result(
                        NIC,
                        "n1",
                        "eth1",
                        shareID="share-b",
                        consumedCapacity={f"{NIC}/bandwidth": "2G"},
                    )
                ],
                node_name="n1",
                reserved=["train-0"],
            ),
            claim(
                "team-c",
                "idle-claim",
                "gpu.nvidia.com",
                results=[result(GPU, "n2", "gpu-0")],
                node_name="n2",
            ),
            template_claim(
                "team-b",
                "job-0",
                "gpu",
                "job-0-gpu-abcde",
                "single-gpu",
                results=[result(GPU, "n2", "gpu-1")],
                node_name="n2",
                reserved=["job-0"],
            ),
            template_claim("team-b", "job-1", "gpu", "job-1-gpu-fghij", "single-gpu"),
            claim(
                "team-c",
                "leaving",
                "gpu.nvidia.com",
                deletionTimestamp="2026-01-01T01:00:00Z",
                finalizers=["resource.kubernetes.io/delete-protection"],
            ),
        ],
        "Pod": [
            pod(
                "team-a",
                "web-0",
                node_name="n1",
                phase="Running",
                claims={"gpu": "shared-gpu", "net": "nic-a"},
            ),
            pod("team-a", "web-1", node_name="n1", phase="Running", claims={"gpu": "shared-gpu"}),
            pod("team-a", "web-2", node_name="n1", phase="Running", claims={"gpu": "shared-gpu"}),
            pod(
                "team-a",
                "train-0",
                node_name="n1",
                phase="Running",
                claims={"mig": "mig-claim", "net": "nic-b"},
            ),
            pod(
                "team-b",
                "job-0",
                node_name="n2",
                phase="Running",
                templates={"gpu": ("single-gpu", "job-0-gpu-abcde")},
            ),
            pod(
                "team-b",
                "job-1",
                node_name=None,
                phase="Pending",
                templates={"gpu": ("single-gpu", "job-1-gpu-fghij")},
            ),
            pod(
                "team-c", "legacy", node_name="n2", phase="Running", limits={"nvidia.com/gpu": "1"}
            ),
        ],
    }


def west() -> dict[str, list[dict]]:
    return {
        "Node": [node("w1", "c")],
        "DeviceClass": [device_class("gpu.nvidia.com", f"device.driver == '{GPU}'")],
        "ResourceSlice": [
            slice_(
                "w1-gpu",
                GPU,
                "w1",
                "w1",
                [gpu("gpu-0", "GPU-00000000-0000-0000-0000-00000000000e")],
            )
        ],
        "ResourceClaimTemplate": [],
        "ResourceClaim": [
            claim(
                "team-a",
                "west-claim",
                "gpu.nvidia.com",
                results=[result(GPU, "w1", "gpu-0")],
                node_name="w1",
                reserved=["west-pod"],
            ),
        ],
        "Pod": [
            pod("team-a", "west-pod", node_name="w1", phase="Running", claims={"gpu": "west-claim"})
        ],
    }


WORLD = {"east": east, "west": west}


# --- truth, from the dicts ------------------------------------------------------------------


def objects(kind: str) -> list[tuple[str, dict]]:
    return [(cluster, obj) for cluster, build in WORLD.items() for obj in build()[kind]]


def valid_devices() -> dict[tuple[str, str, str, str], dict]:
    """(cluster, driver, pool, device) -> device dict, highest generation of each pool only."""
    slices = objects("ResourceSlice")
    newest: dict[tuple, int] = defaultdict(int)
    for cluster, s in slices:
        key = (cluster, s["spec"]["driver"], s["spec"]["pool"]["name"])
        newest[key] = max(newest[key], s["spec"]["pool"]["generation"])
    found = {}
    for cluster, s in slices:
        spec = s["spec"]
        if spec["pool"]["generation"] != newest[(cluster, spec["driver"], spec["pool"]["name"])]:
            continue
        for d in spec.get("devices", []):
            found[(cluster, spec["driver"], spec["pool"]["name"], d["name"])] = {
                **d,
                "_node": spec["nodeName"],
            }
    return found


def holders() -> dict[tuple[str, str, str, str], list[tuple[str, str, str | None]]]:
    """device key -> [(namespace, claim, shareID)] from every claim's status.allocation."""
    held: dict[tuple, list] = defaultdict(list)
    for cluster, c in objects("ResourceClaim"):
        for r in c["status"].get("allocation", {}).get("devices", {}).get("results", []):
            held[(cluster, r["driver"], r["pool"], r["device"])].append(
                (c["metadata"]["namespace"], c["metadata"]["name"], r.get("shareID"))
            )
    return held


def claim_consumers(cluster: str, namespace: str, name: str) -> list[str]:
    for c_cluster, c in objects("ResourceClaim"):
        m = c["metadata"]
        if (c_cluster, m["namespace"], m["name"]) == (cluster, namespace, name):
            return sorted(r["name"] for r in c["status"].get("reservedFor", []))
    raise KeyError(name)
