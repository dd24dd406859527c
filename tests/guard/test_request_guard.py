"""The request guard as ASGI: a disconnect or the timeout stops the app's work; a body past
the limit is refused while it streams; work after the answer (background tasks) runs on."""

from __future__ import annotations

import asyncio

from dra_mirror.schema.guard.budget import ABORTS_KEY, ClientGone
from dra_mirror.service.http.guard import RequestGuard


def http_scope() -> dict:
    return {"type": "http", "method": "POST", "path": "/graphql", "headers": [], "state": {}}


class Client:
    def __init__(self, chunks: list[bytes], *, leave_after: float | None = None) -> None:
        self.chunks = list(chunks)
        self.leave_after = leave_after
        self.sent: list[dict] = []

    async def receive(self) -> dict:
        if self.chunks:
            chunk = self.chunks.pop(0)
            return {"type": "http.request", "body": chunk, "more_body": bool(self.chunks)}
        if self.leave_after is None:
            await asyncio.Event().wait()
        await asyncio.sleep(self.leave_after)
        return {"type": "http.disconnect"}

    async def send(self, message: dict) -> None:
        self.sent.append(message)


async def read_body(receive) -> bytes:
    """What an app does with the body: read its parts to the last."""
    parts = []
    while True:
        message = await receive()
        parts.append(message.get("body", b""))
        if message["type"] != "http.request" or not message.get("more_body"):
            return b"".join(parts)


async def test_a_disconnect_aborts_the_executions_and_cancels_the_work():
    seen: dict = {}

    async def slow_app(scope, receive, send):
        seen["body"] = await read_body(receive)
        seen["aborts"] = scope["state"][ABORTS_KEY]
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            seen["cancelled"] = True
            raise

    guard = RequestGuard(slow_app, max_body_bytes=100, request_timeout=30)
    client = Client([b'{"query":', b' "{ x }"}'], leave_after=0.05)
    scope = http_scope()
    await guard(scope, client.receive, client.send)
    assert seen["body"] == b'{"query": "{ x }"}' and seen["cancelled"]
    assert isinstance(seen["aborts"].reason, ClientGone)
    assert client.sent == []  # nobody to answer


async def test_the_request_timeout_answers_504_and_stops_the_work():
    async def slow_app(scope, receive, send):
        await receive()
        await asyncio.Event().wait()

    guard = RequestGuard(slow_app, max_body_bytes=100, request_timeout=0.05)
    client = Client([b"{}"])
    await guard(http_scope(), client.receive, client.send)
    assert client.sent[0]["status"] == 504
    assert b"REQUEST_TIMEOUT" in client.sent[1]["body"]


async def test_a_streamed_body_past_the_limit_is_413():
    async def app(scope, receive, send):  # as Starlette does: the body's end, else an error
        if (await read_body(receive)).count(b"x") < 18:
            raise RuntimeError("the client left")
        raise AssertionError("never reached")

    guard = RequestGuard(app, max_body_bytes=10, request_timeout=1)
    client = Client([b"x" * 6, b"x" * 6, b"x" * 6])
    await guard(http_scope(), client.receive, client.send)
    assert client.sent[0]["status"] == 413
    assert not client.chunks  # the rest was read and dropped: the client reads the answer


async def test_work_after_the_answer_runs_to_its_end():
    done = asyncio.Event()

    async def app(scope, receive, send):
        await receive()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})
        await asyncio.sleep(0.1)  # a background task after the reply
        done.set()

    guard = RequestGuard(app, max_body_bytes=10, request_timeout=0.05)
    client = Client([b"{}"], leave_after=0.0)
    await guard(http_scope(), client.receive, client.send)
    assert done.is_set() and client.sent[0]["status"] == 200
