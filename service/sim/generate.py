"""Big clusters in seconds, and the object shapes the scheduler and kubelet write.

`populate(store, ScaleSpec(nodes=5000, gpus_per_node=8, pods=40000), seed=…)` fills a store
with K nodes x G GPUs (one ResourceSlice per node, as the NVIDIA driver publishes whole GPUs),
one template-generated claim per pod and the pods themselves — already scheduled: claims carry
their allocation, the delete-protection finalizer and `reservedFor`, pods are Running on their
node. The allocations are computed arithmetically (claim i → node i // G, gpu-(i % G)), never
by evaluating CEL per pod, and everything goes in through `ClusterStore.bulk_load`, so 90,000
objects take seconds. A `pending` fraction of the pods asks for a GPU model the cluster does
not have and waits, Unschedulable, with a pending claim — as a real cluster would show them.

The objects are built with the shapes the `Controller` writes too (`service.sim.shapes`), so
generated and scheduled objects look the same.

Promises: deterministic for a seed (names, uids, uuids, placement); counts exactly as asked.
"""

from __future__ import annotations

import gc
import random
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from dra_mirror.service.model.records import (
    DELETE_PROTECTION_FINALIZER,
    POD_CLAIM_NAME_ANNOTATION,
)
from dra_mirror.service.sim import hardware
from dra_mirror.service.sim.shapes import (
    node_ip,
    node_selector,
    pod_ip,
    ready_node,
    running_status,
)
from dra_mirror.service.sim.store import ClusterStore, timestamp

__all__ = ["ScaleSpec", "populate"]

_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_IMAGE = "nvcr.io/nvidia/pytorch:25.08-py3"


@dataclass(frozen=True)
class ScaleSpec:
    """A scenario's `generate:` block."""

    nodes: int
    gpus_per_node: int = 8
    pods: int = 0  # one template claim each
    pending: float = 0.0  # fraction of pods that cannot be placed (they ask for an absent model)
    namespaces: int = 20
    profile: str = hardware.H100_80GB_HBM3.key
    missing_product: str = "NVIDIA H200"

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> ScaleSpec:
        spec = cls(
            nodes=int(doc["nodes"]),
            gpus_per_node=int(doc.get("gpusPerNode", 8)),
            pods=int(doc.get("pods", 0)),
            pending=float(doc.get("pending", 0.0)),
            namespaces=int(doc.get("namespaces", 20)),
            profile=str(doc.get("profile", hardware.H100_80GB_HBM3.key)),
        )
        placed = spec.pods - spec.pending_pods
        if placed > spec.nodes * spec.gpus_per_node:
            raise ValueError(f"generate: {placed} running pods need more GPUs than the nodes have")
        if spec.profile not in hardware.GPU_MODELS:
            raise ValueError(f"generate: unknown GPU profile {spec.profile!r}")
        return spec

    @property
    def pending_pods(self) -> int:
        return round(self.pods * self.pending)


# ---- the generator -----------------------------------------------------------------------------


def populate(store: ClusterStore, spec: ScaleSpec, *, seed: str, now: str | None = None) -> None:
    """Fill `store` with the generated cluster (see the module docstring)."""
    # Building ~90,000 nested dicts makes the cyclic garbage collector walk the growing heap
    # again and again; none of them is garbage, so pause it.
    enabled = gc.isenabled()
    gc.disable()
    try:
        _populate(store, spec, seed=seed, now=now)
    finally:
        if enabled:
            gc.enable()


