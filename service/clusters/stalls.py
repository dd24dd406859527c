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

Two earlier steps shorten the time a silent stream is trusted:

* the bookmark deadline (`quiet_after`, one bookmark interval and a quarter by default): a
  stream silent that long has missed a bookmark kube-apiserver would have sent; `on_quiet` is
  called once (the watcher reports the kind as possibly stale: the cluster is served as
  `stale`, not `synced`, until the stream is heard again);
* position checks (`check_every`): while the stream is silent, `check` is called every that
  many seconds of silence — the watcher asks for the kind's current resourceVersion (a LIST
  of one object) and compares it with its position: a watch from a position the server never
  reached (its versions were reset by an etcd restore) is silent, and this finds it within
  seconds, not at the stall limit. A stream that delivers (an event or a bookmark) costs no
  check at all.

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


Quiet = Callable[[float], Awaitable[None]]
Check = Callable[[], Awaitable[bool]]


class PositionGone(Exception):
    """A position check found the stream's position invalid (the versions were reset): the
    watcher relists (raised out of `run`)."""


class StallWatch:
    """Watches one stream for silence longer than `limit` seconds (0: never); see the module
    docstring for `quiet_after`/`on_quiet` and `check_every`/`check` (0 or None: off)."""

    def __init__(
        self,
        *,
        limit: float,
        clock: Clock,
        sleep: Sleep,
        quiet_after: float = 0.0,
        on_quiet: Quiet | None = None,
        check_every: float = 0.0,
        check: Check | None = None,
    ) -> None:
        self.limit = limit
        self.clock = clock
        self.sleep = sleep
        self.last_heard = clock()
        self._held = 0  # readers blocked in the consumer: the silence is ours, not the server's
        self.quiet_after = quiet_after if on_quiet is not None else 0.0
        self.on_quiet = on_quiet
        self.check_every = check_every if check is not None else 0.0
        self.check = check

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

    def silent_for(self) -> float:
        """Seconds the server has said nothing (0 while the reader waits for its consumer)."""
        return 0.0 if self._held else max(0.0, self.clock() - self.last_heard)

    async def silence(self) -> float:
        """Return (the seconds of silence) once the stream was silent for `limit` seconds
        (noticed within a tenth of the shortest deadline more: the watchdog looks at least
        that often); meanwhile call `on_quiet` once per silence past `quiet_after` and `check`
        every `check_every` seconds of silence (`PositionGone` when it answers True)."""
        deadlines = [d for d in (self.limit, self.quiet_after, self.check_every) if d > 0]
        tick = min(deadlines) / 10
        quiet_for: float | None = None  # last_heard of the silence on_quiet was called for
        checked = self.last_heard  # the silence is checked from here
        while True:
            silent = self.silent_for()
            heard = self.last_heard
            if self.limit > 0 and silent >= self.limit:
                return silent
            due = [self.limit - silent] if self.limit > 0 else []
            if self.quiet_after > 0 and quiet_for != heard:
                if silent >= self.quiet_after:
                    quiet_for = heard
                    assert self.on_quiet is not None
                    await self.on_quiet(silent)
                else:
                    due.append(self.quiet_after - silent)
            if self.check_every > 0:
                checked = max(checked, heard)
                since = self.clock() - checked
                if silent >= self.check_every and since >= self.check_every:
                    checked = self.clock()
                    assert self.check is not None
                    if await self.check():
                        raise PositionGone()
                    since = 0.0
                due.append(self.check_every - since)
            await self.sleep(max(min(due, default=tick), tick))

    async def run(self, reading: Awaitable[T]) -> T | None:
        """`await reading`, or None (the reading cancelled) if the stream stalls first;
        `PositionGone` if a position check found the position invalid first."""
        if self.limit <= 0 and self.quiet_after <= 0 and self.check_every <= 0:
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
        if watchdog.done() and not watchdog.cancelled() and watchdog.exception() is not None:
            raise watchdog.exception()  # type: ignore[misc]  # PositionGone, or a bug
        return None
