"""Wire shape of scheduling.k8s.io's PodGroup (KEP-5729; v1alpha2 in 1.36, v1beta1 and
v1alpha3 in 1.37), as a typed msgspec Struct: only the fields the mirror reads — the claims
the group shares (`spec.resourceClaims`, and the names generated for its templates in
`status.resourceClaimStatuses`), its scheduling policy, the Workload it came from and its
conditions. See `service.model.api` for the rules every wire shape follows (unknown and newer
fields ignored, `null` accepted wherever Kubernetes writes it, nothing interpreted here)."""

from __future__ import annotations

from dra_mirror.service.model.api import ObjectMeta, Raw, _Wire


class PodGroupResourceClaim(_Wire):
    """spec.resourceClaims[]: exactly one of the two names is set."""

    name: str = ""
    resource_claim_name: str | None = None
    resource_claim_template_name: str | None = None


class PodGroupResourceClaimStatus(_Wire):
    """status.resourceClaimStatuses[]: the claim generated for a template entry (unset:
    none was needed)."""

    name: str = ""
    resource_claim_name: str | None = None


class GangSchedulingPolicy(_Wire):
    min_count: int | None = None


class PodGroupSchedulingPolicy(_Wire):
    """Exactly one of `basic` (empty) and `gang` is set."""

    basic: Raw | None = None
    gang: GangSchedulingPolicy | None = None


class WorkloadReference(_Wire):
    """spec.workloadRef (v1beta1, v1alpha3)."""

    workload_name: str = ""
    template_name: str = ""


class WorkloadPodGroupTemplateReference(_Wire):
    workload_name: str = ""
    pod_group_template_name: str = ""


class PodGroupTemplateReference(_Wire):
    """spec.podGroupTemplateRef (v1alpha2, 1.36)."""

    workload: WorkloadPodGroupTemplateReference | None = None


class Condition(_Wire):
    type: str = ""
    status: str = ""
    reason: str | None = None


class PodGroupSpec(_Wire):
    scheduling_policy: PodGroupSchedulingPolicy | None = None
    resource_claims: list[PodGroupResourceClaim] | None = None
    workload_ref: WorkloadReference | None = None
    pod_group_template_ref: PodGroupTemplateReference | None = None


class PodGroupStatus(_Wire):
    conditions: list[Condition] | None = None
    resource_claim_statuses: list[PodGroupResourceClaimStatus] | None = None


class PodGroup(_Wire):
    metadata: ObjectMeta
    spec: PodGroupSpec | None = None
    status: PodGroupStatus | None = None
