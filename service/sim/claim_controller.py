"""The resource-claim controller of kube-controller-manager, as far as pods need it.

For each `resourceClaimTemplateName` of a pod it creates the claim exactly as Kubernetes
does — `generateName` `<pod>-<claim>-` (both parts truncated proportionally when longer than
57 characters), the `resource.kubernetes.io/pod-claim-name` annotation, the template's labels
and annotations, a Pod controller ownerReference with blockOwnerDeletion — and records its
name in `pod.status.resourceClaimStatuses`. When a pod ends (deleted, Succeeded, Failed) it
removes the pod from `reservedFor`, deletes the claims generated for it, and deallocates a
claim that carries the `resource.kubernetes.io/delete-protection` finalizer once nothing
reserves it. A claim allocated by hand (no finalizer) stays allocated with no pod running: an
idle holder, which the mirror reports (`idle`, `idleSince`).

Promises: every write goes through the `ClusterStore` (so it is validated, versioned and seen
by watchers like any client's); a retry after a partial failure finds the claims it created
instead of making more; an `ApiError` from the store propagates to the caller.
"""

from __future__ import annotations

from typing import Any

from dra_mirror.service.diagnostics.expansion import claim_generate_name
from dra_mirror.service.model.records import DELETE_PROTECTION_FINALIZER, POD_CLAIM_NAME_ANNOTATION
from dra_mirror.service.sim.store import ClusterStore

__all__ = [
    "claim_from_template",
    "deallocate",
    "generate_name",
    "pod_claims",
    "pod_owner_reference",
    "release_pod_claims",
]

MAX_RESERVED_FOR = 256  # ResourceClaimReservedForMaxSize


def generate_name(pod_name: str, pod_claim_name: str) -> str:
    """The claim `generateName` kube-controller-manager uses (resourceclaim controller):
    `<pod>-<claim>-`, or both parts cut proportionally (and no trailing dash) when too long.
    The rule is `service.diagnostics.expansion`'s, which `plan` names claims by too."""
    return claim_generate_name(pod_name, pod_claim_name)


def pod_owner_reference(pod: dict) -> dict:
    """The ownerReference of a claim made for a pod: the pod is its controller, and
    `blockOwnerDeletion` keeps a foreground deletion of the pod waiting for the claim."""
    meta = pod["metadata"]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def claim_from_template(pod: dict, pod_claim_name: str, template: dict) -> dict:
    """The ResourceClaim kube-controller-manager creates for one template entry of a pod."""
    meta = pod["metadata"]
    template_meta = (template.get("spec") or {}).get("metadata") or {}
    annotations = dict(template_meta.get("annotations") or {})
    annotations[POD_CLAIM_NAME_ANNOTATION] = pod_claim_name
    claim_meta: dict[str, Any] = {
        "generateName": generate_name(meta["name"], pod_claim_name),
        "namespace": meta["namespace"],
        "annotations": annotations,
        "ownerReferences": [pod_owner_reference(pod)],
    }
    if template_meta.get("labels"):
        claim_meta["labels"] = dict(template_meta["labels"])
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": claim_meta,
        "spec": (template.get("spec") or {}).get("spec") or {},
    }


def pod_claims(store: ClusterStore, pod: dict) -> list[dict] | str:
    """The pod's claims (creating template claims first); a message if one is missing."""
    meta = pod["metadata"]
    ns = meta["namespace"]
    statuses = {
        s["name"]: s.get("resourceClaimName")
        for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []
    }
    claims: list[dict] = []
    created = False
    problem = None
    for entry in pod["spec"].get("resourceClaims") or []:
        claim, problem, new = _pod_claim(store, pod, entry, statuses)
        created = created or new
        if problem is not None:
            break
        claims.append(claim)
    if created:
        # Recorded at once, so that a retry finds the claims instead of making more.
        status = [{"name": n, "resourceClaimName": c} for n, c in statuses.items()]
        store.patch(
            "pods",
            ns,
            meta["name"],
            {"status": {"resourceClaimStatuses": status}},
            subresource="status",
        )
    return problem if problem is not None else claims


