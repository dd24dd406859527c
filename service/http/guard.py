"""Bounds on each HTTP request: body size and pace, total time, and work stopped when the
client leaves.

`RequestGuard` is an ASGI middleware (outermost, before authentication). For every HTTP
request it:

* refuses a body whose `Content-Length` is over `max_body_bytes` with 413 before anything;
* hands the body to the app as the client sends it — nothing is read before the app asks,
  so a request refused by authentication costs no buffered body (600 connections sending a
  1 MB body and stopping short of its end cost memory only once authenticated) — counting
  it: past `max_body_bytes` the app is told the client left and the answer is 413; a client
  that leaves `body_timeout` seconds between two parts of its body is answered 408;
* answers an error (4xx, 5xx) to a request whose body was not read to its end only after
  reading the rest and throwing it away (at most `DRAIN_BYTES`, for at most `body_timeout`
  seconds; `Connection: close`): a client still sending its body then reads the answer
  instead of a connection reset;
* once the body was read, runs the app in the request's own task and, once it has run for
  `WATCH_AFTER` (50 ms: most answers are sent sooner and cost no listening at all), listens
  for the client: when it disconnects, the request's executions are aborted
  (`schema.guard.budget.RequestAborts`, registered in the ASGI state) and the app's work is
  cancelled, so no work goes on for nobody;
* gives the whole request `request_timeout` seconds; past them the executions are aborted,
  the task cancelled and, if nothing was sent yet, the answer is 504 with a JSON error.

Once the whole response is sent, neither a disconnect nor the timeout cancels the app: work
it does after answering (Starlette background tasks, e.g. a Slack follow-up) runs to its end.

WebSocket and lifespan traffic pass untouched.
"""

from __future__ import annotations

import asyncio
import logging
from types import ModuleType
from typing import TYPE_CHECKING

import orjson
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from dra_mirror.service.http.request_body import (
    DRAIN_BYTES,
    TOO_LARGE,
    TOO_SLOW,
    Body,
    carries_body,
)

if TYPE_CHECKING:  # graphql-core and the schema load with the first request (see RequestGuard)
    from dra_mirror.schema.guard.budget import RequestAborts

log = logging.getLogger(__name__)

__all__ = ["DRAIN_BYTES", "RequestGuard"]


def _json_error(status: int, message: str, code: str) -> tuple[int, bytes]:
    return status, orjson.dumps({"errors": [{"message": message, "extensions": {"code": code}}]})


# How long a request runs before the guard starts listening for its client leaving: most
# answers are sent sooner, and then cost no listening task at all.
WATCH_AFTER = 0.05


def _budget() -> ModuleType:
    from dra_mirror.schema.guard import budget

    return budget


class RequestGuard:
    def __init__(
        self,
        app: ASGIApp,
        *,
        max_body_bytes: int,
        request_timeout: float,
        body_timeout: float = 10.0,
    ) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.request_timeout = request_timeout
        self.body_timeout = body_timeout
        # schema.guard.budget (graphql-core, the schema package), taken at the first request:
        # the app is built before the schema is when it is built in the lifespan
        # (service.runtime.api), and no request runs before the lifespan has started.
        self._budget: ModuleType | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = _content_length(scope)
        body = Body(receive, limit=self.max_body_bytes, timeout=self.body_timeout, length=length)
        if length is not None and length > self.max_body_bytes:
            await body.drain()
            await _answer(send, *_too_large(self.max_body_bytes), close=not body.complete)
            return
        if not carries_body(scope, length):
            await body.prefetch()  # its one empty part: the disconnect watch may start at once
        budget = self._budget
        if budget is None:
            budget = self._budget = _budget()
        aborts = budget.RequestAborts()
        scope.setdefault("state", {})[budget.ABORTS_KEY] = aborts
        watch = _Watch(scope, receive, aborts, self.request_timeout, body)
        status = 0

        async def guarded_receive() -> Message:
            if body.waiting or body.refused is not None:
                return await body.next()  # the client's disconnect too; a refusal as one
            return await watch.disconnect()

        async def guarded_send(message: Message) -> None:
            nonlocal status
            if body.refused is not None:
                return  # the guard answers (413, 408) once the app is done
            if message["type"] == "http.response.start":
                watch.started = True
                status = message["status"]
                if status >= 400 and not body.complete:
                    message = _closing(message)
            elif message["type"] == "http.response.body" and not message.get("more_body"):
                if status >= 400 and not body.complete:
                    await body.drain()  # then the client reads this answer, not a reset
                watch.answer()  # the whole response is sent: background work may go on
            await send(message)

        try:
            await self.app(scope, guarded_receive, guarded_send)
        except BaseException as error:  # what the app raises once stopped is not answered
            cancelled = isinstance(error, asyncio.CancelledError)
            stopped = watch.why is not None or body.refused is not None
            if not stopped or (watch.why is not None and not watch.take_back() and cancelled):
                raise  # not stopped by the guard, or cancelled by someone else too (shutdown)
        else:
            watch.take_back()
        finally:
            watch.close()
        if body.refused is not None and not watch.started:
            await self._refuse(send, body)
        elif watch.why == _TIMEOUT and not watch.started:
            await _answer(send, *_json_error(
                504, f"the request took longer than {self.request_timeout:g} s",
                "REQUEST_TIMEOUT"))  # fmt: skip

    async def _refuse(self, send: Send, body: Body) -> None:
        if body.refused == TOO_LARGE:
            await body.drain()
            await _answer(send, *_too_large(self.max_body_bytes), close=not body.complete)
        elif body.refused == TOO_SLOW:
            await _answer(send, *_json_error(
                408, f"the request body stalled: nothing for {self.body_timeout:g} s",
                "REQUEST_TIMEOUT"), close=True)  # fmt: skip


