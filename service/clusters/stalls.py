"""Telling a silent watch stream from a quiet one: bookmarks as a heartbeat.

A watch that asks for bookmarks (`allowWatchBookmarks=true`) hears from kube-apiserver at
least about once a minute even when nothing changes: the watch cache sends each such watcher
a BOOKMARK every `defaultBookmarkFrequency` (one minute, staging/src/k8s.io/apiserver/pkg/
storage/cacher/cacher.go; due times are kept in one-second buckets) and one more two seconds
before the watch's deadline. Bookmarks are a best effort (a server may send none: the API only
promises they come "at the server's discretion"), so silence is judged generously: a stream
that delivered nothing — no event, no bookmark — for `limit` seconds (by default two bookmark
intervals, two minutes) is taken as stalled, and the watcher restarts it, where it would
otherwise wait for `timeoutSeconds` (five minutes and more) or forever. On a server that sends
no bookmarks, a quiet kind costs one new watch request per `limit`.

`StallWatch` is the watchdog of one stream. Silence is the server's: while the reader is held
back by its own consumer (the reactor's queue is full), the stream is not silent, and the
clock starts again when the reader is free. Time comes from the injected `clock` and `sleep`,
so tests drive it by hand.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Iterator
from typing import TypeVar

T = TypeVar("T")

Clock = Callable[[], float]
Sleep = Callable[[float], Awaitable[None]]


class StallWatch:
    """Watches one stream for silence longer than `limit` seconds (0: never)."""

    def __init__(self, *, limit: float, clock: Clock, sleep: Sleep) -> None:
        self.limit = limit
        self.clock = clock
        self.sleep = sleep
        self.last_heard = clock()
        self._held = 0  # readers blocked in the consumer: the silence is ours, not the server's

    def heard(self) -> None:
        """The stream delivered a line."""
        self.last_heard = self.clock()

    def hold(self) -> None:
        """The reader waits for its consumer: no stall until `release` (a pair of calls, not a
        context manager: this runs once per watch event)."""
        self._held += 1

    def release(self) -> None:
        """The reader is free again: the silence is counted from now."""
        self._held -= 1
        self.last_heard = self.clock()

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """`hold` … `release` around a block."""
        self.hold()
        try:
            yield
        finally:
            self.release()

    async def silence(self) -> float:
        """Return (the seconds of silence) once the stream was silent for `limit` seconds
        (noticed within a tenth of `limit` more: the watchdog looks at least that often)."""
        while True:
            silent = self.clock() - self.last_heard
            if not self._held and silent >= self.limit:
                return silent
            await self.sleep(max(self.limit - silent, self.limit / 10))

    async def run(self, reading: Awaitable[T]) -> T | None:
        """`await reading`, or None (the reading cancelled) if the stream stalls first."""
        if self.limit <= 0:
            return await reading
        reader = asyncio.ensure_future(reading)
        watchdog = asyncio.ensure_future(self.silence())
        try:
            await asyncio.wait({reader, watchdog}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (reader, watchdog):
                if not task.done():
                    task.cancel()
            await asyncio.gather(reader, watchdog, return_exceptions=True)
        if reader.done() and not reader.cancelled():
            return reader.result()  # what it returned, or the error it raised
        return None
