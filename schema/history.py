"""History and audit fields of the graph (merged into the root `Query` by `schema.build_schema`).

    deviceHistory(device, from, to, cluster)   a device's holders and published versions
    whoHeld(device, at, cluster)               who held a device at an instant, with pods
    claimHistory(cluster, namespace, name)     every incarnation of a claim
    contention(from, to, groupBy, bucket, cluster)   per group and bucket: device-hours, waits
    idleHolders(from, to, cluster, first)      claims ranked by device-hours held idle
    historyGaps(from, to, cluster)             when clusters were not watched

Resolvers ask the questions of the history (`service.questions.history`) with the request's
asker: its history reads (none when no history database is configured) and its access scope,
which every row goes through. Device names are read as `whoHolds` reads them, and followed by
uuid across renames. Errors: no history configured, history store unavailable, bad times or
buckets — each a GraphQL error with a `code` extension, never a 500.
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, Annotated, overload

import orjson
import strawberry
from strawberry.scalars import JSON

from dra_mirror.service.history.times import to_rfc3339
from dra_mirror.service.questions import history
from dra_mirror.service.questions.asking import QuestionError

from .asked import asked, graphql_error
from .context import Info
from .scalars import DateTime

if TYPE_CHECKING:  # SQLAlchemy loads only when a history database is configured
    from dra_mirror.service.history import queries as q


@strawberry.enum(description="How `contention` groups its rows (always within a cluster).")
class ContentionGroup(enum.Enum):
    CLASS = "CLASS"
    NAMESPACE = "NAMESPACE"
    NODE = "NODE"
    CLUSTER = "CLUSTER"


@overload
def _time(us: int) -> DateTime: ...
@overload
def _time(us: int | None) -> DateTime | None: ...
def _time(us: int | None) -> DateTime | None:
    return None if us is None else DateTime(to_rfc3339(us))


@strawberry.type(description="A pod consuming a claim (status.reservedFor) over an interval.")
class HistoryPod:
    name: str
    uid: str
    since: DateTime
    until: DateTime | None

    @classmethod
    def of(cls, pod: q.PodSpan) -> HistoryPod:
        return cls(name=pod.name, uid=pod.uid, since=_time(pod.start_us), until=_time(pod.end_us))


@strawberry.type(description="One allocation result held over [since, until); until null: held.")
class HistoryAllocation:
    cluster: str
    driver: str
    pool: str
    device: str
    uuid: str | None
    node: str | None
    namespace: str
    claim: str
    claim_uid: str
    request: str
    share_id: str | None = strawberry.field(name="shareID")
    consumed_capacity: JSON
    class_name: str | None
    since: DateTime
    until: DateTime | None
    end_reason: str | None = strawberry.field(
        description="released, deleted (the claim), or unwatched (history lost sight of it)"
    )
    pods: list[HistoryPod]

    @classmethod
    def of(cls, a: q.AllocationSpan) -> HistoryAllocation:
        return cls(
            cluster=a.cluster, driver=a.driver, pool=a.pool, device=a.device, uuid=a.uuid,
            node=a.node, namespace=a.namespace, claim=a.claim, claim_uid=a.claim_uid,
            request=a.request, share_id=a.share_id, consumed_capacity=JSON(a.consumed_capacity),
            class_name=a.class_name or None, since=_time(a.start_us), until=_time(a.end_us),
            end_reason=a.end_reason, pods=[HistoryPod.of(p) for p in a.pods],
        )  # fmt: skip


@strawberry.type(description="A device as its driver published it over [since, until).")
class DeviceVersion:
    cluster: str
    driver: str
    pool: str
    device: str
    uuid: str | None
    node: str | None
    data: JSON
    since: DateTime
    until: DateTime | None
    end_reason: str | None = strawberry.field(description="changed, disappeared or unwatched")


@strawberry.type(description="One physical device (its uuid), or one device key without uuid.")
class DeviceTimeline:
    uuid: str | None
    inventory: list[DeviceVersion]
    allocations: list[HistoryAllocation]


@strawberry.type
class HistorySpan:
    since: DateTime
    until: DateTime | None
    end_reason: str | None
    classes: list[str] = strawberry.field(description="for waits: the classes requested")


@strawberry.type(description="One version of a claim as history recorded it.")
class ClaimVersion:
    resource_version: str
    observed_at: DateTime
    deleted: bool
    record: JSON


@strawberry.type(description="One incarnation (uid) of a claim name.")
class ClaimHistory:
    cluster: str
    namespace: str
    name: str
    uid: str
    versions: list[ClaimVersion]
    waits: list[HistorySpan]
    allocations: list[HistoryAllocation]
    consumers: list[HistoryPod]
    idle: list[HistorySpan]


@strawberry.type(description="Contention of one group in one bucket [since, until).")
class ContentionRow:
    cluster: str
    group: str
    since: DateTime
    until: DateTime
    device_hours_available: float | None
    device_hours_allocated: float
    device_hours_idle: float
    utilization: float | None = strawberry.field(description="allocated / available, in %")
    claims_waited: int = strawberry.field(
        description="Served waits (allocated) that started in the bucket and began while the "
        "mirror observed the cluster; a claim waits while an unfinished pod references it and "
        "it is unallocated. The wait percentiles are over these."
    )
    wait_p50_seconds: float | None
    wait_p95_seconds: float | None
    wait_max_seconds: float | None
    peak_pending: int
    claims_abandoned: int = strawberry.field(
        description="Waits started in the bucket that ended abandoned: the claim deleted, or "
        "no pod referencing it any more. Not in the wait percentiles."
    )
    gpu_hours_available: float | None = strawberry.field(
        description="GPU-equivalent-hours of GPUs published: a GPU counts once however many "
        "partitions it publishes. Null under NAMESPACE."
    )
    gpu_hours_allocated: float = strawberry.field(
        description="GPU-equivalent-hours allocated: a whole GPU 1 per hour, a MIG partition "
        "its share of the GPU's memory slices, a share its consumed capacity over the GPU's."
    )
    gpu_hours_idle: float = strawberry.field(
        description="GPU-equivalent-hours allocated while the claim was idle-held."
    )
    gpu_utilization: float | None = strawberry.field(
        description="gpuHoursAllocated / gpuHoursAvailable, in %: the share of the GPUs held."
    )

    @classmethod
    def of(cls, r: q.ContentionRow) -> ContentionRow:
        return cls(
            cluster=r.cluster, group=r.group, since=_time(r.bucket_start_us),
            until=_time(r.bucket_end_us), device_hours_available=r.device_hours_available,
            device_hours_allocated=r.device_hours_allocated,
            device_hours_idle=r.device_hours_idle, utilization=r.utilization,
            claims_waited=r.claims_waited, wait_p50_seconds=r.wait_p50,
            wait_p95_seconds=r.wait_p95, wait_max_seconds=r.wait_max,
            peak_pending=r.peak_pending, claims_abandoned=r.claims_abandoned,
            gpu_hours_available=r.gpu_hours_available, gpu_hours_allocated=r.gpu_hours_allocated,
            gpu_hours_idle=r.gpu_hours_idle, gpu_utilization=r.gpu_utilization,
        )  # fmt: skip


@strawberry.type(description="A claim that held devices with no consumer pod Running.")
class IdleHolder:
    cluster: str
    namespace: str
    claim: str
    claim_uid: str
    device_hours_idle: float
    device_hours_held: float
    devices: int


@strawberry.type(description="A cluster was not watched over [since, until): data is missing.")
class HistoryGap:
    cluster: str
    since: DateTime
    until: DateTime


def _window(start: str, end: str) -> tuple[int, int]:
    try:
        return history.window(start, end)
    except QuestionError as error:
        raise graphql_error(error) from error


def _instant(value: str, what: str) -> int:
    try:
        return history.instant(value, what)
    except QuestionError as error:
        raise graphql_error(error) from error


@strawberry.type
class Query:
    @strawberry.field(description="Who held a device at an instant (device as in whoHolds).")
    async def who_held(
        self, info: Info, device: str, at: DateTime, cluster: str | None = None
    ) -> list[HistoryAllocation]:
        held = await asked(
            history.who_held(info.context.asker, device, _instant(at, "at"), cluster)
        )
        return [HistoryAllocation.of(a) for a in held]

    @strawberry.field(description="A device's holders and published versions over [from, to).")
    async def device_history(
        self,
        info: Info,
        device: str,
        from_: Annotated[DateTime, strawberry.argument(name="from")],
        to: DateTime,
        cluster: str | None = None,
    ) -> list[DeviceTimeline]:
        start, end = _window(from_, to)
        timelines = await asked(
            history.device_history(info.context.asker, device, start, end, cluster)
        )
        out = []
        for t in timelines:
            inventory = [
                DeviceVersion(cluster=i.cluster, driver=i.driver, pool=i.pool, device=i.device,
                              uuid=i.uuid, node=i.node, data=JSON(i.data), since=_time(i.start_us),
                              until=_time(i.end_us), end_reason=i.end_reason)
                for i in t.inventory
            ]  # fmt: skip
            allocations = [HistoryAllocation.of(a) for a in t.allocations]
            out.append(DeviceTimeline(uuid=t.uuid, inventory=inventory, allocations=allocations))
        return out

    @strawberry.field(description="Every incarnation of a claim: versions, waits, holds, pods.")
    async def claim_history(
        self, info: Info, cluster: str, namespace: str, name: str
    ) -> list[ClaimHistory]:
        found = await asked(history.claim_history(info.context.asker, cluster, namespace, name))
        return [
            ClaimHistory(
                cluster=c.cluster, namespace=c.namespace, name=c.name, uid=c.uid,
                versions=[ClaimVersion(resource_version=v.resource_version,
                                       observed_at=_time(v.observed_us), deleted=v.deleted,
                                       record=orjson.loads(v.body)) for v in c.versions],
                waits=[HistorySpan(since=_time(w.start_us), until=_time(w.end_us),
                                   end_reason=w.end_reason,
                                   classes=[x for x in w.detail.split(",") if x])
                       for w in c.waits],
                allocations=[HistoryAllocation.of(a) for a in c.allocations],
                consumers=[HistoryPod.of(p) for p in c.consumers],
                idle=[HistorySpan(since=_time(i.start_us), until=_time(i.end_us),
                                  end_reason=i.end_reason, classes=[]) for i in c.idle],
            )
            for c in found
        ]  # fmt: skip

    @strawberry.field(
        description="Per group and bucket: device-hours available, allocated and held idle, "
        "utilization, claims that waited, wait p50/p95/max, peak pending. `bucket` like 1h, "
        "6h, 1d, 7d; null: one bucket for the whole window."
    )
    async def contention(
        self,
        info: Info,
        from_: Annotated[DateTime, strawberry.argument(name="from")],
        to: DateTime,
        group_by: ContentionGroup = ContentionGroup.CLASS,
        bucket: str | None = None,
        cluster: str | None = None,
    ) -> list[ContentionRow]:
        start, end = _window(from_, to)
        rows = await asked(
            history.contention(info.context.asker, start, end, group_by.value, bucket, cluster)
        )
        return [ContentionRow.of(r) for r in rows]

    @strawberry.field(description="Claims ranked by device-hours held with no running consumer.")
    async def idle_holders(
        self,
        info: Info,
        from_: Annotated[DateTime, strawberry.argument(name="from")],
        to: DateTime,
        cluster: str | None = None,
        first: int = 100,
    ) -> list[IdleHolder]:
        start, end = _window(from_, to)
        holders = await asked(history.idle_holders(info.context.asker, start, end, cluster, first))
        return [
            IdleHolder(cluster=h.cluster, namespace=h.namespace, claim=h.claim,
                       claim_uid=h.claim_uid, device_hours_idle=h.device_hours_idle,
                       device_hours_held=h.device_hours_held, devices=h.devices)
            for h in holders
        ]  # fmt: skip

    @strawberry.field(description="When clusters were not watched (audits lack data there).")
    async def history_gaps(
        self,
        info: Info,
        from_: Annotated[DateTime, strawberry.argument(name="from")],
        to: DateTime,
        cluster: str | None = None,
    ) -> list[HistoryGap]:
        start, end = _window(from_, to)
        gaps = await asked(history.gaps(info.context.asker, start, end, cluster))
        return [
            HistoryGap(cluster=g.cluster, since=_time(g.start_us), until=_time(g.end_us))
            for g in gaps
        ]
