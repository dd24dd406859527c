"""Who consumes a claim: the rules of status.reservedFor, read once for the model and the graph.

`ResourceClaimConsumerReference` (resource/v1 types.go): `apiGroup` is empty for the core API,
`resource` names the kind (normally "pods"), `uid` "identifies exactly one incarnation of the
resource". So:

* a `pods` entry (core group) is consumed by the pod of that name in the claim's namespace,
  and only while that pod has the uid reserved (a new pod under the old name is not it);
* a `podgroups` entry of `scheduling.k8s.io` [1.36+, DRAWorkloadResourceClaims] is consumed by
  the group's pods: those whose `spec.schedulingGroup.podGroupName` names it, in the same
  namespace (the index keeps them as the `group_pods` relation);
* any other entry names something the mirror does not watch: it counts as in use.

Pure functions over records; nothing here reads a store (`consumers_of` is handed the reads).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from dra_mirror.service.model.records import POD, ClaimRecord, Consumer, ObjectKey, PodRecord

POD_GROUP_API = "scheduling.k8s.io"
POD_GROUPS = "podgroups"

GroupKey = tuple[str, str, str]  # (cluster, namespace, PodGroup name): a `group_pods` key


def is_pod(consumer: Consumer) -> bool:
    return consumer.resource == "pods" and not consumer.api_group


def is_pod_group(consumer: Consumer) -> bool:
    return consumer.resource == POD_GROUPS and consumer.api_group == POD_GROUP_API


def reservations(claim: ClaimRecord | None) -> dict[str, Consumer]:
    """A claim's status.reservedFor entries by uid (the list's map key)."""
    if claim is None:
        return {}
    return {c.uid or f"{c.resource}/{c.name}": c for c in claim.reserved_for}


def pod_refs(claim: ClaimRecord | None) -> dict[ObjectKey, str]:
    """Pod keys (with the uid reserved) of a claim's status.reservedFor."""
    if claim is None:
        return {}
    meta = claim.meta
    return {
        ObjectKey(meta.cluster, POD, meta.namespace, c.name): c.uid
        for c in claim.reserved_for
        if is_pod(c)
    }


def group_refs(claim: ClaimRecord | None) -> list[GroupKey]:
    """The PodGroups a claim is reserved for, as `group_pods` keys."""
    if claim is None:
        return []
    meta = claim.meta
    return [(meta.cluster, meta.namespace, c.name) for c in claim.reserved_for if is_pod_group(c)]


def pod_group_key(pod: PodRecord | None) -> GroupKey | None:
    """The `group_pods` key of the PodGroup a pod belongs to, if any."""
    if pod is None or not pod.pod_group:
        return None
    return (pod.meta.cluster, pod.meta.namespace, pod.pod_group)


def same_pod(pod: object, uid: str) -> bool:
    """A reservedFor entry names this pod (not a newer pod under the old name)."""
    return isinstance(pod, PodRecord) and (not uid or not pod.meta.uid or pod.meta.uid == uid)


def consumers_of(
    claim: ClaimRecord,
    *,
    get: Callable[[ObjectKey], Any],
    members: Callable[[GroupKey], Iterable[Any]],
    before: Mapping[ObjectKey, PodRecord | None] | None = None,
) -> tuple[PodRecord, ...]:
    """The pods consuming `claim`, sorted by key: `get(key)` reads a record, `members(group)`
    the pods of a PodGroup; `before` overrides the pods it holds (their state before a batch:
    None for a pod that did not exist), so the answer is the claim's consumers as they were."""

    def pod_at(key: ObjectKey) -> PodRecord | None:
        found = before[key] if before is not None and key in before else get(key)
        return found if isinstance(found, PodRecord) else None

    found: dict[ObjectKey, PodRecord] = {}
    for key, uid in pod_refs(claim).items():
        pod = pod_at(key)
        if pod is not None and same_pod(pod, uid):
            found[key] = pod
    for group in group_refs(claim):
        keys = set(members(group))
        if before:
            keys.update(k for k, p in before.items() if pod_group_key(p) == group)
        for key in keys:
            pod = pod_at(key)
            if pod is not None and pod_group_key(pod) == group:
                found[key] = pod
    return tuple(found[k] for k in sorted(found))
