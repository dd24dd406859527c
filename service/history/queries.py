"""The history reads behind the GraphQL history fields, the CSV export and the CLI.

`HistoryQueries(engine)` answers, each with one or a few SQL statements:

* `who_held(device, at)` — the allocations holding a device at an instant, with the pods
  consuming each claim then;
* `device_history(device, start, end)` — a device's allocations and published versions in a
  window;
* `claim_history(cluster, namespace, name)` — every incarnation (uid) of a claim: versions,
  waits, allocations, consumers, idle spells;
* `contention(...)` — see `service.history.contention`; `chargeback(...)`: `.chargeback`;
* `idle_holders(start, end, grants=…)` — claims ranked by device-hours held with no running
  consumer, among those the asker's grants show (filtered in SQL, before the limit);
* `gaps(start, end)` — when clusters were not watched.

Devices are named as `whoHolds` names them: a uuid (`GPU-…`, `MIG-…`), `node/device`,
`driver/pool/device`, or a bare device name. A name resolves to every device that ever carried
it; a device with a uuid is then followed by its uuid within its cluster, across renames
(drivers renumber `gpu-N`), a device without one by its (cluster, driver, pool, device) key.
`cluster` narrows every question to one cluster. Intervals are
half-open, [start, end): at the instant a claim releases a device the new holder holds it.
Times in and out are microseconds (`service.history.times` converts). Errors reaching the
database become `HistoryUnavailable`. On PostgreSQL the reads over a window add the floors of
`service.history.pruning`, so they read only the partitions the window reaches; lookups of
one device or claim go through each partition's index instead.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import orjson
from sqlalchemy import ColumnElement, Row, Select, and_, func, or_, select
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from dra_mirror.service.history import contention as contention_audit
from dra_mirror.service.history import pruning
from dra_mirror.service.history.chargeback import ChargebackReads
from dra_mirror.service.history.db import sql_errors
from dra_mirror.service.history.filters import (
    Granting,
    Grants,
    Visibility,
    device_filter,
    name_filters,
    visible,
)
from dra_mirror.service.history.models import (
    AllocationInterval,
    ConsumerInterval,
    DeviceInterval,
    Gap,
    IdleInterval,
    ObjectVersion,
    WaitInterval,
)
from dra_mirror.service.history.spans import (
    AllocationSpan,
    ClaimIncarnation,
    ClaimVersion,
    DeviceIdentity,
    DeviceTimeline,
    GapSpan,
    IdleHolder,
    InventorySpan,
    PodSpan,
    Span,
)
from dra_mirror.service.history.times import US_PER_HOUR, US_PER_SECOND

ContentionRow = contention_audit.ContentionRow


def _now_us() -> int:
    return int(time.time() * US_PER_SECOND)


def _allocation(a: Row[Any]) -> AllocationSpan:
    """A row of the allocations table (its columns by name) as a span."""
    return AllocationSpan(
        a.cluster, a.driver, a.pool, a.device, a.uuid, a.node, a.namespace, a.claim, a.claim_uid,
        a.request, a.share_id or None, orjson.loads(a.consumed_capacity), a.class_name,
        a.start_us, a.end_us, a.end_reason,
    )  # fmt: skip


def _overlaps(
    table: Any, start_us: int, end_us: int, floors: dict[str, int] | None = None
) -> ColumnElement[bool]:
    """Intervals of `table` overlapping [start_us, end_us); `floors` (pruning.floors) bound
    their starts from below, so PostgreSQL reads only the partitions the window reaches."""
    overlap = and_(table.start_us < end_us, or_(table.end_us.is_(None), table.end_us > start_us))
    floor = (floors or {}).get(table.__tablename__)
    return overlap if floor is None else and_(overlap, table.start_us >= floor)


class HistoryQueries(ChargebackReads):
    def __init__(self, engine: AsyncEngine, *, now_us: Callable[[], int] = _now_us) -> None:
        self.engine = engine
        self.now_us = now_us

    # --- devices ---------------------------------------------------------------------------

    async def resolve(self, device: str, cluster: str | None = None) -> list[DeviceIdentity]:
        """Every device that ever carried this name (or uuid): from the inventory, or from
        allocations when the inventory never saw it. A bare word is tried as a uuid first."""
        found: set[DeviceIdentity] = set()
        with sql_errors("resolve device"):
            async with self.engine.connect() as conn:
                for condition in name_filters(device):
                    for table in (DeviceInterval, AllocationInterval):
                        query = select(
                            table.cluster, table.driver, table.pool, table.device, table.uuid
                        ).distinct()
                        query = query.where(condition(table))
                        if cluster is not None:
                            query = query.where(table.cluster == cluster)
                        found.update(DeviceIdentity(*r) for r in await conn.execute(query))
                        if found:
                            break
                    if found:
                        break
        # a key seen once with its uuid and once without (an old allocation) is the same device
        with_uuid = {(d.cluster, d.driver, d.pool, d.device) for d in found if d.uuid}
        return sorted(
            (
                d
                for d in found
                if d.uuid or (d.cluster, d.driver, d.pool, d.device) not in with_uuid
            ),
            key=lambda d: (d.cluster, d.driver, d.pool, d.device, d.uuid or ""),
        )

    async def who_held(
        self, device: str, at_us: int, cluster: str | None = None
    ) -> list[AllocationSpan]:
        """Allocations holding the device at `at_us`, each with the pods consuming it then."""
        identities = await self.resolve(device, cluster)
        if not identities:
            return []
        a = AllocationInterval
        with sql_errors("whoHeld"):
            async with self.engine.connect() as conn:
                query = select(a).where(
                    device_filter(a, identities), a.start_us <= at_us,
                    or_(a.end_us.is_(None), a.end_us > at_us),
                )  # fmt: skip
                held = [_allocation(r) for r in (await conn.execute(query)).all()]
                await self._attach_pods(conn, held, at_us=at_us)
        return sorted(held, key=lambda h: (h.cluster, h.driver, h.pool, h.device, h.claim))

    async def device_history(
        self, device: str, start_us: int, end_us: int, cluster: str | None = None
    ) -> list[DeviceTimeline]:
        identities = await self.resolve(device, cluster)
        if not identities:
            return []
        a, d = AllocationInterval, DeviceInterval
        with sql_errors("deviceHistory"):
            async with self.engine.connect() as conn:
                floors = await pruning.floors(conn, ("allocations",), start_us)
                allocations = (
                    await conn.execute(
                        select(a)
                        .where(device_filter(a, identities), _overlaps(a, start_us, end_us, floors))
                        .order_by(a.start_us, a.id)
                    )
                ).all()
                spans = [_allocation(r) for r in allocations]
                await self._attach_pods(conn, spans)
                inventory = (
                    await conn.execute(
                        select(d)
                        .where(device_filter(d, identities), _overlaps(d, start_us, end_us))
                        .order_by(d.start_us, d.id)
                    )
                ).all()
        timelines: dict[Any, DeviceTimeline] = {}
        by_key: dict[tuple[str, str, str, str], Any] = {}  # device key -> its timeline's key
        for ident in identities:
            device_key = (ident.cluster, ident.driver, ident.pool, ident.device)
            key = ident.uuid or device_key
            by_key.setdefault(device_key, key)
            timelines.setdefault(key, DeviceTimeline(ident.uuid, [], [], [])).identities.append(
                ident
            )
        for span in spans:
            device_key = (span.cluster, span.driver, span.pool, span.device)
            # a span without a uuid (held before any slice published the device) belongs to
            # the device its key names; one of a renamed key to its uuid
            key = span.uuid or by_key.get(device_key, device_key)
            if key not in timelines:
                key = next(iter(timelines))
            timelines[key].allocations.append(span)
        for row in inventory:
            key = row.uuid or (row.cluster, row.driver, row.pool, row.device)
            timelines.setdefault(key, DeviceTimeline(row.uuid, [], [], [])).inventory.append(
                InventorySpan(row.cluster, row.driver, row.pool, row.device, row.uuid, row.node,
                              orjson.loads(row.data), row.start_us, row.end_us, row.end_reason)
            )  # fmt: skip
        return list(timelines.values())

    async def _attach_pods(
        self, conn: AsyncConnection, spans: list[AllocationSpan], *, at_us: int | None = None
    ) -> None:
        uids = sorted({s.claim_uid for s in spans})
        if not uids:
            return
        c = ConsumerInterval
        query = select(c).where(c.claim_uid.in_(uids))
        if at_us is not None:
            query = query.where(c.start_us <= at_us, or_(c.end_us.is_(None), c.end_us > at_us))
        else:  # the pods overlapping any span (a superset: filtered per span below)
            earliest = min(s.start_us for s in spans)
            floors = await pruning.floors(conn, ("consumers",), earliest)
            query = query.where(or_(c.end_us.is_(None), c.end_us > earliest))
            if "consumers" in floors:
                query = query.where(c.start_us >= floors["consumers"])
            if all(s.end_us is not None for s in spans):
                query = query.where(c.start_us < max(s.end_us or 0 for s in spans))
        pods: dict[tuple[str, str], list[PodSpan]] = defaultdict(list)
        for row in (await conn.execute(query.order_by(c.start_us, c.pod))).all():
            pods[(row.cluster, row.claim_uid)].append(
                PodSpan(row.pod, row.pod_uid, row.start_us, row.end_us)
            )
        for span in spans:
            for pod in pods.get((span.cluster, span.claim_uid), ()):
                if at_us is not None or _span_overlap(pod, span):
                    span.pods.append(pod)

    # --- claims ----------------------------------------------------------------------------

    async def claim_history(
        self, cluster: str, namespace: str, name: str
    ) -> list[ClaimIncarnation]:
        v = ObjectVersion
        with sql_errors("claimHistory"):
            async with self.engine.connect() as conn:
                versions = (
                    await conn.execute(
                        select(v.uid, v.resource_version, v.observed_us, v.deleted, v.body)
                        .where(v.cluster == cluster, v.kind == "ResourceClaim",
                               v.namespace == namespace, v.name == name)
                        .order_by(v.observed_us, v.id)
                    )
                ).all()  # fmt: skip

                def of_claim(table: Any) -> Select[Any]:
                    return (
                        select(table)
                        .where(
                            table.cluster == cluster,
                            table.namespace == namespace,
                            table.claim == name,
                        )
                        .order_by(table.start_us, table.id)
                    )

                waits = (await conn.execute(of_claim(WaitInterval))).all()
                allocations = (await conn.execute(of_claim(AllocationInterval))).all()
                consumers = (await conn.execute(of_claim(ConsumerInterval))).all()
                idle = (await conn.execute(select(IdleInterval).where(
                    IdleInterval.cluster == cluster, IdleInterval.namespace == namespace,
                    IdleInterval.claim == name).order_by(IdleInterval.start_us))).all()  # fmt: skip
        incarnations: dict[str, ClaimIncarnation] = {}

        def incarnation(uid: str) -> ClaimIncarnation:
            if uid not in incarnations:
                incarnations[uid] = ClaimIncarnation(
                    cluster, namespace, name, uid, [], [], [], [], []
                )
            return incarnations[uid]

        for uid, rv, observed, deleted, body in versions:
            incarnation(uid).versions.append(ClaimVersion(uid, rv, observed, deleted, body))
        for w in waits:
            incarnation(w.claim_uid).waits.append(
                Span(w.start_us, w.end_us, w.end_reason, w.class_names)
            )
        for a in allocations:
            incarnation(a.claim_uid).allocations.append(_allocation(a))
        for c in consumers:
            incarnation(c.claim_uid).consumers.append(
                PodSpan(c.pod, c.pod_uid, c.start_us, c.end_us)
            )
        for i in idle:
            incarnation(i.claim_uid).idle.append(Span(i.start_us, i.end_us, i.end_reason))

        def first_seen(inc: ClaimIncarnation) -> int:
            starts = [x.observed_us for x in inc.versions] + [x.start_us for x in inc.waits]
            starts += [x.start_us for x in inc.allocations]
            return min(starts, default=0)

        return sorted(incarnations.values(), key=first_seen)

    # --- audits ----------------------------------------------------------------------------

    async def contention(
        self, start_us: int, end_us: int, *, group_by: str = "CLASS",
        bucket_us: int | None = None, cluster: str | None = None,
    ) -> list[ContentionRow]:  # fmt: skip
        with sql_errors("contention"):
            return await contention_audit.contention(
                self.engine, start_us=start_us, end_us=end_us, horizon_us=self.now_us(),
                group_by=group_by, bucket_us=bucket_us, cluster=cluster,
            )  # fmt: skip

    async def idle_holders(
        self,
        start_us: int,
        end_us: int,
        *,
        cluster: str | None = None,
        limit: int = 100,
        scope: Visibility | None = None,
    ) -> list[IdleHolder]:
        """The `limit` claims holding devices idle longest over the window, among the claims
        the asker's `scope` shows (None: every claim) — filtered before the limit, in SQL, so
        a narrower scope still gets up to `limit` rows."""
        grants = scope.namespace_grants() if isinstance(scope, Granting) else None
        if scope is not None and grants is None and scope.may_hide():
            # a scope that only answers `allows`: every row, filtered here, then the limit
            rows = await self._idle_holders(start_us, end_us, cluster, None, None)
            return [r for r in rows if scope.allows(r.cluster, r.namespace)][:limit]
        return await self._idle_holders(start_us, end_us, cluster, limit, grants)

    async def _idle_holders(
        self, start_us: int, end_us: int, cluster: str | None, limit: int | None,
        grants: Grants | None,
    ) -> list[IdleHolder]:  # fmt: skip
        a, i = AllocationInterval, IdleInterval
        horizon = min(end_us, self.now_us())
        greatest = func.greatest if self._postgres else func.max
        least = func.least if self._postgres else func.min
        a_end = func.coalesce(a.end_us, horizon)
        idle_us = func.sum(
            least(a_end, func.coalesce(i.end_us, horizon), end_us)
            - greatest(a.start_us, i.start_us, start_us)
        )
        overlap_ok = least(a_end, func.coalesce(i.end_us, horizon), end_us) > greatest(
            a.start_us, i.start_us, start_us
        )
        held_us = func.sum(least(a_end, end_us) - greatest(a.start_us, start_us))
        with sql_errors("idleHolders"):
            async with self.engine.connect() as conn:
                floors = await pruning.floors(conn, ("allocations", "idle_holds"), start_us)
                query = (
                    select(a.cluster, a.namespace, a.claim, a.claim_uid, idle_us.label("idle_us"))
                    .join(i, and_(i.cluster == a.cluster, i.claim_uid == a.claim_uid))
                    .where(_overlaps(a, start_us, end_us, floors),
                           _overlaps(i, start_us, end_us, floors), overlap_ok)
                    .where(visible(a, grants),
                           *([a.cluster == cluster] if cluster is not None else []))
                    .group_by(a.cluster, a.namespace, a.claim, a.claim_uid)
                    .order_by(idle_us.desc(), a.cluster, a.namespace, a.claim)
                    .limit(limit)
                )  # fmt: skip
                ranked = (await conn.execute(query)).all()
                uids = [r.claim_uid for r in ranked]
                held = {}
                if uids:
                    held_rows = await conn.execute(
                        select(a.claim_uid, held_us, func.count(func.distinct(a.device)))
                        .where(a.claim_uid.in_(uids), _overlaps(a, start_us, end_us, floors))
                        .group_by(a.claim_uid)
                    )
                    held = {uid: (int(us), n) for uid, us, n in held_rows}
        return [
            IdleHolder(r.cluster, r.namespace, r.claim, r.claim_uid, int(r.idle_us) / US_PER_HOUR,
                       held.get(r.claim_uid, (0, 0))[0] / US_PER_HOUR,
                       held.get(r.claim_uid, (0, 0))[1])
            for r in ranked
        ]  # fmt: skip

    async def gaps(self, start_us: int, end_us: int, cluster: str | None = None) -> list[GapSpan]:
        query = select(Gap.cluster, Gap.start_us, Gap.end_us).where(
            Gap.start_us < end_us, Gap.end_us > start_us
        )
        if cluster is not None:
            query = query.where(Gap.cluster == cluster)
        with sql_errors("gaps"):
            async with self.engine.connect() as conn:
                rows = await conn.execute(query.order_by(Gap.cluster, Gap.start_us))
                return [GapSpan(*r) for r in rows]

    @property
    def _postgres(self) -> bool:
        return self.engine.dialect.name == "postgresql"


def _span_overlap(pod: PodSpan, span: AllocationSpan) -> bool:
    pod_end = pod.end_us if pod.end_us is not None else float("inf")
    span_end = span.end_us if span.end_us is not None else float("inf")
    return pod.start_us < span_end and pod_end > span.start_us
