"""Records of PodGroups (scheduling.k8s.io, KEP-5729), re-exported by `service.model.records`.

`PodGroupRecord` keeps what the mirror serves of a PodGroup: the claims its pods share (each
with the claim's name where known: named, or generated for a template and recorded in the
group's status), its scheduling policy, the Workload it was made from and whether it was
scheduled (`service.model.pod_groups` reads them from the wire). Immutable msgspec Structs
without reference cycles, as every record (see `service.model.records`).
"""

from __future__ import annotations

from msgspec import Struct

from dra_mirror.service.model.identity import Meta


class PodGroupClaim(Struct, frozen=True, gc=False):
    """One spec.resourceClaims entry of a PodGroup: the claim its pods share."""

    name: str  # the entry's name, which the pods' own claim entries repeat
    claim_name: str | None = None  # resourceClaimName, or the name generated for the template
    template_name: str | None = None  # resourceClaimTemplateName


class PodGroupRecord(Struct, frozen=True, gc=False, tag="PodGroup"):
    meta: Meta
    claims: tuple[PodGroupClaim, ...] = ()
    policy: str = "Basic"  # Basic | Gang (spec.schedulingPolicy)
    min_count: int | None = None  # spec.schedulingPolicy.gang.minCount
    workload: str | None = None  # the Workload it was made from (workloadRef / template ref)
    scheduled: bool | None = None  # the PodGroup(Initially)Scheduled condition; None: unset
