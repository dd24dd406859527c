"""The queue between one cluster's watchers and its reactor.

Watchers `emit` what they see (`WatchMessage`s) into a bounded queue: when the reactor (or a
sink behind it) is slow, the watchers wait, and the API server's own flow control takes over.
The reactor `take`s messages one at a time, with an optional wait, to cut them into batches.

Promises: messages come out in the order they went in and none is lost to a timeout (a
cancelled `Queue.get` could drop one, so one long-lived get is kept across waits); after
`close()` the reader gets `CLOSED` once everything emitted before it was taken.
"""

from __future__ import annotations

import asyncio
from typing import Any

from dra_mirror.service.clusters.watching import WatchMessage

CLOSED: Any = object()  # what `take` returns after `close()`, once the queue is drained


class ClusterFeed:
    """A bounded, ordered queue of watch messages with lossless timed reads."""

    def __init__(self, size: int = 10_000) -> None:
        self._queue: asyncio.Queue[Any] = asyncio.Queue(size)
        self._getter: asyncio.Future[Any] | None = None

    async def emit(self, message: WatchMessage) -> None:
        """Queue `message`; waits while the queue is full (backpressure)."""
        await self._queue.put(message)

    async def close(self) -> None:
        """No more messages: the reader gets `CLOSED` after the ones already queued."""
        await self._queue.put(CLOSED)

    def empty(self) -> bool:
        """Nothing emitted is waiting to be taken."""
        holding = self._getter is not None and self._getter.done()
        return self._queue.empty() and not holding

    async def take(self, wait: float | None = None) -> Any:
        """The next message, `CLOSED`, or None when nothing came within `wait` seconds
        (None: wait as long as it takes)."""
        if self._getter is None:
            try:
                return self._queue.get_nowait()
            except asyncio.QueueEmpty:
                self._getter = asyncio.ensure_future(self._queue.get())
        done, _ = await asyncio.wait({self._getter}, timeout=wait)
        if not done:
            return None
        getter, self._getter = self._getter, None
        return getter.result()

    def abandon(self) -> None:
        """The reader is gone: drop the pending get."""
        if self._getter is not None:
            self._getter.cancel()
            self._getter = None
