"""History and audit fields of the graph (merged into the root `Query` by `schema.build_schema`).

    deviceHistory(device, from, to, cluster)   a device's holders and published versions
    whoHeld(device, at, cluster)               who held a device at an instant, with pods
    claimHistory(cluster, namespace, name)     every incarnation of a claim
    contention(from, to, groupBy, bucket, cluster)   per group and bucket: device-hours, waits
    idleHolders(from, to, cluster, first)      claims ranked by device-hours held idle
    historyGaps(from, to, cluster)             when clusters were not watched

Resolvers read `info.context.history` (a `service.history.queries.HistoryQueries`, None when
no history database is configured) and filter every row through the request's access scope.
Device names are read as `whoHolds` reads them, and followed by uuid across renames. Errors:
no history configured, history store unavailable, bad times or buckets — each a GraphQL error
with a `code` extension, never a 500.
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Annotated, TypeVar, overload

import orjson
import strawberry
from graphql import GraphQLError
from strawberry.scalars import JSON

from dra_mirror.service.history.times import BadTime, bucket_us, to_rfc3339, to_us

from .context import Info
from .scalars import DateTime

T = TypeVar("T")

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
    claims_waited: int
    wait_p50_seconds: float | None
    wait_p95_seconds: float | None
    wait_max_seconds: float | None
    peak_pending: int

    @classmethod
    def of(cls, r: q.ContentionRow) -> ContentionRow:
        return cls(
            cluster=r.cluster, group=r.group, since=_time(r.bucket_start_us),
            until=_time(r.bucket_end_us), device_hours_available=r.device_hours_available,
            device_hours_allocated=r.device_hours_allocated,
            device_hours_idle=r.device_hours_idle, utilization=r.utilization,
            claims_waited=r.claims_waited, wait_p50_seconds=r.wait_p50,
            wait_p95_seconds=r.wait_p95, wait_max_seconds=r.wait_max,
            peak_pending=r.peak_pending,
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


def _history(info: Info) -> q.HistoryQueries:
    if not info.context.scope.history:
        raise GraphQLError("history is not in your access scope", extensions={"code": "FORBIDDEN"})
    history = info.context.history
    if history is None:
        raise GraphQLError(
            "history is not configured (set DRA_MIRROR_HISTORY_DATABASE_URL)",
            extensions={"code": "HISTORY_DISABLED"},
        )
    return history


def _allows(info: Info, cluster: str, namespace: str = "") -> bool:
    return info.context.scope.allows(cluster, namespace)


def _sees_aggregate(info: Info, cluster: str) -> bool:
    """An aggregate over every namespace of `cluster` (contention by class, node or
    cluster) is shown only to a scope that sees every namespace there."""
    return info.context.scope.all_namespaces(cluster)


async def _ask(coro: Awaitable[T]) -> T:
    from dra_mirror.service.history.db import HistoryUnavailable

    try:
        return await coro
    except HistoryUnavailable as error:
        raise GraphQLError(
            f"history store unavailable: {error}",
            extensions={"code": "HISTORY_STORE_UNAVAILABLE"},
        ) from error


def _us(value: str, name: str) -> int:
    try:
        return to_us(value)
    except BadTime as error:
        raise GraphQLError(f"{name}: {error}", extensions={"code": "BAD_INPUT"}) from error


def _text(value: str | None, name: str) -> str | None:
    """A name the history is searched for: PostgreSQL text cannot hold NUL, so a value with
    one matches nothing there, and the database would refuse it as if it were down."""
    if value is not None and "\x00" in value:
        raise GraphQLError(f"{name} must not contain NUL", extensions={"code": "BAD_INPUT"})
    return value


def _window(start: str, end: str) -> tuple[int, int]:
    start_us, end_us = _us(start, "from"), _us(end, "to")
    if end_us <= start_us:
        raise GraphQLError("`to` must be after `from`", extensions={"code": "BAD_INPUT"})
    return start_us, end_us


def _allocations(info: Info, spans: list[q.AllocationSpan]) -> list[HistoryAllocation]:
    return [HistoryAllocation.of(a) for a in spans if _allows(info, a.cluster, a.namespace)]


@strawberry.type
class Query:
    @strawberry.field(description="Who held a device at an instant (device as in whoHolds).")
    async def who_held(
        self, info: Info, device: str, at: DateTime, cluster: str | None = None
    ) -> list[HistoryAllocation]:
        device, cluster = _text(device, "device") or "", _text(cluster, "cluster")
        held = await _ask(_history(info).who_held(device.strip(), _us(at, "at"), cluster))
        return _allocations(info, held)

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
        device, cluster = _text(device, "device") or "", _text(cluster, "cluster")
        timelines = await _ask(_history(info).device_history(device.strip(), start, end, cluster))
        out = []
        for t in timelines:
            inventory = [
                DeviceVersion(cluster=i.cluster, driver=i.driver, pool=i.pool, device=i.device,
                              uuid=i.uuid, node=i.node, data=JSON(i.data), since=_time(i.start_us),
                              until=_time(i.end_us), end_reason=i.end_reason)
                for i in t.inventory if _allows(info, i.cluster)
            ]  # fmt: skip
            allocations = _allocations(info, t.allocations)
            if inventory or allocations:
                out.append(
                    DeviceTimeline(uuid=t.uuid, inventory=inventory, allocations=allocations)
                )
        return out

    @strawberry.field(description="Every incarnation of a claim: versions, waits, holds, pods.")
    async def claim_history(
        self, info: Info, cluster: str, namespace: str, name: str
    ) -> list[ClaimHistory]:
        for value, what in ((cluster, "cluster"), (namespace, "namespace"), (name, "name")):
            _text(value, what)
        if not _allows(info, cluster, namespace):
            return []
        found = await _ask(_history(info).claim_history(cluster, namespace, name))
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
        cluster = _text(cluster, "cluster")
        rows = await _ask(contention_rows(_history(info), start, end, group_by.value, bucket,
                                          cluster))  # fmt: skip
        namespaced = group_by is ContentionGroup.NAMESPACE
        return [
            ContentionRow.of(r)
            for r in rows
            if (_allows(info, r.cluster, r.group) if namespaced
                else _sees_aggregate(info, r.cluster))
        ]  # fmt: skip

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
        cluster = _text(cluster, "cluster")
        first = max(0, min(first, 1000))
        holders = await _ask(_history(info).idle_holders(start, end, cluster=cluster, limit=first,
                                                          scope=info.context.scope))  # fmt: skip
        return [
            IdleHolder(cluster=h.cluster, namespace=h.namespace, claim=h.claim,
                       claim_uid=h.claim_uid, device_hours_idle=h.device_hours_idle,
                       device_hours_held=h.device_hours_held, devices=h.devices)
            for h in holders if _allows(info, h.cluster, h.namespace)
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
        gaps = await _ask(_history(info).gaps(start, end, _text(cluster, "cluster")))
        return [
            HistoryGap(cluster=g.cluster, since=_time(g.start_us), until=_time(g.end_us))
            for g in gaps
            if _allows(info, g.cluster)
        ]


async def contention_rows(
    history: q.HistoryQueries, start: int, end: int, group_by: str, bucket: str | None,
    cluster: str | None,
) -> list[q.ContentionRow]:  # fmt: skip
    """The audit with client input checked (bucket syntax and count) as GraphQL errors."""
    from dra_mirror.service.history.contention import BadAuditRequest

    try:
        size = bucket_us(bucket)
        return await history.contention(start, end, group_by=group_by, bucket_us=size,
                                        cluster=cluster)  # fmt: skip
    except (BadTime, BadAuditRequest) as error:
        raise GraphQLError(str(error), extensions={"code": "BAD_INPUT"}) from error
