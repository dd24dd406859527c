"""ResourcePoolStatusRequests (KEP-5677): their records, and where they differ from the mirror's
own pool status.

A ResourcePoolStatusRequest (resource.k8s.io/v1alpha3, cluster-scoped, DRAResourcePoolStatus:
alpha in 1.36, second alpha in 1.37) asks kube-controller-manager once for the status of the
pools of one driver (optionally one pool, at most `limit` pools, sorted by driver then pool
name); the controller writes `status` once and the request is then immutable — "users should
delete and recreate requests to get updated information" (resource/v1alpha3/types.go). So a
request's numbers are a snapshot taken when it was answered, and the mirror's own
`resourcePools` (`service.model.pool_status`, the same 1.37 accounting, computed live) may
have moved on since.

* `pool_status_request_record` reads the filters and, once answered, the pools and conditions
  (the summaries carried as written);
* `differences(reported, mirrored)` names each count on which a reported pool and the mirror's
  status of the same pool differ (a pool the mirror has no slice of is one difference,
  `pool`); `unreported(request, mirrored)` names the pools the request's filter matches that the
  mirror has and the answer does not list (only when the answer was not truncated).

Pure functions over records and wire Structs.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from sys import intern

from msgspec import Struct

from dra_mirror.service.model import api_pool_requests as api
from dra_mirror.service.model.identity import Meta
from dra_mirror.service.model.pool_status import PoolStatus
from dra_mirror.service.model.request_records import PoolStatusRequestRecord, ReportedPool

DEFAULT_LIMIT = 100  # ResourcePoolStatusRequestLimitDefault

# (field name as the API spells it, reported attribute, mirrored attribute)
COMPARED = (
    ("generation", "generation", "generation"),
    ("resourceSliceCount", "resource_slice_count", "resource_slice_count"),
    ("totalDevices", "total", "total"),
    ("allocatedDevices", "allocated", "allocated"),
    ("availableDevices", "available", "available"),
    ("unavailableDevices", "unavailable", "unavailable"),
    ("nodeName", "node_name", "node_name"),
)


class PoolDifference(Struct, frozen=True, gc=False):
    """One field on which a reported pool and the mirror's status of it differ."""

    field: str  # as the API spells it ("allocatedDevices"), or "pool"
    reported: str | None
    mirrored: str | None


def pool_status_request_record(
    wire: api.ResourcePoolStatusRequest, meta: Meta, _shared: object = None
) -> PoolStatusRequestRecord:
    spec = wire.spec or api.ResourcePoolStatusRequestSpec()
    status = wire.status
    pools = tuple(
        ReportedPool(
            driver=intern(p.driver),
            pool=p.pool_name,
            generation=p.generation or 0,
            resource_slice_count=p.resource_slice_count,
            total=p.total_devices,
            allocated=p.allocated_devices,
            available=p.available_devices,
            unavailable=p.unavailable_devices,
            node_name=p.node_name,
            validation_error=p.validation_error,
            partition_summary=tuple(p.partition_summary or ()),
            shareable_summary=p.shareable_summary,
        )
        for p in (status.pools if status is not None else None) or ()
    )
    return PoolStatusRequestRecord(
        meta=meta,
        driver=intern(spec.driver),
        pool_name=spec.pool_name,
        limit=spec.limit if spec.limit is not None else DEFAULT_LIMIT,
        default_partition_type_attribute=spec.default_partition_type_attribute,
        answered=status is not None,
        pool_count=status.pool_count if status is not None else None,
        pools=pools,
        conditions=tuple(status.conditions or ()) if status is not None else (),
    )


def _text(value: object) -> str | None:
    return None if value is None else str(value)


def differences(reported: ReportedPool, mirrored: PoolStatus | None) -> list[PoolDifference]:
    """The fields on which the reported pool and the mirror's status of it differ."""
    if mirrored is None:
        return [PoolDifference("pool", reported.pool, None)]
    found = []
    for name, ours, theirs in COMPARED:
        a, b = getattr(reported, ours), getattr(mirrored, theirs)
        if a != b:
            found.append(PoolDifference(name, _text(a), _text(b)))
    if (reported.validation_error is None) != (mirrored.validation_error is None):
        found.append(
            PoolDifference("validationError", reported.validation_error, mirrored.validation_error)
        )
    return found


def matches(request: PoolStatusRequestRecord, status: PoolStatus) -> bool:
    """Whether the request's filter (driver, optional pool name) selects the pool."""
    return status.driver == request.driver and request.pool_name in (None, status.pool)


def unreported(
    request: PoolStatusRequestRecord, mirrored: Iterable[PoolStatus]
) -> Sequence[PoolStatus]:
    """Pools the filter matches that the mirror has and an untruncated answer does not list."""
    if not request.answered or len(request.pools) < (request.pool_count or 0):
        return []
    listed = {(p.driver, p.pool) for p in request.pools}
    return [s for s in mirrored if matches(request, s) and (s.driver, s.pool) not in listed]