_GONE_CLIENT, _TIMEOUT = "gone", "timeout"


class _Watch:
    """One request's deadline and disconnect watch. The app runs in the request's own task;
    after `WATCH_AFTER` (or at the deadline, if sooner) a task starts listening for the
    client leaving — once the body was read — until the deadline. Either stops the work —
    its executions aborted, the request's task cancelled — unless the whole response was
    sent by then."""

    def __init__(
        self, scope: Scope, receive: Receive, aborts: RequestAborts, timeout: float, body: Body
    ) -> None:
        self.scope = scope
        self.receive = receive
        self.aborts = aborts
        self.timeout = timeout
        self.body = body
        self.task = asyncio.current_task()
        loop = asyncio.get_running_loop()
        self.deadline = loop.time() + timeout
        self.started = False  # the response's start was sent
        self.answered = False  # the whole response was sent
        self.why: str | None = None  # why the guard stopped the work: gone, timeout or None
        self._gone: asyncio.Event | None = None
        self._watcher: asyncio.Task[None] | None = None
        self._handle = loop.call_at(min(loop.time() + WATCH_AFTER, self.deadline), self.listen)

    def listen(self) -> None:
        if self._watcher is None and not self.answered and self.why is None:
            self._watcher = asyncio.ensure_future(self._watch())

    async def disconnect(self) -> Message:
        """The app asks for the next message after the body: it gets the disconnect."""
        if self._gone is None:
            self._gone = asyncio.Event()
        self.listen()
        await self._gone.wait()
        return {"type": "http.disconnect"}

    async def _watch(self) -> None:
        try:
            async with asyncio.timeout_at(self.deadline):
                await self.body.read_out()  # the app reads the body: only then the rest
                await _wait_disconnect(self.receive)
        except TimeoutError:
            self._stop(_TIMEOUT)
            return
        if self._gone is not None:
            self._gone.set()
        self._stop(_GONE_CLIENT)

    def _stop(self, why: str) -> None:
        if self.answered or self.why is not None:
            return
        self.why = why
        method, path = self.scope.get("method"), self.scope["path"]
        gone = _budget().ClientGone  # loaded by the guard already: a lookup
        if why == _GONE_CLIENT:
            self.aborts.abort(gone())
            log.info("%s %s: the client disconnected; its work is stopped", method, path)
        else:
            self.aborts.abort(gone(f"over the request timeout ({self.timeout:g} s)"))
            log.info("%s %s: over the request timeout (%g s); its work is stopped",
                     method, path, self.timeout)  # fmt: skip
        if self.task is not None:
            self.task.cancel()

    def take_back(self) -> bool:
        """Once the app has returned or raised: the guard's own cancellation of the request's
        task is taken back. False when something else cancelled the task too."""
        if self.why is None:
            return False
        if self.task is not None and self.task.cancelling():
            return self.task.uncancel() == 0
        return True

    def answer(self) -> None:
        self.answered = True
        self.close()

    def close(self) -> None:
        self._handle.cancel()
        if self._watcher is not None:
            self._watcher.cancel()


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


def _closing(message: Message) -> Message:
    """A response start that says the connection closes after it (its request's body was not
    read to its end)."""
    headers = [(k, v) for k, v in message.get("headers") or () if k.lower() != b"connection"]
    return {**message, "headers": [*headers, (b"connection", b"close")]}


async def _wait_disconnect(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


async def _answer(send: Send, status: int, body: bytes, *, close: bool = False) -> None:
    headers = [(b"content-type", b"application/json"),
               (b"content-length", str(len(body)).encode())]  # fmt: skip
    if close:
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
