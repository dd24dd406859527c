"""JSON queries to /graphql reach the view ahead of the router; everything else takes the
usual way."""

from __future__ import annotations

import asyncio
from typing import Any

from dra_mirror.service.http.graphql_route import GraphQLQueries


class Seen:
    def __init__(self, name: str, calls: list[str], takes: bool = True) -> None:
        self.name, self.calls, self.takes = name, calls, takes

    def takes_short_path(self, scope: dict[str, Any]) -> bool:
        return self.takes and scope.get("method") == "POST"

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        self.calls.append(self.name)


def route(scope: dict[str, Any], *, takes: bool = True) -> list[str]:
    calls: list[str] = []
    middleware = GraphQLQueries(Seen("router", calls), view=Seen("view", calls, takes))
    asyncio.run(middleware({"path_params": {}, **scope}, None, None))
    return calls


def test_only_the_short_paths_posts_to_graphql_skip_the_router() -> None:
    post = {"type": "http", "method": "POST", "path": "/graphql", "root_path": ""}
    assert route(post) == ["view"]
    assert route(post, takes=False) == ["router"]  # multipart, GraphQL-over-HTTP's media type…
    assert route({**post, "method": "GET"}) == ["router"]
    assert route({**post, "path": "/graphql/"}) == ["router"]
    assert route({**post, "root_path": "/mirror"}) == ["router"]  # the router strips it
    assert route({**post, "type": "websocket"}) == ["router"]


def test_a_routed_query_gets_the_scope_the_route_would_give() -> None:
    seen: dict[str, Any] = {}

    class View(Seen):
        async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
            seen.update(scope)

    view = View("view", [])
    asyncio.run(GraphQLQueries(Seen("router", []), view=view)(
        {"type": "http", "method": "POST", "path": "/graphql"}, None, None))  # fmt: skip
    assert seen["endpoint"] is view and seen["path_params"] == {}
