"""The object shapes kube-scheduler, kubelet and workload controllers write, as the simulator
writes them: a pod as a controller creates it, a Ready node as kubelet registers it, the
allocation kube-scheduler records on a claim, the status kubelet reports for a running pod, and
the node and pod addresses a CNI would hand out.

Both the generator (`service.sim.generate`) and the controllers (`service.sim.controller`) build
objects with these, so generated and scheduled objects look the same.

Promises: pure functions returning new dicts in their storage shape (core/v1,
resource.k8s.io/v1); the same arguments give the same object.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Any

from dra_mirror.service.model.records import Allocation

__all__ = [
    "DEFAULT_IMAGE",
    "allocation_dict",
    "node_ip",
    "node_selector",
    "pod_ip",
    "pod_object",
    "ready_node",
    "running_status",
    "scheduled_condition",
]

DEFAULT_IMAGE = "nvcr.io/nvidia/cuda:12.9.0-base-ubuntu24.04"


def node_selector(node: str) -> dict[str, Any]:
    """The allocation nodeSelector kube-scheduler writes for node-local devices."""
    return {
        "nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
        ]
    }


def allocation_dict(allocation: Allocation) -> dict[str, Any]:
    """`status.allocation` (resource.k8s.io/v1) for an allocator result."""
    results = []
    for r in allocation.results:
        result: dict[str, Any] = {
            "request": r.request,
            "driver": r.driver,
            "pool": r.pool,
            "device": r.device,
        }
        if r.admin_access:
            result["adminAccess"] = True
        if r.share_id:
            result["shareID"] = r.share_id
        if r.consumed_capacity:
            result["consumedCapacity"] = dict(r.consumed_capacity)
        if r.compatibility_groups:  # KEP-5963: the snapshot the scheduler writes
            result["compatibilityGroups"] = {k: list(v) for k, v in r.compatibility_groups.items()}
        results.append(result)
    devices: dict[str, Any] = {"results": results}
    if allocation.config:
        devices["config"] = [dict(c) for c in allocation.config]
    out: dict[str, Any] = {"devices": devices}
    if allocation.node_selector:
        out["nodeSelector"] = allocation.node_selector
    elif allocation.node_name:
        out["nodeSelector"] = node_selector(allocation.node_name)
    return out


def pod_ip(node_index: int, slot: int) -> str:
    """A pod IP from the node's /24 of the pod CIDR 10.128.0.0/9 (as a CNI would hand out)."""
    return f"10.{128 + node_index // 256 % 128}.{node_index % 256}.{2 + slot % 250}"


def scheduled_condition(now: str) -> dict[str, Any]:
    return {
        "type": "PodScheduled",
        "status": "True",
        "lastProbeTime": None,
        "lastTransitionTime": now,
    }


def running_status(pod: dict, *, host_ip: str, ip: str, now: str) -> dict[str, Any]:
    """The status kubelet reports once every container runs."""
    containers = pod["spec"].get("containers") or []
    conditions = [
        {"type": t, "status": "True", "lastProbeTime": None, "lastTransitionTime": now}
        for t in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady")
    ]
    return {
        "phase": "Running",
        "conditions": [*conditions, scheduled_condition(now)],
        "hostIP": host_ip,
        "hostIPs": [{"ip": host_ip}],
        "podIP": ip,
        "podIPs": [{"ip": ip}],
        "startTime": now,
        "containerStatuses": [
            {
                "name": c["name"],
                "image": c.get("image", ""),
                "imageID": "",
                "containerID": "containerd://"
                + hashlib.sha256(f"{pod['metadata'].get('uid')}/{c['name']}".encode()).hexdigest(),
                "ready": True,
                "started": True,
                "restartCount": 0,
                "state": {"running": {"startedAt": now}},
            }
            for c in containers
        ],
    }


def pod_object(
    name: str,
    namespace: str,
    *,
    claims: Iterable[dict[str, str]] = (),
    node_selector: dict[str, str] | None = None,
    limits: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    owner: dict[str, Any] | None = None,
    image: str = DEFAULT_IMAGE,
) -> dict[str, Any]:
    """A pod as a workload controller creates it: one container `main` that uses every claim
    (`claims` entries are pod.spec.resourceClaims entries, optionally with `request`)."""
    claims = list(claims)
    container: dict[str, Any] = {
        "name": "main",
        "image": image,
        "command": ["bash", "-c", "nvidia-smi -L; trap 'exit 0' TERM; sleep 9999 & wait"],
    }
    resources: dict[str, Any] = {}
    if claims:
        resources["claims"] = [
            {"name": c["name"], **({"request": c["request"]} if c.get("request") else {})}
            for c in claims
        ]
    if limits:
        resources["limits"] = dict(limits)
    if resources:
        container["resources"] = resources
    spec: dict[str, Any] = {"containers": [container], "restartPolicy": "Always"}
    if claims:
        spec["resourceClaims"] = [{k: v for k, v in c.items() if k != "request"} for c in claims]
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if labels:
        meta["labels"] = dict(labels)
    if owner:
        meta["ownerReferences"] = [owner]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def node_ip(node_index: int) -> str:
    """A node's InternalIP in 10.0.0.0/16."""
    return f"10.0.{node_index // 250 % 256}.{node_index % 250 + 2}"


def ready_node(
    name: str,
    *,
    ordinal: int,
    labels: dict[str, str],
    allocatable: dict[str, str],
    uid: str | None = None,
) -> dict:
    """A Ready core/v1 Node as kubelet registers it: the well-known hostname/os/arch labels
    (then `labels`), capacity = allocatable, InternalIP `node_ip(ordinal)`, a v1.35 kubelet."""
    metadata: dict[str, Any] = {
        "name": name,
        "labels": {
            "kubernetes.io/hostname": name,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            **labels,
        },
    }
    if uid is not None:
        metadata["uid"] = uid
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": metadata,
        "spec": {},
        "status": {
            "capacity": dict(allocatable),
            "allocatable": allocatable,
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "KubeletReady",
                    "message": "kubelet is posting ready status",
                }
            ],
            "addresses": [
                {"type": "InternalIP", "address": node_ip(ordinal)},
                {"type": "Hostname", "address": name},
            ],
            "nodeInfo": {
                "kubeletVersion": "v1.35.0",
                "containerRuntimeVersion": "containerd://2.1.4",
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
        },
    }
