"""The API surfaces — the schema, `/graphql`'s view, Slack's commands, `/mcp` — built in one
place, at once or while the watchers' first LISTs are on their way.

`ApiSurfaces(settings, state, slack=...)` holds what `/graphql`, `/mcp` and `/slack/commands`
answer with, and `endpoints()` hands them to the app (`service.http.app.Endpoints`).
`build()` imports strawberry, graphql-core and the schema package (~0.25 s of CPU, the largest
part of a start after the interpreter's) and builds, in this order: the registry of persisted
documents (`service.http.persisted`; the view resolves hashes against it and the guards'
registered-only rule reads it), the schema (`schema.build_schema`) with the documents
registered ahead of time read and checked against it (`service.http.registered`), the view
(`service.http.graphql.MirrorGraphQL`), and Slack's commands. The MCP endpoint
(`service.mcp.http.McpEndpoint`) exists from the start — its session manager runs in the
lifespan. Slack and `/mcp` ask the questions in this process (`service.questions`), never the
schema, with the asker `/graphql` would build for the request (`_asker`: its access scope,
the app's history and clock).

When: at once (`build()` before the app is made), or — `deferred`, what `serve` and `watch`
do — by the lifespan once the watchers started (`build_deferred()`), in a worker thread, so
the API server's answers to the first LISTs (tens of ms each for a real one) come in
meanwhile; the app serves only once they are built (uvicorn answers nothing before the
lifespan has started), so no request ever waits for them. Until then the routes and the JSON
short path reach the view through `DeferredView`, which hands each call to the built view. A
registered document that does not check (`RegisteredDocumentsError`) stops the start either
way.

The command line builds none of them itself either: what it serves or checks without an app
is `service.runtime.standalone`'s.

Promises: `build()` runs once; nothing it does touches the event loop, so it may run in a
worker thread (asyncio primitives bind to the loop when first awaited, in it).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from dra_mirror.service.http.app import Endpoints
from dra_mirror.service.http.state import AppState
from dra_mirror.service.mcp.http import McpEndpoint
from dra_mirror.service.questions.asker import Asker
from dra_mirror.service.settings import Settings
from dra_mirror.service.slack import SlackCommands, SlackSettings

if TYPE_CHECKING:  # strawberry and the schema load with `build()`
    from dra_mirror.service.http.graphql import MirrorGraphQL


class ApiSurfaces:
    """See the module docstring."""

    def __init__(self, settings: Settings, state: AppState, *, slack: SlackSettings | None) -> None:
        self.settings = settings
        self.state = state
        self.slack_settings = slack
        self.view: MirrorGraphQL | None = None
        self.slack: SlackCommands | None = None
        # MCP tools for agents at /mcp: the same asker (and access scope) as /graphql; its
        # session manager runs in the lifespan.
        self.mcp = McpEndpoint(self._asker)

    async def _context(self, request: Any) -> Any:
        assert self.view is not None, "ApiSurfaces.build() has not run"
        return await self.view.get_context(request, None)

    async def _asker(self, request: Any) -> Asker:
        """Who asks, as /graphql sees the request: its scope, the app's history and clock."""
        context = await self._context(request)
        return Asker.over(
            context.reader.store,
            context.scope,
            history=context.history,
            now=context.now,
            utilization=context.utilization,
        )

    def _access(self) -> Any:
        return self.state.access

    def build(self) -> None:
        """Import strawberry and the schema and build the view (see the module docstring)."""
        from dra_mirror.schema import build_schema
        from dra_mirror.service.http.graphql import MirrorGraphQL
        from dra_mirror.service.http.persisted import PersistedQueries
        from dra_mirror.service.http.registered import registered_documents as registered

        if self.view is not None:
            return
        graphql = self.settings.graphql
        # One registry of persisted documents: the view resolves hashes against it, and the
        # guards' registered-only rule (DRA_MIRROR_GRAPHQL_REFUSE_UNREGISTERED) reads it.
        # Documents registered ahead of time are read and checked now (a bad one stops the
        # start); clients may add theirs only while other documents may run.
        registry = PersistedQueries(
            max_bytes=graphql.persisted_queries_bytes,
            max_document_bytes=graphql.cached_document_max_bytes,
            learn=not graphql.refuse_unregistered,
        )
        schema = build_schema(graphql, registry=registry)
        registry.registered.update(registered(schema._schema, graphql))
        view = MirrorGraphQL(
            schema, state=self.state, graphiql=self.settings.http.graphiql, registry=registry
        )
        # Slack slash commands, answered by the questions with /graphql's per-request asker
        self.slack = SlackCommands(self._asker, self.slack_settings, access=self._access)
        self.view = view

    async def build_deferred(self) -> None:
        """The lifespan's step: build what is not built yet, in a worker thread."""
        if self.view is None:  # in a worker thread: the first LISTs go on meanwhile
            await asyncio.sleep(0)  # the watchers' first requests leave first
            await asyncio.to_thread(self.build)

    def endpoints(self) -> Endpoints:
        """What the app routes to: the built surfaces, or — not built yet — handles that
        call them once `build_deferred()` has built them."""
        if self.view is not None:
            assert self.slack is not None
            return Endpoints(graphql=self.view, mcp=self.mcp.asgi, slack=self.slack.handle)
        return Endpoints(graphql=DeferredView(self), mcp=self.mcp.asgi, slack=self.slack_commands)

    async def slack_commands(self, request: Request) -> Response:
        assert self.slack is not None, "ApiSurfaces.build() has not run"
        return await self.slack.handle(request)


class DeferredView:
    """`/graphql`'s ASGI endpoint and the short path's view: the view `build()` made."""

    def __init__(self, surfaces: ApiSurfaces) -> None:
        self.surfaces = surfaces

    def takes_short_path(self, scope: Scope) -> bool:
        view = self.surfaces.view
        return view is not None and view.takes_short_path(scope)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        view = self.surfaces.view
        assert view is not None, "ApiSurfaces.build() has not run"
        await view(scope, receive, send)
