"""GraphQL types of ResourcePoolStatusRequests (KEP-5677), shown beside the mirror's own pool
status.

A request asks kube-controller-manager once for the status of one driver's pools; the answer is
a snapshot of the moment it was written, and the request is immutable after. Each reported
pool is shown with the mirror's own live status of the same pool (`mirrored`, the same 1.37
accounting as `resourcePools`) and the fields on which the two differ (`differences`): a
difference is either the world moving on since the answer, or one of the two counting
differently. `unreportedPools` lists pools the request's filter matches that the mirror has
and an untruncated answer leaves out. `partitionSummary` and `shareableSummary` are carried as
the controller wrote them (JSON).
"""

from __future__ import annotations

import strawberry

from dra_mirror.service.model.pool_requests import differences, unreported
from dra_mirror.service.model.pool_status import PoolStatus
from dra_mirror.service.model.records import (
    RESOURCE_POOL_STATUS_REQUEST,
    PoolStatusRequestRecord,
    ReportedPool,
)

from .context import Info
from .identity import ClusterScopedFields
from .pools import ResourcePoolStatus, mirrored_pools
from .scalars import JSON


@strawberry.type(description="One field on which a reported pool and the mirror differ.")
class PoolStatusDifference:
    field: str = strawberry.field(
        description="As the API spells it (allocatedDevices, …), or `pool` when the mirror has "
        "no slice of the reported pool."
    )
    reported: str | None
    mirrored: str | None


@strawberry.type(
    description="One status.pools entry of a ResourcePoolStatusRequest, as the controller "
    "wrote it, beside the mirror's live status of the same pool."
)
class ReportedPoolStatus:
    pool: strawberry.Private[ReportedPool]
    ours: strawberry.Private[PoolStatus | None]

    @strawberry.field
    def driver(self) -> str:
        return self.pool.driver

    @strawberry.field
    def pool_name(self) -> str:
        return self.pool.pool

    @strawberry.field
    def generation(self) -> int:
        return self.pool.generation

    @strawberry.field
    def resource_slice_count(self) -> int | None:
        return self.pool.resource_slice_count

    @strawberry.field
    def total_devices(self) -> int | None:
        return self.pool.total

    @strawberry.field
    def allocated_devices(self) -> int | None:
        return self.pool.allocated

    @strawberry.field
    def available_devices(self) -> int | None:
        return self.pool.available

    @strawberry.field
    def unavailable_devices(self) -> int | None:
        return self.pool.unavailable

    @strawberry.field
    def node_name(self) -> str | None:
        return self.pool.node_name

    @strawberry.field
    def validation_error(self) -> str | None:
        return self.pool.validation_error

    @strawberry.field(description="PartitionTypeStatus entries, as written (second alpha).")
    def partition_summary(self) -> list[JSON]:
        return [JSON(dict(e)) for e in self.pool.partition_summary]

    @strawberry.field(description="ShareableSummaryStatus, as written (second alpha).")
    def shareable_summary(self) -> JSON | None:
        summary = self.pool.shareable_summary
        return JSON(dict(summary)) if summary is not None else None

    @strawberry.field(description="The mirror's own status of this pool now (null: no slice).")
    def mirrored(self) -> ResourcePoolStatus | None:
        return ResourcePoolStatus.of(self.ours) if self.ours is not None else None

    @strawberry.field(description="Where the report and the mirror's status differ.")
    def differences(self) -> list[PoolStatusDifference]:
        return [
            PoolStatusDifference(field=d.field, reported=d.reported, mirrored=d.mirrored)
            for d in differences(self.pool, self.ours)
        ]


@strawberry.type(
    description="A ResourcePoolStatusRequest (resource.k8s.io/v1alpha3, KEP-5677) where the "
    "cluster serves them: a one-time request for the status of one driver's pools."
)
class ResourcePoolStatusRequest(ClusterScopedFields):
    record: strawberry.Private[PoolStatusRequestRecord]
    ours: strawberry.Private[list[PoolStatus]]

    @strawberry.field
    def driver(self) -> str:
        return self.record.driver

    @strawberry.field
    def pool_name(self) -> str | None:
        return self.record.pool_name

    @strawberry.field(description="spec.limit (default 100).")
    def limit(self) -> int:
        return self.record.limit

    @strawberry.field
    def default_partition_type_attribute(self) -> str | None:
        return self.record.default_partition_type_attribute

    @strawberry.field(description="Whether the controller has written its status.")
    def answered(self) -> bool:
        return self.record.answered

    @strawberry.field(description="Pools that matched, truncated or not.")
    def pool_count(self) -> int | None:
        return self.record.pool_count

    @strawberry.field(description="The Complete / Failed conditions, as written.")
    def conditions(self) -> list[JSON]:
        return [JSON(dict(c)) for c in self.record.conditions]

    @strawberry.field(description="The pools reported, each beside the mirror's own status.")
    def pools(self) -> list[ReportedPoolStatus]:
        by_pool = {(s.driver, s.pool): s for s in self.ours}
        return [
            ReportedPoolStatus(pool=p, ours=by_pool.get((p.driver, p.pool)))
            for p in self.record.pools
        ]

    @strawberry.field(
        description="Pools the filter matches that the mirror has and the answer does not "
        "list (empty while unanswered or when the answer was truncated)."
    )
    def unreported_pools(self) -> list[ResourcePoolStatus]:
        return [ResourcePoolStatus.of(s) for s in unreported(self.record, self.ours)]


async def resource_pool_status_requests(
    info: Info, cluster: str | None
) -> list[ResourcePoolStatusRequest]:
    records = [
        r
        for r in await info.context.reader.list(RESOURCE_POOL_STATUS_REQUEST, cluster=cluster)
        if isinstance(r, PoolStatusRequestRecord)
    ]
    out = []
    computed: dict[tuple[str, str], list[PoolStatus]] = {}
    for record in sorted(records, key=lambda r: (r.meta.cluster, r.meta.name)):
        at = (record.meta.cluster, record.driver)
        if at not in computed:
            computed[at] = await mirrored_pools(info, *at)
        out.append(ResourcePoolStatusRequest(record=record, ours=computed[at]))
    return out
