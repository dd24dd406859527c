"""A small simulated cluster for the watcher and reactor tests, served through the simulator.

`small_world(name)` builds a `ClusterStore` with nodes, a DeviceClass, one slice per node with
two devices, claims (some allocated to a device and reserved by a running pod) and a template,
all created through the store's validating path as a client would. `truth(store, kind)` is
what the mirror must hold: every stored object normalized independently of the watchers.
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from dra_mirror.service.clusters.config import ClusterConnection, close_all, connect
from dra_mirror.service.model.kinds import KINDS
from dra_mirror.service.model.normalize import MalformedObject, normalize
from dra_mirror.service.model.records import key_of
from dra_mirror.service.sim.run import ClusterSpec, Simulator
from dra_mirror.service.sim.store import ClusterStore

DRIVER = "gpu.example.com"
CLASS = "gpu.example.com"
PLURALS = {
    "DeviceClass": "deviceclasses",
    "ResourceSlice": "resourceslices",
    "ResourceClaim": "resourceclaims",
    "ResourceClaimTemplate": "resourceclaimtemplates",
    "Pod": "pods",
    "Node": "nodes",
    "DeviceTaintRule": "devicetaintrules",
    "PodGroup": "podgroups",
    "ResourcePoolStatusRequest": "resourcepoolstatusrequests",
}


def node(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {
            "allocatable": {"cpu": "64", "memory": "512Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def device_slice(node_name: str, devices: int = 2) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node_name}-{DRIVER}"},
        "spec": {
            "driver": DRIVER,
            "nodeName": node_name,
            "pool": {"name": node_name, "generation": 1, "resourceSliceCount": 1},
            "devices": [
                {
                    "name": f"gpu-{i}",
                    "attributes": {
                        "uuid": {"string": f"GPU-{node_name}-{i}"},
                        "model": {"string": "Example GPU"},
                    },
                    "capacity": {"memory": {"value": "80Gi"}},
                }
                for i in range(devices)
            ],
        },
    }


def device_class() -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": CLASS},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
    }


def claim(name: str, namespace: str = "default") -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": CLASS}}]}},
    }


def template(name: str, namespace: str = "default") -> dict[str, Any]:
    body = claim(name, namespace)
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": body["metadata"],
        "spec": {"spec": body["spec"]},
    }


def pod(name: str, node_name: str, claim_name: str, namespace: str = "default") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "nodeName": node_name,
            "resourceClaims": [{"name": "gpu", "resourceClaimName": claim_name}],
            "containers": [
                {"name": "main", "image": "busybox", "resources": {"claims": [{"name": "gpu"}]}}
            ],
        },
    }


def pod_group(
    name: str,
    *,
    version: str = "v1beta1",
    claim_name: str | None = None,
    template_name: str | None = None,
    generated: str | None = None,
    namespace: str = "default",
) -> dict[str, Any]:
    """A PodGroup as a 1.37 workload controller writes it (scheduling.k8s.io/v1beta1, KEP-5729;
    v1alpha2 in 1.36 names its Workload through podGroupTemplateRef): a gang of two sharing one
    claim, named or made from a template (`generated`: the name status records for it)."""
    entry: dict[str, Any] = {"name": "shared-gpus"}
    if claim_name:
        entry["resourceClaimName"] = claim_name
    if template_name:
        entry["resourceClaimTemplateName"] = template_name
    spec: dict[str, Any] = {
        "schedulingPolicy": {"gang": {"minCount": 2}},
        "resourceClaims": [entry],
    }
    if version == "v1alpha2":
        spec["podGroupTemplateRef"] = {
            "workload": {"workloadName": "training", "podGroupTemplateName": "workers"}
        }
    else:
        spec["workloadRef"] = {"workloadName": "training", "templateName": "workers"}
    body: dict[str, Any] = {
        "apiVersion": f"scheduling.k8s.io/{version}",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }
    if generated:
        body["status"] = {
            "resourceClaimStatuses": [{"name": "shared-gpus", "resourceClaimName": generated}]
        }
    return body


def allocate(
    store: ClusterStore, claim_name: str, node_name: str, device: str, pod_obj: dict
) -> None:
    """Allocate a claim to one device and reserve it for a pod, as the scheduler would."""
    status = {
        "allocation": {
            "devices": {
                "results": [
                    {"request": "gpu", "driver": DRIVER, "pool": node_name, "device": device}
                ]
            },
            "nodeSelector": {
                "nodeSelectorTerms": [
                    {
                        "matchFields": [
                            {"key": "metadata.name", "operator": "In", "values": [node_name]}
                        ]
                    }
                ]
            },
        },
        "reservedFor": [
            {
                "resource": "pods",
                "name": pod_obj["metadata"]["name"],
                "uid": pod_obj["metadata"]["uid"],
            }
        ],
    }
    store.patch("resourceclaims", "default", claim_name, {"status": status}, subresource="status")
    store.patch(
        "pods",
        "default",
        pod_obj["metadata"]["name"],
        {"status": {"phase": "Running"}},
        subresource="status",
    )


def small_world(name: str, *, nodes: int = 3) -> ClusterStore:
    store = ClusterStore(name)
    store.create("deviceclasses", device_class())
    for i in range(nodes):
        store.create("nodes", node(f"node-{i}"))
        store.create("resourceslices", device_slice(f"node-{i}"))
    store.create("resourceclaimtemplates", template("gpu-template"))
    for i in range(nodes):
        store.create("resourceclaims", claim(f"claim-{i}"))
        created = store.create("pods", pod(f"pod-{i}", f"node-{i}", f"claim-{i}"))
        if i % 2 == 0:
            allocate(store, f"claim-{i}", f"node-{i}", "gpu-0", created)
    store.create("resourceclaims", claim("waiting"))
    return store


def truth(store: ClusterStore, kind: str) -> dict:
    """key -> record of every object of `kind` in the simulator, normalized independently
    (objects that do not normalize are left out, as the mirror must leave them out)."""
    records = {}
    for obj in store.list(PLURALS[kind]):
        try:
            record = normalize(kind, obj, cluster=store.name)
        except MalformedObject:
            continue
        records[key_of(record)] = record
    return records


def all_truth(store: ClusterStore) -> dict:
    every: dict = {}
    for kind in KINDS:
        every |= truth(store, kind)
    return every


@asynccontextmanager
async def serving(tmp_path: Path, *specs: ClusterSpec, **options: Any):
    """The simulator serving `specs` and one connection per cluster (through a kubeconfig)."""
    kubeconfig = tmp_path / "kubeconfig"
    async with Simulator(list(specs), kubeconfig_path=kubeconfig, **options) as sim:
        connections: list[ClusterConnection] = await connect(str(kubeconfig), None)
        try:
            yield sim, connections
        finally:
            await close_all(connections)
