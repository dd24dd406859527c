"""The Starlette app: `/graphql` (GraphiQL in a browser), `/healthz`, `/readyz`, `/metrics`.

`create_app(settings, *, store, ...)` is the factory; it builds routes around what it is
handed and owns its lifetime — it builds no store, history or watcher itself (that is the
composition root's: `service.runtime`). Its lifespan, in this order:

1. `resources` (async context managers, e.g. the demo's simulator) are entered;
2. the history reader — `history` (an opened `service.history.runtime.History`) or
   `open_history()` (an async factory, run here) — serves `info.context.history` and the CSV
   exports;
3. the watchers — `reactors` (started: a `Watchers` group) or `start_reactors()` (an async
   factory, run here, after the resources) — say when the mirror is ready;
4. on shutdown: the watchers stop (flushing what they received), the history and the state
   store close, and the resources exit in reverse order.

Readiness (`/readyz`) follows `service.http.readiness`, for the app's `role`: `API` (`serve`,
embedded, all-in-one or `--no-watch`) answers for the state it serves — the statuses the
state store holds, every cluster its watchers are configured for (else
`clusters.contexts`) expected among them; `WATCHER` (`watch`) answers for the clusters whose
leases it holds now (their reactors' statuses). Both need the state store to answer within
`readiness.STORE_TIMEOUT`. 200 or 503, with the JSON body `{ready, reasons, stale, clusters}`
(and `access` when authentication is off). `/healthz` only says the process serves HTTP.

GraphQL is a `Route` (a `Mount` answers `POST /graphql` with a 307); responses are encoded with
orjson; every request gets a fresh typed context (`schema.context.make_context`; `scope_for`
gives each request its access scope, `now` is the clock of time-derived fields such as
`pendingSeconds`). The view is `service.http.graphql`'s (its short path for queries, persisted
queries against one registry shared with the guards' registered-only rule; the documents
registered ahead of time are `service.http.registered`'s, read and checked when the app is
built: `RegisteredDocumentsError`). The history
audits are also served as CSV: `/export/contention.csv`, `/export/idle-holders.csv`. Slack
slash commands are `POST /slack/commands` (`service.slack`; off unless `slack` is given). The
Devices screens (`/ui/`) and GraphiQL's page are `service.web`'s (files of the package).
`/mcp` serves the questions as Model Context Protocol tools (`service.mcp`, streamable HTTP,
behind the same access gate and per-request context as `/graphql`). `/metrics` is Prometheus text (`service.http.metrics`; the DRA series unless
`dra_metrics=False`).

Access: before anything else the lifespan opens the access control (`access`, or
`open_access()`; without either, everything is served to everyone and the log and /readyz
say so). Every request passes the `RequestGuard` (body size, time, client gone) and the
`AccessGate` (who asks, and so what they may see: `scope_for`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import orjson
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route, WebSocketRoute

from dra_mirror.service.access.control import AccessControl
from dra_mirror.service.http.access import AccessGate
from dra_mirror.service.http.access import scope_for as subject_scope
from dra_mirror.service.http.graphql_parts import DeferredView, GraphQLParts
from dra_mirror.service.http.graphql_route import GraphQLQueries
from dra_mirror.service.http.guard import RequestGuard
from dra_mirror.service.http.metrics import Metrics
from dra_mirror.service.http.readiness import (
    API,
    STORE_TIMEOUT,
    WATCHER,
    Readiness,
    StoreHealth,
    readiness,
)
from dra_mirror.service.http.watchers import Watchers
from dra_mirror.service.model.kinds import DRA_VERSIONS
from dra_mirror.service.settings import Settings
from dra_mirror.service.slack import SlackSettings
from dra_mirror.service.stores.protocols import ClosableReader, ClusterStatus, StoreUnavailable
from dra_mirror.service.web.routes import web_routes

if TYPE_CHECKING:  # SQLAlchemy and Alembic load only when a history database is configured
    from dra_mirror.schema.reader import ReadScope
    from dra_mirror.service.history.runtime import History

log = logging.getLogger(__name__)

ScopeFor = Callable[[Any], "ReadScope"]


def utc_now() -> datetime:
    """The clock of time-derived fields (`schema.context`'s, without importing the schema)."""
    return datetime.now(UTC)


async def _contention_csv(request: Request) -> Response:
    from dra_mirror.service.http import exports  # the schema's reader: loaded by then

    return await exports.contention_csv(request)


async def _idle_holders_csv(request: Request) -> Response:
    from dra_mirror.service.http import exports

    return await exports.idle_holders_csv(request)


class AppState:
    """What the routes share; lives as long as the app."""

    def __init__(
        self,
        settings: Settings,
        store: ClosableReader,
        history: History | None,
        scope_for: ScopeFor,
        now: Callable[[], datetime],
        *,
        dra_metrics: bool,
        role: str = API,
    ) -> None:
        self.now = now
        self.role = role
        self.settings = settings
        self.store = store
        self.history = history
        self.scope_for = scope_for
        self.reactors: Watchers | None = None
        self.access: AccessControl | None = None  # opened first by the lifespan
        self.metrics = Metrics(self, dra=dra_metrics)
        self.startup_error: BaseException | None = None  # why the lifespan failed to start
        self._started = False

    def note_startup_error(self, _type: Any, error: BaseException | None, _tb: Any) -> bool:
        if error is not None and not self._started:
            self.startup_error = error
        return False  # never swallow it

    async def notes(self) -> list[str]:
        """What a ready mirror should still say: each cluster that serves no DRA version the
        mirror reads (its pods and nodes are mirrored, nothing of DRA is)."""
        try:
            async with asyncio.timeout(STORE_TIMEOUT):
                statuses = await self.store.clusters()
        except (StoreUnavailable, TimeoutError):
            return []
        return [
            f"{s.name}: DRA is not served (resource.k8s.io versions served: "
            f"{', '.join(s.dra_versions) or 'none'}; the mirror reads {', '.join(DRA_VERSIONS)}): "
            "pods and nodes are mirrored"
            for s in statuses
            if s.dra_served is False
        ]

    async def readiness(self) -> Readiness:
        """Whether this process is ready for traffic, and why not (service.http.readiness)."""
        shared: list[ClusterStatus] = []
        try:
            async with asyncio.timeout(STORE_TIMEOUT):
                shared = await self.store.clusters()
            health = StoreHealth(True)
        except StoreUnavailable as error:
            health = StoreHealth(False, str(error))
        except TimeoutError:
            health = StoreHealth(False, f"no answer within {STORE_TIMEOUT:g} s")
        rule = self.settings.readiness.cluster_down
        watchers = self.reactors
        if self.role == WATCHER and watchers is not None:
            held = [reactor.status for reactor in list(watchers.by_name.values())]
            return readiness(store=health, statuses=held, cluster_down=rule)
        expected = watchers.clusters if watchers is not None else self.settings.clusters.contexts
        return readiness(
            store=health,
            statuses=shared,
            cluster_down=rule,
            expected=list(expected) or None,
            need_a_cluster=True,
        )


async def _closing(close: Callable[[], Awaitable[None]], what: str) -> None:
    try:
        await close()
    except Exception:
        log.exception("closing the %s failed", what)


def create_app(
    settings: Settings,
    *,
    store: ClosableReader,
    history: History | None = None,
    open_history: Callable[[], Awaitable[History]] | None = None,
    reactors: Watchers | None = None,
    start_reactors: Callable[[], Awaitable[Watchers]] | None = None,
    resources: Sequence[AbstractAsyncContextManager[Any]] = (),
    scope_for: ScopeFor | None = None,
    now: Callable[[], datetime] = utc_now,
    slack: SlackSettings | None = None,
    dra_metrics: bool = True,
    access: AccessControl | None = None,
    open_access: Callable[[], Awaitable[AccessControl]] | None = None,
    role: str = API,
    graphql_in_lifespan: bool = False,
) -> Starlette:
    """The ASGI app; see the module docstring for what its lifespan owns. `graphql_in_lifespan`:
    the schema and the view are built in the lifespan, once the watchers started
    (`service.http.graphql_parts`)."""
    if role not in (API, WATCHER):
        raise ValueError(f"role must be {API!r} or {WATCHER!r}, not {role!r}")
    state = AppState(
        settings, store, history, scope_for or subject_scope, now, dra_metrics=dra_metrics,
        role=role,
    )  # fmt: skip
    parts = GraphQLParts(settings, state, slack=slack, access=lambda: state.access)
    view: Any = DeferredView(parts)
    slack_commands: Any = parts.slack_commands
    if not graphql_in_lifespan:  # built now: the routes hold the view itself
        parts.build()
        view = parts.view
        assert parts.slack is not None
        slack_commands = parts.slack.handle
    mcp = parts.mcp

    async def healthz(_request: Request) -> Response:
        return PlainTextResponse("ok\n")

    async def readyz(_request: Request) -> Response:
        answer = await state.readiness()
        body = answer.body()
        control = state.access
        if control is not None and control.insecure:
            body["access"] = control.describe()
        notes = await state.notes()
        if notes:  # said even when ready: a cluster without DRA is mirrored, partly
            body["notes"] = notes
        return Response(
            orjson.dumps(body), status_code=answer.status_code, media_type="application/json"
        )

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        async with contextlib.AsyncExitStack() as stack:
            stack.push(state.note_startup_error)
            if open_access is not None:
                control = await open_access()
            else:
                control = access if access is not None else AccessControl.open_access()
            state.access = control
            stack.push_async_callback(control.close)
            log.log(logging.WARNING if control.insecure else logging.INFO, "%s", control.describe())
            for resource in resources:
                await stack.enter_async_context(resource)
            await stack.enter_async_context(mcp.running())
            stack.push_async_callback(_closing, store.close, "state store")
            if open_history is not None:
                state.history = await open_history()
            if state.history is not None:
                stack.push_async_callback(_closing, state.history.close, "history store")
            if start_reactors is not None:
                state.reactors = await start_reactors()
            else:
                state.reactors = reactors
            if state.reactors is not None:
                stack.push_async_callback(state.reactors.stop)
            if parts.view is None:  # in a worker thread: the first LISTs go on meanwhile
                await asyncio.sleep(0)  # the watchers' first requests leave first
                await asyncio.to_thread(parts.build)
            state._started = True
            yield

    app = Starlette(
        routes=[
            Route("/graphql", view, methods=["GET", "POST"]),
            WebSocketRoute("/graphql", view),
            Route("/mcp", mcp.asgi, methods=["GET", "POST", "DELETE"]),
            Route("/healthz", healthz, methods=["GET"]),
            Route("/readyz", readyz, methods=["GET"]),
            Route("/metrics", state.metrics.endpoint, methods=["GET"]),
            # CSV exports of the history audits (they read app.state.mirror: history, scope_for)
            Route("/export/contention.csv", _contention_csv, methods=["GET"]),
            Route("/export/idle-holders.csv", _idle_holders_csv, methods=["GET"]),
            # Slack slash commands, answered by this schema with /graphql's per-request context
            Route("/slack/commands", slack_commands, methods=["POST"]),
            *web_routes(),  # the Devices screens (/ui/) and their static files
        ],
        lifespan=lifespan,
        middleware=[
            Middleware(
                RequestGuard,
                max_body_bytes=settings.graphql.max_body_bytes,
                request_timeout=settings.graphql.request_timeout,
            ),
            Middleware(AccessGate, control=lambda: state.access),
            Middleware(GraphQLQueries, view=view),  # JSON queries: straight to the view
        ],
    )
    app.state.mirror = state
    return app
