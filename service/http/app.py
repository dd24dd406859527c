"""The Starlette app: `/graphql` (GraphiQL in a browser), `/healthz`, `/readyz`, `/metrics`.

`create_app(settings, *, store, history=None, reactors=None, resources=(), scope_for=None,
now=utc_now)` is the factory (`scope_for(request)` gives each request its access scope;
`now` is the clock of time-derived fields such as `pendingSeconds`).
Its lifespan owns every resource handed to it, in this order:

1. `resources` (async context managers, e.g. the demo's simulator) are entered;
2. `history` — a history reader (`service.history.runtime.History`) or an async factory
   returning one — is opened; it serves `info.context.history` and the CSV exports;
3. `reactors` — a started `Readiness` group (`service.reactor.Reactors`) or an async factory
   returning one — is started (the factory runs inside the lifespan, after the resources);
4. on shutdown: the reactors stop (flushing what they received), the history and state stores
   close, and the resources exit in reverse order.

Readiness: with reactors, ready once every cluster synced once (their `ready`/`not_ready()`);
without (an API replica reading a shared Redis), ready once the store answers and every
cluster status in it says synced. Not ready → 503 with one reason per line. `/healthz` only
says the process serves HTTP.

GraphQL is a `Route` (a `Mount` answers `POST /graphql` with a 307); responses are encoded with
orjson; every request gets a fresh typed context (`schema.context.make_context`). The history
audits are also served as CSV: `/export/contention.csv`, `/export/idle-holders.csv`.
Slack slash commands are `POST /slack/commands` (`service.slack`; off unless `slack` is given).
The Devices screens (`/ui/`) and GraphiQL's page are `service.web`'s (files of the package).
`/metrics` is Prometheus text (`service.metrics`; the DRA series unless `dra_metrics=False`).

`mirror_app(settings, store=...)` is the whole mirror (history when configured, watchers into
the store and the history sink), used by `dra-mirror serve` and `dra-mirror demo`.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import inspect
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route, WebSocketRoute

from dra_mirror.schema import build_schema
from dra_mirror.schema.context import utc_now
from dra_mirror.schema.reader import Scope
from dra_mirror.service.access.control import AccessControl
from dra_mirror.service.http import exports as export
from dra_mirror.service.http.access import AccessGate
from dra_mirror.service.http.access import scope_for as subject_scope
from dra_mirror.service.http.graphql import MirrorGraphQL
from dra_mirror.service.http.guard import RequestGuard
from dra_mirror.service.http.metrics import Metrics
from dra_mirror.service.http.persisted import PersistedQueries
from dra_mirror.service.settings import Settings
from dra_mirror.service.slack import SlackCommands, SlackSettings
from dra_mirror.service.stores.memory import MemoryStore
from dra_mirror.service.stores.protocols import (
    ChangeSink,
    StateReader,
    StateStore,
    StoreUnavailable,
)
from dra_mirror.service.web.routes import web_routes

if TYPE_CHECKING:
    from dra_mirror.service.reactor.reactor import Reactors

log = logging.getLogger(__name__)


class Readiness(Protocol):
    """What the app needs of the watchers: readiness, reasons, and a clean stop."""

    @property
    def ready(self) -> bool: ...

    def not_ready(self) -> list[str]: ...

    async def stop(self) -> None: ...


ReactorsArg = Readiness | Callable[[], Awaitable[Readiness]] | None


class AppState:
    """What the routes share; lives as long as the app."""

    def __init__(
        self,
        settings: Settings,
        store: StateReader,
        history: Any,
        scope_for: Callable[[Any], Scope],
        now: Callable[[], datetime],
    ) -> None:
        self.now = now
        self.settings = settings
        self.store = store
        self.history = history
        self.scope_for = scope_for
        self.reactors: Readiness | None = None
        self.access: AccessControl | None = None  # opened by the lifespan
        self.metrics: Metrics | None = None
        self.startup_error: BaseException | None = None  # why the lifespan failed to start
        self._started = False

    def note_startup_error(self, _type: Any, error: BaseException | None, _tb: Any) -> bool:
        if error is not None and not self._started:
            self.startup_error = error
        return False  # never swallow it

    async def readiness(self) -> list[str]:
        """Reasons the mirror is not ready; empty when it is."""
        if self.reactors is not None:
            return [] if self.reactors.ready else (self.reactors.not_ready() or ["not synced"])
        try:
            statuses = await self.store.clusters()
        except StoreUnavailable as error:
            return [f"state store unavailable: {error}"]
        if not statuses:
            return ["no cluster has reported yet"]
        return [
            f"{s.name}: not synced" + (f"; error: {s.error}" if s.error else "")
            for s in statuses
            if not s.synced
        ]


class WatchedClusters:
    """The reactors of every cluster plus the API connections they use; `stop` ends both."""

    def __init__(self, reactors: Reactors, connections: Sequence[Any]) -> None:
        self.reactors = reactors
        self.connections = connections

    @property
    def ready(self) -> bool:
        return self.reactors.ready

    def not_ready(self) -> list[str]:
        return self.reactors.not_ready()

    async def wait_synced(self) -> None:
        await self.reactors.wait_synced()

    async def stop(self) -> None:
        from dra_mirror.service.clusters.config import close_all

        try:
            await self.reactors.stop()
        finally:
            await close_all(self.connections)


async def watch_clusters(
    kubeconfig: str | None,
    contexts: Sequence[str],
    *,
    store: StateStore,
    sinks: Sequence[ChangeSink] = (),
    lease: Any = None,
) -> WatchedClusters:
    """Connect to every cluster (kubeconfig contexts, or in-cluster) and start watching them
    into `store` (then into each extra sink, e.g. the history outbox), in that order. A store
    shared by replicas (Redis: it has `fence`) is written only under per-cluster leases
    (`service.leased`; `lease` is its `LeaseSettings`)."""
    from dra_mirror.service.clusters.config import close_all, connect
    from dra_mirror.service.reactor.reactor import run_reactors

    connections = await connect(kubeconfig, list(contexts) or None)
    try:
        if callable(getattr(store, "fence", None)):  # a shared store: one watcher per cluster
            from dra_mirror.service.reactor.leased import watch_leased

            reactors = watch_leased(connections, store=store, sinks=sinks, lease_settings=lease)  # type: ignore[assignment, arg-type]
        else:
            reactors = await run_reactors(
                connections, sinks=[store.apply, *sinks], status_sink=store.set_status
            )
    except BaseException:
        await close_all(connections)
        raise
    return WatchedClusters(reactors, connections)


def mirror_app(
    settings: Settings,
    *,
    store: StateStore,
    kubeconfig: Callable[[], str | None] | None = None,
    resources: Sequence[AbstractAsyncContextManager[Any]] = (),
    watch: bool = True,
    slack: SlackSettings | None = None,
    access: Any = None,
) -> Starlette:
    """What `serve`, `watch` and `demo` run: the history database when one is configured
    (migrated and written by the watching process), then watchers feeding the state store
    and the history sink. `watch=False` is an API replica: it reads the shared store and
    history, and neither watches nor migrates. `access` is the checked access configuration
    (`service.access.config.AccessConfig`; None: served open). `kubeconfig()` is asked inside the lifespan
    (the demo's simulator writes it at start)."""
    database = settings.history.database_url

    async def open_history() -> Any:
        from dra_mirror.service.history.runtime import History

        return await History.open(
            database,  # type: ignore[arg-type]
            upgrade=watch,
            outbox=history_outbox(settings),
            options=writer_options(settings),
        )

    app: Starlette

    async def start_watching() -> WatchedClusters:
        history = app.state.mirror.history
        path = kubeconfig() if kubeconfig is not None else settings.clusters.kubeconfig
        metrics = app.state.mirror.metrics
        sinks = [metrics.timed_sink(history.sink)] if history is not None else []
        return await watch_clusters(
            path,
            settings.clusters.contexts,
            store=metrics.timed_store(store),
            sinks=sinks,
            lease=lease_settings(),
        )

    def lease_settings() -> Any:
        from dra_mirror.service.stores.lease import LeaseSettings

        ttl = settings.store.lease_ttl
        return LeaseSettings(ttl=ttl, renew_interval=ttl / 3, retry_interval=ttl / 5)

    async def open_access() -> AccessControl:
        path = kubeconfig() if kubeconfig is not None else settings.clusters.kubeconfig
        return await AccessControl.open(access, kubeconfig=path)

    app = create_app(
        settings,
        store=store,
        access=open_access if access is not None else None,
        history=open_history if database else None,
        reactors=start_watching if watch else None,
        resources=resources,
        slack=slack,
        dra_metrics=watch,  # API replicas leave the DRA series to the watchers (no duplicates)
    )
    return app


def writer_options(settings: Settings) -> Any:
    """The history writer's options from the settings (0 days: that housekeeping is off)."""
    from dra_mirror.service.history.writer import WriterOptions

    history = settings.history
    return WriterOptions(
        retention_days=history.retention_days or None,
        warm_days=history.peak_warm_days or None,
    )


def history_outbox(settings: Settings) -> Any:
    """With a Redis URL, the deployment's Redis stream outbox (watchers append, every process
    with a database URL drains it under one drain lease); else None: in-process."""
    if not settings.store.redis_url:
        return None
    import socket

    from dra_mirror.service.history.redis_outbox import RedisStreamOutbox

    return RedisStreamOutbox.from_url(
        settings.store.redis_url,
        prefix=settings.store.redis_prefix,
        consumer=settings.history.outbox_consumer or socket.gethostname(),
        claim_idle=settings.history.outbox_claim_idle,
        lease_ttl=settings.store.lease_ttl,
    )


def freeze_heap() -> None:
    """Move every object alive now out of the garbage collector's sight (`gc.freeze`).

    After the initial sync the state store holds millions of long-lived objects; without this,
    each full collection walks all of them and blocks the event loop for seconds (seen as
    multi-second p99 request latencies on the 5,000-node scenario). Objects created later are
    collected as usual."""
    gc.freeze()


async def _freeze_when_synced(watchers: Any, store: StateReader) -> None:
    await watchers.wait_synced()
    freeze_heap()
    log.info("every cluster synced once; initial state moved out of the GC's generations")
    if not isinstance(store, MemoryStore):
        # A shared store (Redis) is read by API replicas, which build the diagnostics' ledgers
        # at their first question; a watcher would only read the whole store back for nothing.
        return
    from dra_mirror.service.questions import diagnosis

    try:  # the allocation ledgers, built now rather than by the first explainClaim
        await diagnosis.prepare(store)
    except Exception:
        log.exception("preparing the diagnostics failed; they build on first use")


async def _close(resource: Any, what: str) -> None:
    close = getattr(resource, "close", None)
    if close is None:
        return
    try:
        await close()
    except Exception:
        log.exception("closing the %s failed", what)


def create_app(
    settings: Settings,
    *,
    store: StateReader,
    history: Any | Callable[[], Awaitable[Any]] = None,
    reactors: ReactorsArg = None,
    resources: Sequence[AbstractAsyncContextManager[Any]] = (),
    scope_for: Callable[[Any], Scope] | None = None,
    now: Callable[[], datetime] = utc_now,
    slack: SlackSettings | None = None,
    dra_metrics: bool = True,
    access: AccessControl | Callable[[], Awaitable[AccessControl]] | None = None,
) -> Starlette:
    """The ASGI app; see the module docstring for what its lifespan owns. `access` is the
    access control (or an async factory of it, opened first in the lifespan); None serves
    everything to everyone (tests, `--insecure-no-auth`)."""
    state = AppState(settings, store, history, scope_for or subject_scope, now)
    state.metrics = Metrics(state, dra=dra_metrics)
    # One registry of persisted documents: the view resolves hashes against it, and the
    # guards' registered-only rule (DRA_MIRROR_GRAPHQL_REFUSE_UNREGISTERED) reads it.
    registry = PersistedQueries(
        max_bytes=settings.graphql.persisted_queries_bytes,
        max_document_bytes=settings.graphql.cached_document_max_bytes,
    )
    view = MirrorGraphQL(
        build_schema(settings.graphql, registry=registry),
        state=state,
        graphiql=settings.http.graphiql,
        registry=registry,
    )

    async def healthz(_request: Request) -> Response:
        return PlainTextResponse("ok\n")

    async def readyz(_request: Request) -> Response:
        reasons = await state.readiness()
        open_note = f"{state.access.describe()}\n" if state.access and state.access.insecure else ""
        if reasons:
            return PlainTextResponse("\n".join(reasons) + "\n" + open_note, status_code=503)
        return PlainTextResponse("ready\n" + open_note)

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        async with contextlib.AsyncExitStack() as stack:
            stack.push(state.note_startup_error)
            if access is None:
                state.access = AccessControl.open_access()
            else:
                state.access = await access() if inspect.isroutine(access) else access  # type: ignore[operator, assignment]
            stack.push_async_callback(state.access.close)  # type: ignore[union-attr]
            log.log(
                logging.WARNING if state.access.insecure else logging.INFO,  # type: ignore[union-attr]
                "%s",
                state.access.describe(),  # type: ignore[union-attr]
            )
            for resource in resources:
                await stack.enter_async_context(resource)
            stack.push_async_callback(_close, store, "state store")
            if history is not None:
                state.history = await history() if inspect.isroutine(history) else history
                stack.push_async_callback(_close, state.history, "history store")
            if reactors is not None:
                started = reactors if hasattr(reactors, "not_ready") else await reactors()  # type: ignore[operator]
                state.reactors = started  # type: ignore[assignment]
                stack.push_async_callback(started.stop)  # type: ignore[union-attr]
                if hasattr(started, "wait_synced"):
                    freezer = asyncio.create_task(_freeze_when_synced(started, store))
                    stack.callback(freezer.cancel)
            state._started = True
            yield

    app = Starlette(
        routes=[
            Route("/graphql", view, methods=["GET", "POST"]),
            WebSocketRoute("/graphql", view),
            Route("/healthz", healthz, methods=["GET"]),
            Route("/readyz", readyz, methods=["GET"]),
            Route("/metrics", state.metrics.endpoint, methods=["GET"]),
            # CSV exports of the history audits (they read app.state.mirror: history, scope_for)
            Route("/export/contention.csv", export.contention_csv, methods=["GET"]),
            Route("/export/idle-holders.csv", export.idle_holders_csv, methods=["GET"]),
            # Slack slash commands, answered by this schema with /graphql's per-request context
            Route(
                "/slack/commands",
                SlackCommands(
                    view.schema,
                    lambda r: view.get_context(r, None),
                    slack,
                    access=lambda: state.access,
                ).handle,
                methods=["POST"],
            ),
            *web_routes(),  # the Devices screens (/ui/) and their static files
        ],
        lifespan=lifespan,
        middleware=[
            Middleware(
                RequestGuard,  # type: ignore[arg-type]
                max_body_bytes=settings.graphql.max_body_bytes,
                request_timeout=settings.graphql.request_timeout,
            ),
            Middleware(AccessGate, control=lambda: state.access),  # type: ignore[arg-type]
        ],
    )
    app.state.mirror = state
    return app
