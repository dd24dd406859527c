"""The app's GraphQL side — schema, view, registered documents, Slack commands — built at once
or while the watchers' first LISTs are on their way.

`GraphQLParts(settings, state, slack=..., access=...)` holds what `/graphql`, `/mcp` and
`/slack/commands` answer with. `build()` imports strawberry, graphql-core and the schema
package (~0.25 s of CPU, the largest part of a start after the interpreter's) and builds them:
`create_app` calls it at once, unless it is told to build them in its lifespan
(`graphql_in_lifespan`, what `serve` and `watch` do): then the lifespan starts the watchers
first and builds these in a worker thread, so the API server's answers to the first LISTs (tens
of ms each for a real one) come in meanwhile; the app serves only once they are built (uvicorn
answers nothing before the lifespan has started), so no request ever waits for them.

The routes and the JSON short path reach the view through `DeferredView`, which hands each
call to the built view. A registered document that does not check (`RegisteredDocumentsError`)
stops the start either way: at `create_app`, or in the lifespan.

Promises: `build()` runs once; nothing here touches the event loop, so it may run in a worker
thread (asyncio primitives bind to the loop when first awaited, in it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from dra_mirror.service.mcp.http import McpEndpoint
from dra_mirror.service.questions.asker import Asker
from dra_mirror.service.settings import Settings
from dra_mirror.service.slack import SlackCommands, SlackSettings

if TYPE_CHECKING:  # strawberry and the schema load with `build()`
    from dra_mirror.service.http.graphql import MirrorGraphQL


class GraphQLParts:
    """See the module docstring."""

    def __init__(
        self,
        settings: Settings,
        state: Any,
        *,
        slack: SlackSettings | None,
        access: Callable[[], Any],
    ) -> None:
        self.settings = settings
        self.state = state  # service.http.app.AppState
        self.slack_settings = slack
        self.access = access
        self.view: MirrorGraphQL | None = None
        self.slack: SlackCommands | None = None
        # MCP tools for agents at /mcp: the same asker (and access scope) as /graphql; its
        # session manager runs in the lifespan.
        self.mcp = McpEndpoint(self._asker)

    async def _context(self, request: Any) -> Any:
        assert self.view is not None, "GraphQLParts.build() has not run"
        return await self.view.get_context(request, None)

    async def _asker(self, request: Any) -> Asker:
        """Who asks, as /graphql sees the request: its scope, the app's history and clock."""
        context = await self._context(request)
        return Asker.over(
            context.reader.store, context.scope, history=context.history, now=context.now
        )

    def build(self) -> None:
        """Import strawberry and the schema and build the view (see the module docstring)."""
        from dra_mirror.schema import build_schema
        from dra_mirror.service.http.graphql import MirrorGraphQL
        from dra_mirror.service.http.persisted import PersistedQueries
        from dra_mirror.service.http.registered import registered_documents

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
        registry.registered.update(registered_documents(schema._schema, graphql))
        view = MirrorGraphQL(
            schema, state=self.state, graphiql=self.settings.http.graphiql, registry=registry
        )
        # Slack slash commands, answered by the questions with /graphql's per-request asker
        self.slack = SlackCommands(self._asker, self.slack_settings, access=self.access)
        self.view = view

    async def slack_commands(self, request: Request) -> Response:
        assert self.slack is not None, "GraphQLParts.build() has not run"
        return await self.slack.handle(request)


class DeferredView:
    """`/graphql`'s ASGI endpoint and the short path's view: the view `build()` made."""

    def __init__(self, parts: GraphQLParts) -> None:
        self.parts = parts

    def takes_short_path(self, scope: Scope) -> bool:
        view = self.parts.view
        return view is not None and view.takes_short_path(scope)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        view = self.parts.view
        assert view is not None, "GraphQLParts.build() has not run"
        await view(scope, receive, send)
