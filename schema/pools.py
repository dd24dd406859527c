"""`resourcePools`: pool status as KEP-5677's ResourcePoolStatusRequest counts it, for every
cluster at once and live (the model's `service.model.pool_status` rules, read through the
scoped reader: a pool outside the caller's access is not shown). A pool's counts are the
whole cluster's — a device a claim outside the caller's namespaces holds is allocated, not
available — and name no claim."""

from __future__ import annotations

import strawberry

from dra_mirror.service.diagnostics.cel import rule_selector_matches
from dra_mirror.service.model.pool_status import PoolStatus, pool_statuses
from dra_mirror.service.model.records import (
    DEVICE_CLASS,
    DEVICE_TAINT_RULE,
    RESOURCE_CLAIM,
    RESOURCE_SLICE,
    ClaimRecord,
    DeviceClassRecord,
    SliceRecord,
    TaintRuleRecord,
)

from .context import Info


@strawberry.type(
    description="One resource pool of a driver as KEP-5677 counts it (1.37 accounting): only "
    "slices of the highest generation; a shared device counts once; admin-access results "
    "consume nothing; a NoSchedule/NoExecute taint makes a device unavailable. When the pool "
    "is incomplete every count is null and `validationError` says why. Counts are in devices, "
    "as the KEP defines them: each partition counts as a device (physical devices and "
    "GPU-equivalents: `capacity`)."
)
class ResourcePoolStatus:
    cluster: str
    driver: str
    pool_name: str
    generation: int
    resource_slice_count: int | None = strawberry.field(
        description="Slices of the generation present (null: incomplete)."
    )
    node_name: str | None = strawberry.field(description="Set when every slice names one node.")
    total_devices: int | None
    allocated_devices: int | None = strawberry.field(
        description="Distinct devices of the pool in allocation results (admin access excluded)."
    )
    available_devices: int | None = strawberry.field(
        description="max(0, total - allocated - unavailable)."
    )
    unavailable_devices: int | None = strawberry.field(
        description="Devices with a NoSchedule or NoExecute taint, allocated or not."
    )
    validation_error: str | None

    @classmethod
    def of(cls, status: PoolStatus) -> ResourcePoolStatus:
        return cls(
            cluster=status.cluster,
            driver=status.driver,
            pool_name=status.pool,
            generation=status.generation,
            resource_slice_count=status.resource_slice_count,
            node_name=status.node_name,
            total_devices=status.total,
            allocated_devices=status.allocated,
            available_devices=status.available,
            unavailable_devices=status.unavailable,
            validation_error=status.validation_error,
        )


async def resource_pools(
    info: Info, cluster: str | None, driver: str | None
) -> list[ResourcePoolStatus]:
    return [ResourcePoolStatus.of(s) for s in await mirrored_pools(info, cluster, driver)]


async def mirrored_pools(info: Info, cluster: str | None, driver: str | None) -> list[PoolStatus]:
    """The mirror's own status of every pool the caller may see (of one driver, or all)."""
    reader = info.context.reader
    slices = [
        r
        for r in await reader.list(RESOURCE_SLICE, cluster=cluster)
        if isinstance(r, SliceRecord) and (driver is None or r.driver == driver)
    ]
    # Every claim counts, those of namespaces outside the scope too: a device they hold is
    # allocated, whoever holds it (no claim is named here).
    claims = [
        r
        for r in await reader.whole.list(RESOURCE_CLAIM, cluster=cluster)
        if isinstance(r, ClaimRecord) and reader.scope.allows(r.meta.cluster, "")
    ]
    rules = [
        r
        for r in await reader.list(DEVICE_TAINT_RULE, cluster=cluster)
        if isinstance(r, TaintRuleRecord)
    ]
    # 1.33/1.34 rules may name a DeviceClass and carry CEL selectors (service.model.taint_rules)
    classes = [
        r
        for r in (await reader.list(DEVICE_CLASS, cluster=cluster) if rules else ())
        if isinstance(r, DeviceClassRecord)
    ]
    return pool_statuses(
        slices, claims, rules, classes=classes, selector_matcher=rule_selector_matches
    )
