"""The Starlette app: `/graphql` (GraphiQL in a browser), `/healthz`, `/readyz`, `/metrics`.

`create_app(state, endpoints, lifespan)` only routes and adds middleware around what it is
handed, and runs the lifespan it is given. It builds nothing and decides no order: the
composition root (`service.runtime`) builds the state store, history, access, watchers,
alerts, the schema with its view, Slack's commands and the MCP endpoint, and its one lifespan
opens and closes them in order. Given:

* `state` — what the routes share (`service.http.state.AppState`: the settings, the state
  store, what the lifespan opened, the metrics, readiness), stored as `app.state.mirror`;
* `endpoints` — the API surfaces the runtime built (`Endpoints`): `/graphql`'s view (HTTP and
  WebSocket, and the JSON short path), `/mcp`, `/slack/commands`;
* `lifespan` — Starlette's lifespan: the runtime's, which opens the access control before
  anything else. uvicorn answers nothing before it has started.

Routes: `/graphql` is a `Route` (a `Mount` answers `POST /graphql` with a 307) — the view is
`service.http.graphql`'s, and JSON queries reach it straight from the innermost middleware
(`service.http.graphql_route`); `/healthz` only says the process serves HTTP; `/readyz` is 200
or 503 with the JSON body `{ready, reasons, stale, clusters}` (and `access` when
authentication is off, and `notes` when a cluster serves no DRA version:
`AppState.readiness`, `AppState.notes`); `/metrics` is Prometheus text
(`service.http.metrics`); the history audits are CSV: `/export/contention.csv`,
`/export/chargeback.csv`, `/export/idle-holders.csv` (`service.http.exports`); Slack slash commands are
`POST /slack/commands`; `/mcp` serves the questions as Model Context Protocol tools; the
Devices screens (`/ui/`) and GraphiQL's page are `service.web`'s (files of the package).

Middleware, outermost first: the `RequestGuard` (body size, time, client gone), the
`AccessGate` (who asks, and so what they may see: `state.scope_for`), `GraphQLQueries`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

import orjson
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route, WebSocketRoute
from starlette.types import ASGIApp, Receive, Scope, Send

from dra_mirror.service.http.access import AccessGate
from dra_mirror.service.http.graphql_route import GraphQLQueries
from dra_mirror.service.http.guard import RequestGuard
from dra_mirror.service.http.state import AppState
from dra_mirror.service.web.routes import web_routes

Lifespan = Callable[[Starlette], contextlib.AbstractAsyncContextManager[None]]


class GraphQLEndpoint(Protocol):
    """`/graphql`'s ASGI endpoint, and whether its short path takes a request
    (`service.http.graphql.MirrorGraphQL`, or the runtime's view built in the lifespan)."""

    def takes_short_path(self, scope: Scope) -> bool: ...

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None: ...


@dataclass(frozen=True)
class Endpoints:
    """The API surfaces the app routes to; the composition root builds them."""

    graphql: GraphQLEndpoint
    mcp: ASGIApp
    slack: Callable[[Request], Awaitable[Response]]


async def _contention_csv(request: Request) -> Response:
    from dra_mirror.service.http import exports  # the schema's reader: loaded by then

    return await exports.contention_csv(request)


async def _chargeback_csv(request: Request) -> Response:
    from dra_mirror.service.http import exports

    return await exports.chargeback_csv(request)


async def _idle_holders_csv(request: Request) -> Response:
    from dra_mirror.service.http import exports

    return await exports.idle_holders_csv(request)


async def _healthz(_request: Request) -> Response:
    return PlainTextResponse("ok\n")


async def _readyz(request: Request) -> Response:
    state: AppState = request.app.state.mirror
    answer = await state.readiness()
    body: dict[str, Any] = answer.body()
    control = state.access
    if control is not None and control.insecure:
        body["access"] = control.describe()
    notes = await state.notes()
    if notes:  # said even when ready: a cluster without DRA is mirrored, partly
        body["notes"] = notes
    return Response(
        orjson.dumps(body), status_code=answer.status_code, media_type="application/json"
    )


def create_app(state: AppState, endpoints: Endpoints, lifespan: Lifespan) -> Starlette:
    """The ASGI app: routes and middleware around `state` and `endpoints`, run by `lifespan`
    (see the module docstring)."""
    graphql = state.settings.graphql
    app = Starlette(
        routes=[
            Route("/graphql", endpoints.graphql, methods=["GET", "POST"]),
            WebSocketRoute("/graphql", endpoints.graphql),
            Route("/mcp", endpoints.mcp, methods=["GET", "POST", "DELETE"]),
            Route("/healthz", _healthz, methods=["GET"]),
            Route("/readyz", _readyz, methods=["GET"]),
            Route("/metrics", state.metrics.endpoint, methods=["GET"]),
            # CSV exports of the history audits (they read app.state.mirror: history, scope_for)
            Route("/export/contention.csv", _contention_csv, methods=["GET"]),
            Route("/export/chargeback.csv", _chargeback_csv, methods=["GET"]),
            Route("/export/idle-holders.csv", _idle_holders_csv, methods=["GET"]),
            # Slack slash commands, answered with /graphql's per-request context
            Route("/slack/commands", endpoints.slack, methods=["POST"]),
            *web_routes(),  # the Devices screens (/ui/) and their static files
        ],
        lifespan=lifespan,
        middleware=[
            Middleware(
                RequestGuard,
                max_body_bytes=graphql.max_body_bytes,
                request_timeout=graphql.request_timeout,
                body_timeout=state.settings.http.body_timeout,
            ),
            Middleware(
                AccessGate, control=lambda: state.access, hosts=state.settings.http.allowed_hosts
            ),
            Middleware(
                GraphQLQueries, view=endpoints.graphql
            ),  # JSON queries: straight to the view
        ],
    )
    app.state.mirror = state
    return app
