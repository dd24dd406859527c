"""`/mcp`: the MCP tools over streamable HTTP, on the mirror's own app.

`McpEndpoint(context_for, schema)` builds the server (`server.build_server`) with a stateless
streamable-HTTP session manager answering JSON (one POST, one reply: nothing kept between
requests, so any API replica answers any call). The app mounts `endpoint.asgi` at `/mcp` and
enters `endpoint.running()` in its lifespan (a new session manager each time the lifespan runs).

Each tool call asks the app's schema in-process with `context_for(request)` — the same
per-request context `/graphql` builds — so the request's bearer token has already passed the
app's access gate (401/403/429 before any MCP message is read) and the call sees exactly what
that subject's scope lets `/graphql` see. DNS-rebinding checks of the SDK are off: the gate's
bearer tokens are what protect `/mcp`, as they protect `/graphql`.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from mcp.server.mcpserver import Context
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings

from dra_mirror.service.questions.asking import Ask, ExecutableSchema, QuestionError, in_process

from .server import build_server


class McpEndpoint:
    def __init__(
        self, context_for: Callable[[Any], Awaitable[Any]], schema: ExecutableSchema
    ) -> None:
        self.context_for = context_for
        self.schema = schema
        self.server = build_server(self._ask_for)
        self.manager = self._new_manager()
        self.asgi = _CurrentManager(self)

    def _new_manager(self) -> StreamableHTTPSessionManager:
        # Builds a session manager (the SDK's Starlette app around it is not used).
        self.server.streamable_http_app(
            stateless_http=True,
            json_response=True,
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        )
        return self.server.session_manager

    async def _ask_for(self, ctx: Context) -> Ask:
        request = ctx.request_context.request
        if request is None:
            raise QuestionError("no HTTP request behind this call")
        return in_process(self.schema, await self.context_for(request))

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        # A session manager runs once: each lifespan of the app gets its own.
        self.manager = self._new_manager()
        async with self.manager.run():
            yield


class _CurrentManager:
    """The ASGI app of `/mcp`: whichever session manager the endpoint runs now (an ASGI
    object, not a function, so Starlette's route passes it the raw scope)."""

    def __init__(self, endpoint: McpEndpoint) -> None:
        self.endpoint = endpoint

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await self.endpoint.manager.asgi_app(scope, receive, send)
