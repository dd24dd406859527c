"""The GraphQL endpoint: strawberry's ASGI view with the mirror's per-request context.

`MirrorGraphQL(schema, state=..., graphiql=...)` serves `/graphql` over HTTP (GET and POST)
and WebSocket (subscriptions). Every request gets a fresh typed context
(`schema.context.make_context`: the request's access scope, fresh DataLoaders), responses are
encoded with orjson, and each operation's latency is observed by operation name
(`state.metrics.timed_operation`).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any, Protocol

import orjson
from strawberry.asgi import GraphQL

from dra_mirror.schema.context import Context, make_context
from dra_mirror.schema.reader import Scope
from dra_mirror.service.settings import Settings
from dra_mirror.service.stores.protocols import StateReader


class ViewState(Protocol):
    """What the view reads of the app's shared state."""

    settings: Settings
    store: StateReader
    history: Any
    scope_for: Callable[[Any], Scope]
    now: Callable[[], datetime]
    metrics: Any


class MirrorGraphQL(GraphQL):
    """strawberry's ASGI view with our per-request context and orjson encoding."""

    def __init__(self, schema: Any, *, state: ViewState, graphiql: bool) -> None:
        super().__init__(schema, graphql_ide="graphiql" if graphiql else None)
        self.state = state

    async def get_context(self, request: Any, response: Any) -> Context:
        return make_context(
            self.state.store,
            scope=self.state.scope_for(request),
            settings=self.state.settings.graphql,
            history=self.state.history,
            now=self.state.now,
            request=request,
            response=response,
        )

    def encode_json(self, data: object) -> bytes:
        return orjson.dumps(data)

    async def execute_single(self, *args: Any, **kwargs: Any) -> Any:
        # One GraphQL operation (a batch runs several): its latency by operation name.
        execution = super().execute_single(*args, **kwargs)
        return await self.state.metrics.timed_operation(kwargs.get("request_data"), execution)
