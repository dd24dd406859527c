"""Cluster facts the diagnoses share: which driver a class is about, which nodes look like GPU
nodes, and whether a node has room (CPU, memory) for one more pod.

* A DeviceClass names its driver in a selector conjunct `device.driver == "<driver>"` (every
  vendor class does); `driver_of_selectors` finds it without evaluating anything.
* A node "looks like a GPU node" when something other than DRA says it has GPUs: a device
  plugin's extended resource (`nvidia.com/gpu`, `amd.com/gpu` in capacity), GPU feature
  discovery labels (`nvidia.com/gpu.present`, `nvidia.com/gpu.product`…), or node feature
  discovery's PCI vendor label for NVIDIA (`feature.node.kubernetes.io/pci-10de.present`).
* A node advertises an extended resource (`nvidia.com/gpu`) only where a device plugin
  registered it: a DRA-only cluster (NVIDIA GPU Operator's GPUCluster mode, no device plugin)
  advertises none, and a pod's `limits: nvidia.com/gpu` there is served by DRA through a
  DeviceClass's `extendedResourceName` (`advertised`).
* Which nodes a pod may use: the nodes not cordoned that its nodeSelector and required node
  affinity admit (`service.diagnostics.node_affinity`, the same rules the simulator's
  scheduler applies; taints are not weighed).
* kube-scheduler's NodeResourcesFit: a pod fits when, for each resource it requests, the
  requests of the pods already bound to the node plus its own stay within the node's
  allocatable. A pod's request is the larger of the sum over its containers and the largest
  init container (sidecars aside). Pods that Succeeded or Failed no longer count.

Promises: pure functions over records.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from fractions import Fraction
from typing import Any

from dra_mirror.service.diagnostics.node_affinity import admits
from dra_mirror.service.model.quantity import format_quantity, parse_quantity
from dra_mirror.service.model.records import NodeRecord, PodRecord

_DRIVER = re.compile(r"""\bdevice\s*\.\s*driver\s*==\s*(['"])([^'"]+)\1""")
_GPU_RESOURCES = ("nvidia.com/gpu", "amd.com/gpu", "gpu.intel.com/i915", "gpu.intel.com/xe")
_GPU_LABELS = (
    "nvidia.com/gpu.present",
    "nvidia.com/gpu.product",
    "nvidia.com/gpu.count",
    "feature.node.kubernetes.io/pci-10de.present",
    "amd.com/gpu.device-id",
)
_TERMINAL = ("Succeeded", "Failed")
NODE_RESOURCES = ("cpu", "memory")


def driver_of_selectors(selectors: Iterable[str]) -> str | None:
    """The driver a set of selectors requires (`device.driver == "x"`), if one does."""
    for expression in selectors:
        match = _DRIVER.search(expression)
        if match is not None:
            return match[2]
    return None


def gpu_count(node: NodeRecord) -> int:
    """GPUs a device plugin advertises on the node (0 when none or unparsable)."""
    total = 0
    for resource in _GPU_RESOURCES:
        text = node.capacity.get(resource)
        if text is None:
            continue
        try:
            total += int(text) if text.isdigit() else int(parse_quantity(text))
        except ValueError:
            continue
    return total


def advertised(nodes: Iterable[NodeRecord]) -> frozenset[str]:
    """The extended resources (a name with a domain, `nvidia.com/gpu`) some node advertises in
    its capacity or allocatable with a non-zero amount: what device plugins register."""
    found: set[str] = set()
    for node in nodes:
        for amounts in (node.capacity, node.allocatable):
            for name, text in amounts.items():
                if "/" in name and not name.startswith(("hugepages-", "kubernetes.io/")):
                    if text not in ("0", ""):
                        found.add(name)
    return frozenset(found)


def gpu_nodes(nodes: Iterable[NodeRecord]) -> list[NodeRecord]:
    """Nodes that look like GPU nodes by labels or device-plugin capacity, sorted by name."""
    found = [
        n for n in nodes if gpu_count(n) > 0 or any(label in n.meta.labels for label in _GPU_LABELS)
    ]
    return sorted(found, key=lambda n: n.meta.name)


def eligible_nodes(
    node_selector: Mapping[str, str],
    nodes: Iterable[NodeRecord],
    required_affinity: Mapping[str, Any] | None = None,
) -> list[str]:
    """Names of the schedulable nodes a pod's nodeSelector and required node affinity admit
    (for explain_claim's `eligible_nodes`), sorted."""
    return sorted(
        n.meta.name
        for n in nodes
        if not n.unschedulable and node_admits(n, node_selector, required_affinity)
    )


def node_admits(
    node: NodeRecord,
    node_selector: Mapping[str, str],
    required_affinity: Mapping[str, Any] | None = None,
) -> bool:
    """Whether the node satisfies a nodeSelector and a required node affinity
    (`service.diagnostics.node_affinity.admits`)."""
    return admits(
        name=node.meta.name,
        labels=node.meta.labels,
        node_selector=node_selector,
        required_affinity=required_affinity,
    )


def pods_eligible_nodes(pods: Iterable[PodRecord], nodes: Sequence[NodeRecord]) -> list[str] | None:
    """The nodes on which every one of `pods` may run, by their nodeSelector and required node
    affinity (a claim shared by several waiting pods is allocated on one node they all reach);
    None when none of them says anything (then every node is a candidate)."""
    found: set[str] | None = None
    for pod in pods:
        if not pod.node_selector and pod.required_node_affinity is None:
            continue
        names = set(eligible_nodes(pod.node_selector, nodes, pod.required_node_affinity))
        found = names if found is None else found & names
    return None if found is None else sorted(found)


def pod_requests(pod: PodRecord) -> dict[str, Fraction]:
    """The pod's effective CPU and memory requests, as the scheduler counts them."""
    total: dict[str, Fraction] = {}
    init_max: dict[str, Fraction] = {}
    for container in pod.containers:
        for resource in NODE_RESOURCES:
            text = container.requests.get(resource) or container.limits.get(resource)
            if text is None:
                continue
            try:
                amount = parse_quantity(text)
            except ValueError:
                continue
            if container.init:
                init_max[resource] = max(init_max.get(resource, Fraction(0)), amount)
            else:
                total[resource] = total.get(resource, Fraction(0)) + amount
    for resource, amount in init_max.items():
        total[resource] = max(total.get(resource, Fraction(0)), amount)
    return total


def node_usage(
    pods: Iterable[PodRecord], *, excluding: PodRecord | None = None
) -> dict[str, dict[str, Fraction]]:
    """CPU and memory requested on each node by the pods bound to it (not finished ones),
    leaving out `excluding` (the pod being placed)."""
    usage: dict[str, dict[str, Fraction]] = {}
    for other in pods:
        if other.node_name is None or other.phase in _TERMINAL:
            continue
        if excluding is not None and (
            other.meta.uid == excluding.meta.uid
            or (other.meta.name, other.meta.namespace)
            == (excluding.meta.name, excluding.meta.namespace)
        ):
            continue
        used = usage.setdefault(other.node_name, {})
        for resource, amount in pod_requests(other).items():
            used[resource] = used.get(resource, Fraction(0)) + amount
    return usage


def shortfall(
    wanted: Mapping[str, Fraction], node: NodeRecord, used: Mapping[str, Fraction]
) -> tuple[str, str, str] | None:
    """(resource, requested in total, allocatable) for the first resource the node lacks."""
    for resource in NODE_RESOURCES:
        if resource not in wanted or resource not in node.allocatable:
            continue
        allocatable_text = node.allocatable[resource]
        try:
            allocatable = parse_quantity(allocatable_text)
        except ValueError:
            continue
        requested = used.get(resource, Fraction(0)) + wanted[resource]
        if requested > allocatable:
            return resource, format_quantity(requested, like=allocatable_text), allocatable_text
    return None


def node_shortfall(
    pod: PodRecord, node: NodeRecord, pods: Sequence[PodRecord]
) -> tuple[str, str, str] | None:
    """(resource, requested in total, allocatable) for the first resource the node lacks to
    take `pod` beside the pods already bound to it; None when it fits."""
    wanted = pod_requests(pod)
    if not wanted:
        return None
    bound = [p for p in pods if p.node_name == node.meta.name]
    return shortfall(wanted, node, node_usage(bound, excluding=pod).get(node.meta.name, {}))
