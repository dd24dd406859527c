"""The pod side of the index's reverse maps: which node a pod runs on, which claims it names.

`on_pod` updates `node_pods` ((cluster, node) -> pod keys), `group_pods` ((cluster, namespace,
PodGroup) -> pod keys) and `claim_referrers` (claim key -> pod keys whose spec names the claim,
or whose status names it as its extended-resource claim) from the diff of a pod's old and new
record, O(its own claims). Idleness and templates, which pods also drive, are the claim side's
(`service.model.claims_index`). `uses_devices(pod)` says whether a pod asks for DRA devices
at all (the pods list's filter, and the stores' index of it).
"""

from __future__ import annotations

from dra_mirror.service.model.consumers import pod_group_key
from dra_mirror.service.model.links import Links
from dra_mirror.service.model.records import RESOURCE_CLAIM, ObjectKey, PodRecord
from dra_mirror.service.model.relations import CLAIM_REFERRERS, GROUP_PODS, NODE_PODS


def uses_devices(pod: PodRecord) -> bool:
    """Does the pod ask for DRA devices (a resource claim, or an extended-resource claim)?"""
    return bool(pod.claims) or bool(pod.extended_claim_name)


def on_pod(
    cluster: str, links: Links, key: ObjectKey, old: PodRecord | None, new: PodRecord | None
) -> None:
    if old is None and new is not None:  # a pod the index did not hold: every link is new
        if new.node_name:
            links.add(NODE_PODS, (cluster, new.node_name), key)
        group = pod_group_key(new)
        if group:
            links.add(GROUP_PODS, group, key)
        for claim in pod_claim_keys(cluster, new):
            links.add(CLAIM_REFERRERS, claim, key)
        return
    old_node = old.node_name if old else None
    new_node = new.node_name if new else None
    if old_node != new_node:
        if old_node:
            links.remove(NODE_PODS, (cluster, old_node), key)
        if new_node:
            links.add(NODE_PODS, (cluster, new_node), key)
    old_group, new_group = pod_group_key(old), pod_group_key(new)
    if old_group != new_group:
        if old_group:
            links.remove(GROUP_PODS, old_group, key)
        if new_group:
            links.add(GROUP_PODS, new_group, key)
    old_claims = pod_claim_keys(cluster, old)
    new_claims = pod_claim_keys(cluster, new)
    if old_claims != new_claims:
        for claim in old_claims - new_claims:
            links.remove(CLAIM_REFERRERS, claim, key)
        for claim in new_claims - old_claims:
            links.add(CLAIM_REFERRERS, claim, key)


def pod_claim_keys(cluster: str, pod: PodRecord | None) -> set[ObjectKey]:
    """The claims a pod uses: those its spec names (by their resolved names) and the one its
    status names for its extended-resource requests."""
    if pod is None:
        return set()
    namespace = pod.meta.namespace
    found = {
        ObjectKey(cluster, RESOURCE_CLAIM, namespace, c.claim_name)
        for c in pod.claims
        if c.claim_name
    }
    if pod.extended_claim_name:
        found.add(ObjectKey(cluster, RESOURCE_CLAIM, namespace, pod.extended_claim_name))
    return found
