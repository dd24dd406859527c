"""`/graphql` queries POSTed as JSON, routed to the GraphQL view ahead of Starlette's router.

`GraphQLQueries(app, view=…)` is the innermost middleware of the app (after the request guard
and the access gate): an HTTP `POST /graphql` with a JSON body that the view's short path
takes (`MirrorGraphQL.takes_short_path`) goes straight to the view, without Starlette's
exception middleware, router and route — the same view the route would call, with the same
scope, for the request every dashboard and bot sends. Everything else (GET, WebSocket,
multipart, GraphiQL, other paths, an app mounted under a root path) goes down the usual
stack. The view's short path raises no HTTP exception of Starlette's for the exception
middleware to answer: what it does not answer itself it hands to strawberry's view, whose
errors for JSON bodies are answered by strawberry.
"""

from __future__ import annotations

from typing import Any

from starlette.types import ASGIApp, Receive, Scope, Send

GRAPHQL_PATH = "/graphql"


class GraphQLQueries:
    def __init__(self, app: ASGIApp, *, view: Any) -> None:
        self.app = app
        self.view = view  # service.http.graphql.MirrorGraphQL

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] == "http"
            and scope["path"] == GRAPHQL_PATH
            and not scope.get("root_path")
            and self.view.takes_short_path(scope)
        ):
            scope["endpoint"] = self.view  # what the route would have set
            scope.setdefault("path_params", {})
            await self.view(scope, receive, send)
            return
        await self.app(scope, receive, send)
