"""Bounds on each HTTP request: body size, total time, and work stopped when the client leaves.

`RequestGuard` is an ASGI middleware (outermost, before authentication). For every HTTP
request it:

* refuses a body over `max_body_bytes` with 413 — by `Content-Length` before reading, or as
  soon as the streamed body passes the limit — so a 50 MB body is never buffered;
* reads the body, then hands it to the app and keeps listening: when the client disconnects,
  the request's executions are aborted (`schema.guard.budget.RequestAborts`, registered in the
  ASGI state) and the app's task is cancelled, so no work goes on for nobody;
* gives the whole request `request_timeout` seconds; past them the executions are aborted,
  the task cancelled and, if nothing was sent yet, the answer is 504 with a JSON error.

Once the whole response is sent, neither a disconnect nor the timeout cancels the app: work
it does after answering (Starlette background tasks, e.g. a Slack follow-up) runs to its end.

WebSocket and lifespan traffic pass untouched.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import orjson
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from dra_mirror.schema.guard.budget import ABORTS_KEY, ClientGone, RequestAborts

log = logging.getLogger(__name__)


def _json_error(status: int, message: str, code: str) -> tuple[int, bytes]:
    return status, orjson.dumps({"errors": [{"message": message, "extensions": {"code": code}}]})


class RequestGuard:
    def __init__(self, app: ASGIApp, *, max_body_bytes: int, request_timeout: float) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.request_timeout = request_timeout

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False
        answered = asyncio.Event()  # the whole response is sent: background work may go on

        async def guarded_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            elif message["type"] == "http.response.body" and not message.get("more_body"):
                answered.set()
            await send(message)

        length = _content_length(scope)
        if length is not None and length > self.max_body_bytes:
            await _answer(guarded_send, *_too_large(self.max_body_bytes))
            return
        body = await _read_body(receive, self.max_body_bytes)
        if body is None:
            await _answer(guarded_send, *_too_large(self.max_body_bytes))
            return
        if body is _GONE:
            return
        aborts = RequestAborts()
        scope.setdefault("state", {})[ABORTS_KEY] = aborts
        replayed = False
        disconnected = asyncio.Event()

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            await disconnected.wait()
            return {"type": "http.disconnect"}

        app = asyncio.ensure_future(self.app(scope, replay, guarded_send))
        watcher = asyncio.ensure_future(_wait_disconnect(receive))
        try:
            done, _ = await asyncio.wait({app, watcher}, timeout=self.request_timeout,
                                         return_when=asyncio.FIRST_COMPLETED)  # fmt: skip
            if app in done or answered.is_set():
                await app  # answered: what runs after the response (background tasks) may end
                return
            if watcher in done:
                disconnected.set()
                aborts.abort(ClientGone())
                log.info("%s %s: the client disconnected; its work is stopped",
                         scope.get("method"), scope["path"])  # fmt: skip
            else:
                aborts.abort(ClientGone(f"over the request timeout ({self.request_timeout:g} s)"))
                log.info("%s %s: over the request timeout (%g s); its work is stopped",
                         scope.get("method"), scope["path"], self.request_timeout)  # fmt: skip
            app.cancel()
            await asyncio.gather(app, return_exceptions=True)
            if watcher not in done and not started:
                await _answer(send, *_json_error(
                    504, f"the request took longer than {self.request_timeout:g} s",
                    "REQUEST_TIMEOUT"))  # fmt: skip
        finally:
            watcher.cancel()
            if not app.done():
                app.cancel()


_GONE: Any = object()


def _content_length(scope: Scope) -> int | None:
    for key, value in scope.get("headers") or ():
        if key == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


def _too_large(limit: int) -> tuple[int, bytes]:
    return _json_error(413, f"the request body is larger than {limit} bytes", "BODY_TOO_LARGE")


async def _read_body(receive: Receive, limit: int) -> Any:
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return _GONE
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


async def _wait_disconnect(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


async def _answer(send: Send, status: int, body: bytes) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode())]})  # fmt: skip
    await send({"type": "http.response.body", "body": body})
