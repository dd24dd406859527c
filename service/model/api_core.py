"""Wire shapes of the core/v1 Pod and Node, as typed msgspec Structs (see `service.model.api`
for the rules every wire shape follows: only the fields the mirror needs, unknown and newer
fields ignored, `null` accepted wherever Kubernetes writes it, nothing interpreted here)."""

from __future__ import annotations

from msgspec import field

from dra_mirror.service.model.api import ObjectMeta, Quantity, Raw, _Wire


class ContainerClaimRef(_Wire):
    name: str = ""
    request: str | None = None


class ResourceRequirements(_Wire):
    requests: dict[str, Quantity] | None = None
    limits: dict[str, Quantity] | None = None
    claims: list[ContainerClaimRef] | None = None


class Container(_Wire):
    name: str = ""
    resources: ResourceRequirements | None = None


class ClaimSource(_Wire):
    """The tombstoned (<= 1.30) `source` wrapper of a pod claim."""

    resource_claim_name: str | None = None
    resource_claim_template_name: str | None = None


class PodResourceClaim(_Wire):
    name: str = ""
    resource_claim_name: str | None = None
    resource_claim_template_name: str | None = None
    source: ClaimSource | None = None


class NodeAffinity(_Wire):
    # Kept raw: the diagnostics read its nodeSelectorTerms (service.diagnostics.cluster).
    required_during_scheduling_ignored_during_execution: Raw | None = None


class Affinity(_Wire):
    node_affinity: NodeAffinity | None = None


class PodSchedulingGroup(_Wire):
    """spec.schedulingGroup [1.36+]: the PodGroup (scheduling.k8s.io) the pod belongs to."""

    pod_group_name: str | None = None


class PodSpec(_Wire):
    node_name: str | None = None
    node_selector: dict[str, str] | None = None
    affinity: Affinity | None = None
    resource_claims: list[PodResourceClaim] | None = None
    containers: list[Container] | None = None
    init_containers: list[Container] | None = None
    scheduling_group: PodSchedulingGroup | None = None
    tolerations: list[Raw] | None = None  # kept raw: the node filter reads them


class PodResourceClaimStatus(_Wire):
    name: str = ""
    resource_claim_name: str | None = None


class ContainerExtendedResourceRequest(_Wire):
    container_name: str = ""
    resource_name: str = ""
    request_name: str = ""


class ExtendedResourceClaimStatus(_Wire):
    resource_claim_name: str | None = None
    request_mappings: list[ContainerExtendedResourceRequest] | None = None


class ResourceHealth(_Wire):
    resource_id: str = field(default="", name="resourceID")  # "<driver>/<pool>/<device>" for DRA
    health: str | None = None  # Healthy | Unhealthy | Unknown
    message: str | None = None


class ResourceStatus(_Wire):
    """containerStatuses[].allocatedResourcesStatus (KEP-4680): `name` is
    "claim:<claim>/<request>" or "claim:<claim>" for DRA resources."""

    name: str = ""
    resources: list[ResourceHealth] | None = None


class ContainerStatus(_Wire):
    name: str = ""
    allocated_resources_status: list[ResourceStatus] | None = None


class Condition(_Wire):
    type: str = ""
    status: str = ""
    reason: str | None = None
    message: str | None = None
    last_transition_time: str | None = None


class PodCondition(_Wire):
    """What a pod's condition says to the mirror (a false PodScheduled's reason); its times and
    message are not decoded."""

    type: str = ""
    status: str = ""
    reason: str | None = None


class PodStatus(_Wire):
    phase: str | None = None
    reason: str | None = None
    start_time: str | None = None
    conditions: list[PodCondition] | None = None
    resource_claim_statuses: list[PodResourceClaimStatus] | None = None
    extended_resource_claim_status: ExtendedResourceClaimStatus | None = None
    container_statuses: list[ContainerStatus] | None = None
    init_container_statuses: list[ContainerStatus] | None = None


class Pod(_Wire):
    metadata: ObjectMeta
    spec: PodSpec | None = None
    status: PodStatus | None = None


class NodeSpec(_Wire):
    unschedulable: bool | None = None
    taints: list[Raw] | None = None  # kept raw: the node filter reads them


class NodeStatus(_Wire):
    capacity: dict[str, Quantity] | None = None
    allocatable: dict[str, Quantity] | None = None
    conditions: list[Condition] | None = None


class Node(_Wire):
    metadata: ObjectMeta
    spec: NodeSpec | None = None
    status: NodeStatus | None = None
