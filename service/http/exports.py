"""CSV exports of the audits, for spreadsheets: ASGI endpoints the app mounts.

    GET /export/contention.csv?from=…&to=…[&groupBy=CLASS|NAMESPACE|NODE|CLUSTER][&bucket=1d][&cluster=…]
    GET /export/chargeback.csv?from=…&to=…[&groupBy=NAMESPACE|TEAM][&cluster=…]
    GET /export/idle-holders.csv?from=…&to=…[&cluster=…][&first=100]

Same figures as the GraphQL `contention`, `chargeback` and `idleHolders` fields (one row each), filtered
through the request's access scope. The endpoints read the app's shared state
(`request.app.state.mirror`: `.history`, a `HistoryQueries`, and `.scope_for(request)`).
Answers: 200 text/csv with a header row; 400 for bad parameters; 404 when no history database
is configured; 503 when it cannot be reached.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response

from dra_mirror.service.history.times import BadTime, bucket_us, to_rfc3339, to_us
from dra_mirror.service.questions.scoped import ReadScope

if TYPE_CHECKING:  # SQLAlchemy loads only when a history database is configured
    from dra_mirror.service.history.queries import HistoryQueries

CONTENTION_COLUMNS = (
    "cluster", "group", "from", "to", "device_hours_available", "device_hours_allocated",
    "device_hours_idle", "utilization_percent", "claims_waited", "wait_p50_seconds",
    "wait_p95_seconds", "wait_max_seconds", "peak_pending", "claims_abandoned",
    "gpu_equivalent_hours_available", "gpu_equivalent_hours_allocated",
    "gpu_equivalent_hours_idle", "gpu_utilization_percent",
)  # fmt: skip
CHARGEBACK_COLUMNS = ("cluster", "group", "team", "from", "to", "gpu_equivalent_hours_held",
                      "gpu_equivalent_hours_in_use", "cost_held", "cost_in_use", "currency")  # fmt: skip
IDLE_COLUMNS = ("cluster", "namespace", "claim", "claim_uid", "device_hours_idle",
                "device_hours_held", "devices")  # fmt: skip


class _BadRequest(Exception):
    pass


def _csv(columns: Sequence[str], rows: Iterable[Sequence[Any]], filename: str) -> Response:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow("" if value is None else value for value in row)
    return Response(
        out.getvalue(),
        media_type="text/csv; charset=utf-8",
        headers={"Content-Disposition": f'attachment; filename="{filename}"'},
    )


def _window(request: Request) -> tuple[int, int]:
    params = request.query_params
    if "from" not in params or "to" not in params:
        raise _BadRequest("`from` and `to` (RFC 3339) are required")
    try:
        start, end = to_us(params["from"]), to_us(params["to"])
    except BadTime as error:
        raise _BadRequest(str(error)) from error
    if end <= start:
        raise _BadRequest("`to` must be after `from`")
    return start, end


def _cluster(request: Request) -> str | None:
    cluster = request.query_params.get("cluster")
    if cluster is not None and "\x00" in cluster:  # PostgreSQL text cannot hold NUL
        raise _BadRequest("`cluster` must not contain NUL")
    return cluster


class ExportState(Protocol):
    """What the exports read of the app's shared state (`service.http.state.AppState`)."""

    history: Any  # a `HistoryQueries`, or None without a history database
    scope_for: Callable[[Any], ReadScope]


def _state(request: Request) -> tuple[Any, ReadScope]:
    state: ExportState = request.app.state.mirror
    return state.history, state.scope_for(request)


def _allows(scope: ReadScope, cluster: str, namespace: str = "") -> bool:
    return scope.allows(cluster, namespace)


def _sees_aggregate(scope: ReadScope, cluster: str) -> bool:
    """Rows aggregated over every namespace of `cluster` need a scope seeing all of them."""
    return scope.all_namespaces(cluster)


