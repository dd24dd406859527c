"""Questions of the history: who held a device when, its timeline, a claim's lives, contention.

Each reads the history database (`asker.history_reads()`: `HistoryOff` when there is none, or
when the asker's scope has no history) and keeps only what the asker's scope shows:

* `who_held(asker, device, at_us, cluster)` — allocations holding a device at an instant;
* `device_history(asker, device, start_us, end_us, cluster)` — a device's holders and
  published versions in a window (a timeline with nothing visible is left out);
* `claim_history(asker, cluster, namespace, name)` — every incarnation of a claim (nothing
  for a namespace outside the scope);
* `contention(asker, start_us, end_us, group_by, bucket, cluster)` — the audit's rows: by
  namespace those of namespaces the asker sees, by class, node or cluster only those of
  clusters where the asker sees every namespace (an aggregate over hidden namespaces says
  something of them);
* `chargeback(asker, start_us, end_us, group_by, cluster)` — GPU-equivalent-hours held and
  in use, and their cost, per namespace the asker sees, or per team summed over those
  namespaces only (service.history.chargeback);
* `utilization_audit(asker, start_us, end_us, group_by, cluster)` — busy-hours against
  held GPU-equivalent-hours and energy per group (`service.history.utilization_audit`),
  scoped as `contention` (by CLAIM as by namespace);
* `device_utilization(asker, cluster, driver, pool, device, start_us, end_us)` — a device's
  five-minute buckets over the window, unknown ones included (`service.history.
  utilization_series`); a device is its cluster's, so nothing for a cluster outside the scope;
  a server without a utilisation source answers `UTILIZATION_DISABLED`, as the live ones do;
* `idle_holders(asker, start_us, end_us, cluster, limit)`, `gaps(...)` — claims ranked by
  device-hours held idle; when clusters were not watched.

Devices are named as who-holds names them (uuid, node/device, driver/pool/device, bare name).
`window(start, end)` reads RFC 3339 times. Errors: a bad time, bucket or name is
`BadQuestion`; the database unreachable is `QuestionUnavailable`. The graph's history fields
(`schema.history`), MCP's history tools and the command line all ask these.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TYPE_CHECKING, TypeVar

from dra_mirror.service.history.times import BadTime, bucket_us, to_us
from dra_mirror.service.stores.protocols import StoreUnavailable

from .asker import Asker
from .asking import BadQuestion, QuestionUnavailable

if TYPE_CHECKING:  # SQLAlchemy loads only when a history database is configured
    from dra_mirror.service.history.chargeback import ChargeRow
    from dra_mirror.service.history.queries import ContentionRow
    from dra_mirror.service.history.spans import (
        AllocationSpan,
        ClaimIncarnation,
        DeviceTimeline,
        GapSpan,
        IdleHolder,
    )
    from dra_mirror.service.history.utilization_audit import UtilizationAuditRow
    from dra_mirror.service.history.utilization_series import SeriesPoint

__all__ = [
    "chargeback",
    "claim_history",
    "contention",
    "device_history",
    "device_utilization",
    "gaps",
    "idle_holders",
    "instant",
    "name",
    "utilization_audit",
    "who_held",
    "window",
]

T = TypeVar("T")
GROUPS = ("CLASS", "NAMESPACE", "NODE", "CLUSTER")


async def _read(what: Awaitable[T]) -> T:
    try:
        return await what
    except StoreUnavailable as error:  # HistoryUnavailable is one
        raise QuestionUnavailable(
            f"history store unavailable: {error}", code="HISTORY_STORE_UNAVAILABLE"
        ) from error


def instant(value: str, what: str) -> int:
    """Microseconds of an RFC 3339 time (`BadQuestion` naming `what` otherwise)."""
    try:
        return to_us(value)
    except BadTime as error:
        raise BadQuestion(f"{what}: {error}") from error


def window(start: str, end: str) -> tuple[int, int]:
    start_us, end_us = instant(start, "from"), instant(end, "to")
    if end_us <= start_us:
        raise BadQuestion("`to` must be after `from`")
    return start_us, end_us


def name(value: str | None, what: str) -> str | None:
    """A name the history is searched for: PostgreSQL text cannot hold NUL, so a value with
    one matches nothing there, and the database would refuse it as if it were down."""
    if value is not None and "\x00" in value:
        raise BadQuestion(f"{what} must not contain NUL")
    return value


async def who_held(
    asker: Asker, device: str, at_us: int, cluster: str | None = None
) -> list[AllocationSpan]:
    history = asker.history_reads()
    device, cluster = (name(device, "device") or "").strip(), name(cluster, "cluster")
    held = await _read(history.who_held(device, at_us, cluster))
    return [a for a in held if asker.scope.allows(a.cluster, a.namespace)]


async def device_history(
    asker: Asker, device: str, start_us: int, end_us: int, cluster: str | None = None
) -> list[DeviceTimeline]:
    history = asker.history_reads()
    device, cluster = (name(device, "device") or "").strip(), name(cluster, "cluster")
    timelines = await _read(history.device_history(device, start_us, end_us, cluster))
    scope = asker.scope
    out = []
    for t in timelines:
        t.inventory = [i for i in t.inventory if scope.allows(i.cluster)]
        t.allocations = [a for a in t.allocations if scope.allows(a.cluster, a.namespace)]
        if t.inventory or t.allocations:
            out.append(t)
    return out


async def claim_history(
    asker: Asker, cluster: str, namespace: str, claim: str
) -> list[ClaimIncarnation]:
    history = asker.history_reads()
    for value, what in ((cluster, "cluster"), (namespace, "namespace"), (claim, "name")):
        name(value, what)
    if not asker.scope.allows(cluster, namespace):
        return []
    return await _read(history.claim_history(cluster, namespace, claim))


async def contention(
    asker: Asker,
    start_us: int,
    end_us: int,
    group_by: str = "CLASS",
    bucket: str | None = None,
    cluster: str | None = None,
) -> list[ContentionRow]:
    from dra_mirror.service.history.contention import BadAuditRequest

    history = asker.history_reads()
    if group_by not in GROUPS:
        raise BadQuestion(f"group by one of {', '.join(g.lower() for g in GROUPS)}")
    cluster = name(cluster, "cluster")
    try:
        size = bucket_us(bucket)
        rows = await _read(
            history.contention(start_us, end_us, group_by=group_by, bucket_us=size,
                               cluster=cluster)
        )  # fmt: skip
    except (BadTime, BadAuditRequest) as error:
        raise BadQuestion(str(error)) from error
    scope = asker.scope
    if group_by == "NAMESPACE":
        return [r for r in rows if scope.allows(r.cluster, r.group)]
    return [r for r in rows if scope.all_namespaces(r.cluster)]


async def chargeback(
    asker: Asker,
    start_us: int,
    end_us: int,
    group_by: str = "NAMESPACE",
    cluster: str | None = None,
) -> list[ChargeRow]:
    from dra_mirror.service.history.chargeback import GROUPS, seen_by

    history = asker.history_reads()
    if group_by not in GROUPS:
        raise BadQuestion(f"group by one of {', '.join(g.lower() for g in GROUPS)}")
    rows = await _read(history.chargeback(start_us, end_us, cluster=name(cluster, "cluster")))
    return seen_by(rows, group_by, asker.scope.allows)


async def utilization_audit(
    asker: Asker,
    start_us: int,
    end_us: int,
    group_by: str = "NAMESPACE",
    cluster: str | None = None,
) -> list[UtilizationAuditRow]:
    from dra_mirror.service.history.audit_windows import BadAuditRequest
    from dra_mirror.service.history.db import sql_errors
    from dra_mirror.service.history.utilization_audit import GROUPS as AUDIT_GROUPS
    from dra_mirror.service.history.utilization_audit import utilization_audit as audit

    history = asker.history_reads()
    if group_by not in AUDIT_GROUPS:
        raise BadQuestion(f"group by one of {', '.join(g.lower() for g in AUDIT_GROUPS)}")
    cluster = name(cluster, "cluster")

    async def read() -> list[UtilizationAuditRow]:
        with sql_errors("utilization audit"):
            return await audit(history.engine, start_us=start_us, end_us=end_us,
                               horizon_us=history.now_us(), group_by=group_by,
                               cluster=cluster)  # fmt: skip

    try:
        rows = await _read(read())
    except BadAuditRequest as error:
        raise BadQuestion(str(error)) from error
    scope = asker.scope
    if group_by in ("NAMESPACE", "CLAIM"):
        return [r for r in rows if scope.allows(r.cluster, r.group.split("/")[0])]
    return [r for r in rows if scope.all_namespaces(r.cluster)]


async def device_utilization(
    asker: Asker, cluster: str, driver: str, pool: str, device: str, start_us: int, end_us: int
) -> list[SeriesPoint]:
    from dra_mirror.service.history.audit_windows import BadAuditRequest
    from dra_mirror.service.history.db import sql_errors
    from dra_mirror.service.history.utilization_series import device_series

    from .utilization import UtilizationOff

    history = asker.history_reads()
    if asker.utilization is None:
        raise UtilizationOff("utilisation is not configured (set DRA_MIRROR_UTILIZATION_CONFIG)")
    for value, what in ((cluster, "cluster"), (driver, "driver"), (pool, "pool"),
                        (device, "device")):  # fmt: skip
        name(value, what)
    if not asker.scope.allows(cluster):
        return []

    async def read() -> list[SeriesPoint]:
        with sql_errors("device utilisation"):
            return await device_series(history.engine, cluster=cluster, driver=driver, pool=pool,
                                       device=device, start_us=start_us, end_us=end_us)  # fmt: skip

    try:
        return await _read(read())
    except BadAuditRequest as error:
        raise BadQuestion(str(error)) from error


async def idle_holders(
    asker: Asker, start_us: int, end_us: int, cluster: str | None = None, limit: int = 100
) -> list[IdleHolder]:
    """Claims ranked by device-hours held idle over the window, among those the asker sees
    (filtered before the limit, at most 1,000)."""
    history = asker.history_reads()
    limit = max(0, min(limit, 1000))
    scope = asker.scope
    holders = await _read(
        history.idle_holders(start_us, end_us, cluster=name(cluster, "cluster"), limit=limit,
                             scope=scope)
    )  # fmt: skip
    return [h for h in holders if scope.allows(h.cluster, h.namespace)]


async def gaps(
    asker: Asker, start_us: int, end_us: int, cluster: str | None = None
) -> list[GapSpan]:
    """When clusters the asker sees were not watched (audits lack data there)."""
    history = asker.history_reads()
    found = await _read(history.gaps(start_us, end_us, name(cluster, "cluster")))
    return [g for g in found if asker.scope.allows(g.cluster)]
