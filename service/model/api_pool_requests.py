"""Wire shape of resource.k8s.io's ResourcePoolStatusRequest (KEP-5677; v1alpha3, introduced in
1.36, the second alpha in 1.37 adds `partitionSummary`, `shareableSummary` and
`defaultPartitionTypeAttribute`), as typed msgspec Structs: the request's filters and the
status kube-controller-manager writes once. The summaries are carried raw. See
`service.model.api` for the rules every wire shape follows (unknown and newer fields ignored,
`null` accepted wherever Kubernetes writes it, nothing interpreted here)."""

from __future__ import annotations

from dra_mirror.service.model.api import ObjectMeta, Raw, _Wire


class ResourcePoolStatusRequestSpec(_Wire):
    driver: str = ""
    pool_name: str | None = None
    limit: int | None = None
    default_partition_type_attribute: str | None = None


class PoolStatus(_Wire):
    driver: str = ""
    pool_name: str = ""
    generation: int | None = None
    resource_slice_count: int | None = None
    total_devices: int | None = None
    allocated_devices: int | None = None
    available_devices: int | None = None
    unavailable_devices: int | None = None
    node_name: str | None = None
    validation_error: str | None = None
    partition_summary: list[Raw] | None = None
    shareable_summary: Raw | None = None


class ResourcePoolStatusRequestStatus(_Wire):
    pool_count: int | None = None
    pools: list[PoolStatus] | None = None
    conditions: list[Raw] | None = None


class ResourcePoolStatusRequest(_Wire):
    metadata: ObjectMeta
    spec: ResourcePoolStatusRequestSpec | None = None
    status: ResourcePoolStatusRequestStatus | None = None