async def _answer(
    request: Request, build: Callable[[HistoryQueries, ReadScope], Awaitable[Response]]
) -> Response:
    # The history modules (and SQLAlchemy) load only when a history database is configured.
    from dra_mirror.service.history.db import HistoryUnavailable

    history, scope = _state(request)
    if history is None:
        return PlainTextResponse("history is not configured\n", status_code=404)
    if not scope.history:
        return PlainTextResponse("history is not in your access scope\n", status_code=403)
    try:
        return await build(history, scope)
    except _BadRequest as error:
        return PlainTextResponse(f"{error}\n", status_code=400)
    except HistoryUnavailable as error:
        return PlainTextResponse(f"{error}\n", status_code=503)


async def contention_csv(request: Request) -> Response:
    async def build(history: HistoryQueries, scope: ReadScope) -> Response:
        from dra_mirror.service.history.contention import GROUPS, BadAuditRequest

        start, end = _window(request)
        params = request.query_params
        group_by = params.get("groupBy", "CLASS").upper()
        if group_by not in GROUPS:
            raise _BadRequest(f"groupBy must be one of {', '.join(GROUPS)}")
        try:
            size = bucket_us(params.get("bucket"))
            rows = await history.contention(start, end, group_by=group_by, bucket_us=size,
                                            cluster=_cluster(request))  # fmt: skip
        except (BadTime, BadAuditRequest) as error:
            raise _BadRequest(str(error)) from error
        namespaced = group_by == "NAMESPACE"
        return _csv(
            CONTENTION_COLUMNS,
            (
                (r.cluster, r.group, to_rfc3339(r.bucket_start_us), to_rfc3339(r.bucket_end_us),
                 r.device_hours_available, r.device_hours_allocated, r.device_hours_idle,
                 r.utilization, r.claims_waited, r.wait_p50, r.wait_p95, r.wait_max,
                 r.peak_pending, r.claims_abandoned, r.gpu_hours_available,
                 r.gpu_hours_allocated, r.gpu_hours_idle, r.gpu_utilization)
                for r in rows
                if (_allows(scope, r.cluster, r.group) if namespaced
                    else _sees_aggregate(scope, r.cluster))
            ),
            "contention.csv",
        )  # fmt: skip

    return await _answer(request, build)


async def chargeback_csv(request: Request) -> Response:
    async def build(history: HistoryQueries, scope: ReadScope) -> Response:
        from dra_mirror.service.history.chargeback import GROUPS, seen_by

        start, end = _window(request)
        group_by = request.query_params.get("groupBy", "NAMESPACE").upper()
        if group_by not in GROUPS:
            raise _BadRequest(f"groupBy must be one of {', '.join(GROUPS)}")
        rows = seen_by(await history.chargeback(start, end, cluster=_cluster(request)),
                       group_by, scope.allows)  # fmt: skip
        since, until = to_rfc3339(start), to_rfc3339(end)
        return _csv(
            CHARGEBACK_COLUMNS,
            ((r.cluster, r.group, r.team, since, until, r.gpu_hours_held, r.gpu_hours_in_use,
              r.cost_held, r.cost_in_use, r.currency) for r in rows),
            "chargeback.csv",
        )  # fmt: skip

    return await _answer(request, build)


async def idle_holders_csv(request: Request) -> Response:
    async def build(history: HistoryQueries, scope: ReadScope) -> Response:
        start, end = _window(request)
        try:
            first = max(0, min(int(request.query_params.get("first", "100")), 10_000))
        except ValueError as error:
            raise _BadRequest("`first` must be a number") from error
        holders = await history.idle_holders(start, end, cluster=_cluster(request),
                                             limit=first, scope=scope)  # fmt: skip
        return _csv(
            IDLE_COLUMNS,
            (
                (h.cluster, h.namespace, h.claim, h.claim_uid, h.device_hours_idle,
                 h.device_hours_held, h.devices)
                for h in holders if _allows(scope, h.cluster, h.namespace)
            ),
            "idle-holders.csv",
        )  # fmt: skip

    return await _answer(request, build)