def _populate(store: ClusterStore, spec: ScaleSpec, *, seed: str, now: str | None) -> None:
    rng = random.Random(seed)
    now = now or timestamp(datetime.now(UTC))

    def uid() -> str:
        return str(uuid.UUID(int=rng.getrandbits(128), version=4))

    def token(n: int) -> str:
        return "".join(rng.choices(_ALPHABET, k=n))

    namespaces = [f"team-{i:02d}" for i in range(spec.namespaces)]
    store.bulk_load(
        "namespaces",
        (
            {
                "metadata": {"name": ns},
                "spec": {"finalizers": ["kubernetes"]},
                "status": {"phase": "Active"},
            }
            for ns in namespaces
        ),
    )
    store.bulk_load("deviceclasses", [hardware.device_class("gpu.nvidia.com")])
    model = hardware.GPU_MODELS[spec.profile]
    group = hardware.DeviceGroup(model.key, spec.gpus_per_node, mig=False)
    nodes: list[dict] = []
    slices: list[dict] = []
    for i in range(spec.nodes):
        name = f"gpu-node-{i:05d}"
        node_uid = uid()
        nodes.append(_node(name, node_uid, i, spec))
        for sl in hardware.node_slices(name, node_uid, [group], seed=seed):
            sl["metadata"]["name"] = f"{name}-gpu.nvidia.com-{token(5)}"
            slices.append(sl)
    store.bulk_load("nodes", nodes)
    store.bulk_load("resourceslices", slices)
    store.bulk_load("resourceclaimtemplates", _templates(namespaces, spec))

    claims: list[dict] = []
    pods: list[dict] = []
    running = spec.pods - spec.pending_pods
    for i in range(spec.pods):
        ns = namespaces[i % len(namespaces)]
        workload = f"train-{i // 8 % 500:03d}"
        pod_name = f"{workload}-{token(10)}-{token(5)}"
        pod_uid = uid()
        placed = i < running
        template = "gpu" if placed else "big-gpu"
        claim_name = f"{pod_name}-gpu-{token(5)}"
        claim: dict[str, Any] = {
            "metadata": {
                "name": claim_name,
                "generateName": f"{pod_name}-gpu-",
                "namespace": ns,
                "uid": uid(),
                "annotations": {POD_CLAIM_NAME_ANNOTATION: "gpu"},
                "ownerReferences": [
                    {
                        "apiVersion": "v1",
                        "kind": "Pod",
                        "name": pod_name,
                        "uid": pod_uid,
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
            },
            "spec": _claim_spec(spec if not placed else None),
        }
        pod: dict[str, Any] = {
            "metadata": {
                "name": pod_name,
                "namespace": ns,
                "uid": pod_uid,
                "labels": {"app": workload},
            },
            "spec": {
                "containers": [
                    {"name": "trainer", "image": _IMAGE, "resources": {"claims": [{"name": "gpu"}]}}
                ],
                "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": template}],
                "restartPolicy": "Always",
            },
        }
        claim_status = [{"name": "gpu", "resourceClaimName": claim_name}]
        if placed:
            node_index, gpu = divmod(i, spec.gpus_per_node)
            node = nodes[node_index]["metadata"]["name"]
            claim["metadata"]["finalizers"] = [DELETE_PROTECTION_FINALIZER]
            claim["status"] = {
                "allocation": {
                    "devices": {
                        "results": [
                            {
                                "request": "gpu",
                                "driver": hardware.GPU_DRIVER,
                                "pool": node,
                                "device": f"gpu-{gpu}",
                            }
                        ]
                    },
                    "nodeSelector": node_selector(node),
                },
                "reservedFor": [{"resource": "pods", "name": pod_name, "uid": pod_uid}],
            }
            pod["spec"]["nodeName"] = node
            status = running_status(
                pod, host_ip=node_ip(node_index), ip=pod_ip(node_index, gpu), now=now
            )
            pod["status"] = {
                **status,
                "qosClass": "BestEffort",
                "resourceClaimStatuses": claim_status,
            }
        else:
            pod["status"] = {
                "phase": "Pending",
                "qosClass": "BestEffort",
                "conditions": [
                    {
                        "type": "PodScheduled",
                        "status": "False",
                        "lastProbeTime": None,
                        "lastTransitionTime": now,
                        "reason": "Unschedulable",
                        "message": f"0/{spec.nodes} nodes are available: {spec.nodes} cannot "
                        "allocate all claims. preemption: 0/{n} nodes are available: {n} "
                        "Preemption is not helpful for scheduling.".format(n=spec.nodes),
                    }
                ],
                "resourceClaimStatuses": claim_status,
            }
        claims.append(claim)
        pods.append(pod)
    store.bulk_load("resourceclaims", claims)
    store.bulk_load("pods", pods)


def _node(name: str, node_uid: str, index: int, spec: ScaleSpec) -> dict:
    product = hardware.GPU_MODELS[spec.profile].product_name.replace(" ", "-")
    return ready_node(
        name,
        ordinal=index,
        uid=node_uid,
        labels={
            "nvidia.com/gpu.product": product,
            "topology.kubernetes.io/zone": f"zone-{index % 3}",
        },
        allocatable={"cpu": "192", "memory": "2Ti", "pods": "110", "ephemeral-storage": "3Ti"},
    )


def _claim_spec(missing: ScaleSpec | None) -> dict:
    exact: dict[str, Any] = {
        "deviceClassName": "gpu.nvidia.com",
        "allocationMode": "ExactCount",
        "count": 1,
    }
    if missing is not None:
        exact["selectors"] = [
            {
                "cel": {
                    "expression": "device.attributes['gpu.nvidia.com'].productName == "
                    f"'{missing.missing_product}'"
                }
            }
        ]
    return {"devices": {"requests": [{"name": "gpu", "exactly": exact}]}}


def _templates(namespaces: list[str], spec: ScaleSpec) -> list[dict]:
    out = []
    for ns in namespaces:
        for name, missing in (("gpu", None), ("big-gpu", spec)):
            out.append(
                {
                    "metadata": {"name": name, "namespace": ns},
                    "spec": {"spec": _claim_spec(missing)},
                }
            )
    return out
