"""`/mcp`: the MCP tools over streamable HTTP, on the mirror's own app.

`McpEndpoint(asker_for)` serves the tools (`server.build_server`) with a stateless
streamable-HTTP session manager answering JSON (one POST, one reply: nothing kept between
requests, so any API replica answers any call). The app mounts `endpoint.asgi` at `/mcp` and
enters `endpoint.running()` in its lifespan (a new session manager each time the lifespan runs).
The SDK is imported and the server built by the first `/mcp` request, not before: a mirror no
agent asks never loads it (~30 MiB and ~0.5 s of CPU at every start); that first request
waits for it (~0.5 s once), loaded in a worker thread so the event loop is not held meanwhile.

Each tool call asks the questions in this process (`LocalQuestions`, from the store) with
`asker_for(request)` — the asker `/graphql` builds for the request — so the request's bearer
token has already passed the app's access gate (401/403/429 before any MCP message is read)
and the call sees exactly what that subject's scope lets `/graphql` see. DNS-rebinding checks
of the SDK are off: the gate's bearer tokens are what protect `/mcp`, as they protect
`/graphql`. `GET /mcp` (a stream of server-initiated messages, which a stateless server has
none of) is answered 405 at once.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any

from dra_mirror.service.questions.asker import Asker
from dra_mirror.service.questions.asking import QuestionError
from dra_mirror.service.questions.local import LocalQuestions

if TYPE_CHECKING:  # the SDK (pydantic, its HTTP client, ~30 MiB) loads with the first call
    from mcp.server.mcpserver import Context, MCPServer
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager


class McpEndpoint:
    def __init__(self, asker_for: Callable[[Any], Awaitable[Asker]]) -> None:
        self.asker_for = asker_for
        self.server: MCPServer | None = None
        self.manager: StreamableHTTPSessionManager | None = None
        self._started: asyncio.Future[StreamableHTTPSessionManager] | None = None
        self._wanted = asyncio.Event()
        self.asgi = _CurrentManager(self)

    def _new_manager(self) -> StreamableHTTPSessionManager:
        from mcp.server.transport_security import TransportSecuritySettings

        from .server import build_server

        if self.server is None:
            self.server = build_server(self._questions_for)
        # Builds a session manager (the SDK's Starlette app around it is not used).
        self.server.streamable_http_app(
            stateless_http=True,
            json_response=True,
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        )
        return self.server.session_manager

    async def _questions_for(self, ctx: Context) -> LocalQuestions:
        request = ctx.request_context.request
        if request is None:
            raise QuestionError("no HTTP request behind this call")
        return LocalQuestions(await self.asker_for(request))

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        # A session manager runs once: each lifespan of the app gets its own, built and run
        # by a task of the lifespan's (its task group must end in the task that began it) once
        # the first /mcp request of this lifespan wants it.
        wanted, stop = asyncio.Event(), asyncio.Event()
        started: asyncio.Future[StreamableHTTPSessionManager] = (
            asyncio.get_running_loop().create_future()
        )

        async def run() -> None:
            await wanted.wait()
            try:
                # imported in a worker thread: the loop goes on serving /graphql and the
                # watches while the SDK loads (the GIL is handed back every few ms)
                await asyncio.to_thread(_load_sdk)
                manager = self._new_manager()
                async with manager.run():
                    self.manager = manager
                    started.set_result(manager)
                    await stop.wait()
            except BaseException as error:
                if not started.done():
                    started.set_exception(error)
                raise

        task = asyncio.create_task(run(), name="mcp-session-manager")
        self._wanted, self._started = wanted, started
        try:
            yield
        finally:
            self._started = None
            stop.set()
            if not wanted.is_set():
                task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            if not started.done():
                started.cancel()
            elif not started.cancelled():
                started.exception()  # retrieved: a failed start was the requests' to report

    async def current(self) -> StreamableHTTPSessionManager:
        """The session manager of the running lifespan, started on the first call."""
        if self._started is None:
            raise RuntimeError("/mcp answers only while the app's lifespan runs")
        self._wanted.set()
        return await asyncio.shield(self._started)


def _load_sdk() -> None:
    import importlib

    importlib.import_module("mcp.server.transport_security")
    importlib.import_module("dra_mirror.service.mcp.server")


class _CurrentManager:
    """The ASGI app of `/mcp`: whichever session manager the endpoint runs now (an ASGI
    object, not a function, so Starlette's route passes it the raw scope)."""

    def __init__(self, endpoint: McpEndpoint) -> None:
        self.endpoint = endpoint

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope.get("method") == "GET":
            # Streamable HTTP's GET opens a stream of server-initiated messages; a stateless
            # server has none to send, and the transport says to answer 405 then (the SDK
            # would hold the request open with nothing to say until its timeout).
            await _not_allowed(send)
            return
        manager = await self.endpoint.current()
        await manager.asgi_app(scope, receive, send)


_NO_STREAM = (
    b'{"jsonrpc": "2.0", "id": null, "error": {"code": -32000, "message": '
    b'"this server sends no stream of its own: POST each request to /mcp"}}'
)


async def _not_allowed(send: Any) -> None:
    headers = [(b"content-type", b"application/json"), (b"allow", b"POST, DELETE"),
               (b"content-length", str(len(_NO_STREAM)).encode())]  # fmt: skip
    await send({"type": "http.response.start", "status": 405, "headers": headers})
    await send({"type": "http.response.body", "body": _NO_STREAM})