def _pod_claim(
    store: ClusterStore, pod: dict, entry: dict, statuses: dict[str, str | None]
) -> tuple[dict, str | None, bool]:
    """One pod.spec.resourceClaims entry: (claim, problem, created)."""
    meta = pod["metadata"]
    ns = meta["namespace"]
    created = False
    if entry.get("resourceClaimName"):
        claim = store.get("resourceclaims", ns, entry["resourceClaimName"])
        if claim is None:
            return {}, f'resourceclaim "{entry["resourceClaimName"]}" not found', False
        reserved = (claim.get("status") or {}).get("reservedFor") or []
        if len(reserved) >= MAX_RESERVED_FOR and all(r.get("uid") != meta["uid"] for r in reserved):
            message = f'resourceclaim "{entry["resourceClaimName"]}" is in use by too many pods'
            return {}, message, False
    else:
        name = statuses.get(entry["name"])
        claim = store.get("resourceclaims", ns, name) if name else None
        if claim is None:
            template_name = entry["resourceClaimTemplateName"]
            template = store.get("resourceclaimtemplates", ns, template_name)
            if template is None:
                message = (
                    f'resource claim template "{template_name}": resourceclaimtemplate not found'
                )
                return {}, message, False
            claim = store.create(
                "resourceclaims", claim_from_template(pod, entry["name"], template)
            )
            statuses[entry["name"]] = claim["metadata"]["name"]
            created = True
    if claim["metadata"].get("deletionTimestamp"):
        return {}, f'resourceclaim "{claim["metadata"]["name"]}" is being deleted', created
    return claim, None, created


def release_pod_claims(store: ClusterStore, pod: dict) -> None:
    """Unreserve the pod's claims; delete its generated claims; deallocate what the
    scheduler allocated and nobody reserves any more."""
    meta = pod["metadata"]
    ns, uid = meta["namespace"], meta["uid"]
    names = [e.get("resourceClaimName") for e in pod["spec"].get("resourceClaims") or []]
    names += [
        s.get("resourceClaimName")
        for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []
    ]
    names.append(
        ((pod.get("status") or {}).get("extendedResourceClaimStatus") or {}).get(
            "resourceClaimName"
        )
    )
    for name in dict.fromkeys(n for n in names if n):
        claim = store.get("resourceclaims", ns, name)
        if claim is None:
            continue
        status = claim.get("status") or {}
        reserved = status.get("reservedFor") or []
        left = [r for r in reserved if r.get("uid") != uid]
        if len(left) != len(reserved):
            status = {k: v for k, v in status.items() if k != "reservedFor"}
            if left:
                status["reservedFor"] = left
            claim = store.update(
                "resourceclaims", {**claim, "status": status}, subresource="status"
            )
        if left:
            continue
        owned = any(
            o.get("controller") and o.get("uid") == uid
            for o in claim["metadata"].get("ownerReferences") or []
        )
        if owned:
            claim = store.delete("resourceclaims", ns, name)
        if DELETE_PROTECTION_FINALIZER in (claim["metadata"].get("finalizers") or []):
            deallocate(store, claim)


def deallocate(store: ClusterStore, claim: dict) -> None:
    """Clear `status.allocation`, then drop the delete-protection finalizer (which removes a
    claim that is being deleted)."""
    meta = claim["metadata"]
    status = {k: v for k, v in (claim.get("status") or {}).items() if k != "allocation"}
    if claim.get("status", {}).get("allocation"):
        claim = store.update("resourceclaims", {**claim, "status": status}, subresource="status")
    finalizers = [f for f in meta.get("finalizers") or [] if f != DELETE_PROTECTION_FINALIZER]
    if finalizers:
        claim["metadata"]["finalizers"] = finalizers
    else:
        claim["metadata"].pop("finalizers", None)
    store.update("resourceclaims", claim)
