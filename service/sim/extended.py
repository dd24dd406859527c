"""Extended resources served by DRA (DRAExtendedResource), as kube-scheduler handles them.

A pod may ask for a device the old way, `limits: {nvidia.com/gpu: 1}`. Where no device plugin
offers that resource on a node but a DeviceClass names it (`extendedResourceName`, or
implicitly `deviceclass.resource.kubernetes.io/<class>`), kube-scheduler allocates devices of
that class through a claim it creates itself at PreBind: `generateName
<pod>-extended-resources-`, the `resource.kubernetes.io/extended-resource-claim` annotation,
one request `container-<i>-request-<j>` per container and resource, owned by the pod
(the same ownerReference as the claims of its templates).

Promises: pure (no store access); `extended_requests` leaves out the resources every node
has (cpu, memory, ephemeral-storage, pods, hugepages-*).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from dra_mirror.service.model.normalize import normalize
from dra_mirror.service.model.quantity import parse_quantity
from dra_mirror.service.model.records import (
    EXTENDED_RESOURCE_CLAIM_ANNOTATION,
    RESOURCE_CLAIM,
    Allocation,
    ClaimRecord,
)
from dra_mirror.service.sim.claim_controller import pod_owner_reference

__all__ = ["ExtendedClaim", "extended_claim", "extended_requests"]

NODE_RESOURCES = ("cpu", "memory", "ephemeral-storage", "pods")


class ExtendedClaim:
    """The claim kube-scheduler creates for extended resources served by DRA (DRAExtendedResource):
    `generateName <pod>-extended-resources-`, the `resource.kubernetes.io/extended-resource-claim`
    annotation, one request `container-<i>-request-<j>` per container and resource."""

    def __init__(self, body: dict, mappings: list[dict], record: ClaimRecord) -> None:
        self.body = body
        self.mappings = mappings
        self.record = record
        self.allocation: Allocation | None = None


def extended_claim(pod: dict, classes: dict[str, str], cluster: str) -> ExtendedClaim:
    meta = pod["metadata"]
    requests, mappings = [], []
    for i, container in enumerate(pod["spec"].get("containers") or []):
        limits = (container.get("resources") or {}).get("limits") or {}
        for j, resource in enumerate(r for r in limits if r in classes):
            request = f"container-{i}-request-{j}"
            count = int(parse_quantity(str(limits[resource])))
            requests.append(
                {
                    "name": request,
                    "exactly": {
                        "deviceClassName": classes[resource],
                        "allocationMode": "ExactCount",
                        "count": count,
                    },
                }
            )
            mappings.append(
                {
                    "containerName": container["name"],
                    "resourceName": resource,
                    "requestName": request,
                }
            )
    body: dict[str, Any] = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {
            "generateName": f"{meta['name']}-extended-resources-",
            "namespace": meta["namespace"],
            "annotations": {EXTENDED_RESOURCE_CLAIM_ANNOTATION: "true"},
            "ownerReferences": [pod_owner_reference(pod)],
        },
        "spec": {"devices": {"requests": requests}},
    }
    named = {**body, "metadata": {**body["metadata"], "name": f"{meta['name']}-extended-resources"}}
    return ExtendedClaim(body, mappings, normalize(RESOURCE_CLAIM, named, cluster=cluster))


def extended_requests(pod: dict) -> dict[str, Fraction]:
    """Device-plugin resources (`nvidia.com/gpu`) the pod's containers ask for in limits."""
    out: dict[str, Fraction] = {}
    for container in pod["spec"].get("containers") or []:
        for resource, amount in ((container.get("resources") or {}).get("limits") or {}).items():
            if resource in NODE_RESOURCES or resource.startswith("hugepages-"):
                continue
            out[resource] = out.get(resource, Fraction(0)) + parse_quantity(str(amount))
    return out
