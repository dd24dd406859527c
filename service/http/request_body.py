"""One HTTP request's body as the request guard (service.http.guard) hands it to the app.

`Body(receive, limit=…, timeout=…, length=…)` reads nothing until the app asks (`next`), so
a request refused before its body is wanted (authentication) has cost no buffered body.
Each part it hands on is counted and waited for at most `timeout` seconds:

* past `limit` bytes, or `timeout` seconds without a part, the body is `refused`
  (`TOO_LARGE`, `TOO_SLOW`) and the app is told the client left (`http.disconnect`): the
  guard answers 413 or 408 instead of whatever the app makes of it;
* a request that carries no body (no `Content-Length` and no `Transfer-Encoding`, or a length
  of 0) has its one empty part read at once (`prefetch`), so the guard may listen for the
  client leaving from the start;
* `drain()` reads what is left of a body the app did not want and drops it — at most
  `DRAIN_BYTES` (a declared length over that is not drained at all) and for at most `timeout`
  seconds in all — so that a client still sending reads the error answer rather than a
  connection reset (a socket closed with unread data resets);
* `complete` once the last part arrived or the client left; `read_out()` waits for that.
"""

from __future__ import annotations

import asyncio

from starlette.types import Message, Receive, Scope

DRAIN_BYTES = 64 * 1024 * 1024
TOO_LARGE, TOO_SLOW = "too large", "too slow"
_GONE: Message = {"type": "http.disconnect"}


def carries_body(scope: Scope, length: int | None) -> bool:
    """Whether a request sends a body at all (a length, or chunked transfer encoding)."""
    if length is not None:
        return length > 0
    return any(key == b"transfer-encoding" for key, _ in scope.get("headers") or ())


class Body:
    def __init__(self, receive: Receive, *, limit: int, timeout: float, length: int | None):
        self.receive = receive
        self.limit = limit
        self.timeout = timeout
        self.length = length
        self.size = 0
        self.complete = False  # the last part arrived, or the client left
        self.refused: str | None = None  # TOO_LARGE, TOO_SLOW
        self._done = asyncio.Event()
        self._first: Message | None = None

    def _finish(self) -> None:
        self.complete = True
        self._done.set()

    async def prefetch(self) -> None:
        """Read the one (empty) part of a request without a body now."""
        self._first = await self._receive()

    async def next(self) -> Message:
        """The body's next part for the app (the disconnect when refused or gone)."""
        if self._first is not None:
            message, self._first = self._first, None
            return message
        if self.refused is not None or self.complete:
            return _GONE
        return await self._receive()

    async def _receive(self) -> Message:
        try:
            async with asyncio.timeout(self.timeout):
                message = await self.receive()
        except TimeoutError:
            self.refused = TOO_SLOW
            self._finish()
            return _GONE
        if message["type"] != "http.request":
            self._finish()
            return message
        self.size += len(message.get("body", b""))
        if self.size > self.limit:
            self.refused = TOO_LARGE
            if not message.get("more_body", False):
                self._finish()
            return _GONE
        if not message.get("more_body", False):
            self._finish()
        return message

    @property
    def waiting(self) -> bool:
        """Whether the app has parts of the body still to take (`next`)."""
        return self._first is not None or (not self.complete and self.refused is None)

    async def read_out(self) -> None:
        """Return once the whole body was received (or the client left)."""
        await self._done.wait()

    async def drain(self) -> None:
        """Read the rest of the body and drop it (see the module docstring)."""
        if self.complete:
            return
        if self.length is not None and self.length - self.size > DRAIN_BYTES:
            return  # too much to read for an error answer: the connection is closed
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout
        drained = 0
        while not self.complete and drained <= DRAIN_BYTES:
            try:
                async with asyncio.timeout_at(deadline):
                    message = await self.receive()
            except TimeoutError:
                return
            if message["type"] != "http.request":
                self._finish()
                return
            part = len(message.get("body", b""))
            self.size += part
            drained += part
            if not message.get("more_body", False):
                self._finish()
