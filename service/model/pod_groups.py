"""PodGroups (scheduling.k8s.io, KEP-5729): their records, and the claims they name.

A PodGroup shares ResourceClaims among its pods (`spec.resourceClaims`, DRAWorkloadResourceClaims:
alpha in 1.36, beta in 1.37): an entry names a claim (`resourceClaimName`) or a template
(`resourceClaimTemplateName`), in which case the claim generated for the group is named in
`status.resourceClaimStatuses`. The scheduler then reserves the claim for the PodGroup instead
of each pod (`status.reservedFor` names the group), and it stays reserved until the PodGroup is
deleted, even when no pod of the group is left (the KEP's "Deallocate"): such a claim holds its
devices with no pod running, which the index calls idle (`service.model.claims_index`).

* `pod_group_record` reads the group's claims (each with the claim's name where it is known),
  its scheduling policy (Basic, or Gang with `minCount`), the Workload it was made from and
  whether it was scheduled (the PodGroupInitiallyScheduled condition of 1.37, the
  PodGroupScheduled condition of 1.36);
* `on_pod_group` keeps `claim_groups` (claim key -> the PodGroups naming the claim), from the
  diff of the group's old and new record.

Pure functions over records and wire Structs.
"""

from __future__ import annotations

from sys import intern

from dra_mirror.service.model import api_scheduling as api
from dra_mirror.service.model.links import Links
from dra_mirror.service.model.records import (
    RESOURCE_CLAIM,
    Meta,
    ObjectKey,
    PodGroupClaim,
    PodGroupRecord,
)
from dra_mirror.service.model.relations import CLAIM_GROUPS

# The condition saying the group was scheduled: 1.37's name, then 1.36's.
SCHEDULED_CONDITIONS = ("PodGroupInitiallyScheduled", "PodGroupScheduled")


def pod_group_record(wire: api.PodGroup, meta: Meta, _shared: object = None) -> PodGroupRecord:
    spec = wire.spec or api.PodGroupSpec()
    status = wire.status or api.PodGroupStatus()
    generated = {s.name: s.resource_claim_name for s in status.resource_claim_statuses or ()}
    claims = tuple(
        PodGroupClaim(
            intern(c.name),
            c.resource_claim_name or generated.get(c.name) or None,
            c.resource_claim_template_name or None,
        )
        for c in spec.resource_claims or ()
    )
    policy = spec.scheduling_policy or api.PodGroupSchedulingPolicy()
    workload = None
    if spec.workload_ref is not None:
        workload = spec.workload_ref.workload_name or None
    elif spec.pod_group_template_ref is not None and spec.pod_group_template_ref.workload:
        workload = spec.pod_group_template_ref.workload.workload_name or None
    scheduled = None
    for name in SCHEDULED_CONDITIONS:
        found = [c for c in status.conditions or () if c.type == name]
        if found:
            scheduled = found[0].status == "True"
            break
    return PodGroupRecord(
        meta=meta,
        claims=claims,
        policy="Gang" if policy.gang is not None else "Basic",
        min_count=policy.gang.min_count if policy.gang is not None else None,
        workload=workload,
        scheduled=scheduled,
    )


def claim_keys(group: PodGroupRecord | None) -> set[ObjectKey]:
    """The claims a PodGroup names (those whose name is known)."""
    if group is None:
        return set()
    meta = group.meta
    return {
        ObjectKey(meta.cluster, RESOURCE_CLAIM, meta.namespace, c.claim_name)
        for c in group.claims
        if c.claim_name
    }


def on_pod_group(
    links: Links, key: ObjectKey, old: PodGroupRecord | None, new: PodGroupRecord | None
) -> None:
    old_claims, new_claims = claim_keys(old), claim_keys(new)
    for claim in old_claims - new_claims:
        links.remove(CLAIM_GROUPS, claim, key)
    for claim in new_claims - old_claims:
        links.add(CLAIM_GROUPS, claim, key)
