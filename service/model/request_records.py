"""Records of ResourcePoolStatusRequests (KEP-5677), re-exported by `service.model.records`.

`PoolStatusRequestRecord` keeps a request's filters (driver, pool name, limit, the default
partition type attribute) and, once kube-controller-manager answered it, what it wrote: how many
pools matched (`pool_count`), the first `limit` of them (`ReportedPool`, each with the counts of
the 1.37 accounting and, carried as written, `partitionSummary` and `shareableSummary`), and the
Complete/Failed conditions. `service.model.pool_requests` reads them from the wire. Immutable
msgspec Structs without reference cycles, as every record (see `service.model.records`).
"""

from __future__ import annotations

from typing import Any

from msgspec import Struct

from dra_mirror.service.model.identity import Meta


class ReportedPool(Struct, frozen=True, gc=False):
    """One status.pools entry (a PoolStatus) as the controller wrote it."""

    driver: str
    pool: str
    generation: int = 0
    resource_slice_count: int | None = None
    total: int | None = None
    allocated: int | None = None
    available: int | None = None
    unavailable: int | None = None
    node_name: str | None = None
    validation_error: str | None = None
    partition_summary: tuple[dict[str, Any], ...] = ()  # raw PartitionTypeStatus entries
    shareable_summary: dict[str, Any] | None = None  # raw ShareableSummaryStatus


class PoolStatusRequestRecord(Struct, frozen=True, gc=False, tag="ResourcePoolStatusRequest"):
    meta: Meta
    driver: str
    pool_name: str | None = None
    limit: int = 100  # spec.limit (default 100, at most 1000)
    default_partition_type_attribute: str | None = None
    answered: bool = False  # status is set: the request is complete and immutable
    pool_count: int | None = None  # pools that matched, truncated or not
    pools: tuple[ReportedPool, ...] = ()
    conditions: tuple[dict[str, Any], ...] = ()  # raw Complete / Failed conditions
