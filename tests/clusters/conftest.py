"""Helpers for the watcher tests: fast settings, a recording sleep, and polling with a bound."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable

import pytest

from dra_mirror.service.clusters.watching import WatchSettings

# Short streams and tiny backoffs: the tests exercise reconnects, not patience.
FAST = WatchSettings(
    page_size=500,
    watch_timeout=2,
    watch_timeout_jitter=0.0,
    stream_grace=2.0,
    list_time_limit=10.0,
    backoff_base=0.01,
    backoff_cap=0.05,
)


async def eventually(predicate: Callable[[], object], *, within: float = 15.0) -> None:
    """Wait until `predicate()` (or the awaitable it returns) is true; fail, never hang, if it
    does not become so within `within` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while True:
        result = predicate()
        if inspect.isawaitable(result):
            result = await result
        if result:
            return
        if loop.time() > deadline:
            raise AssertionError("condition never became true")
        await asyncio.sleep(0.01)


class RecordingSleep:
    """A fake `sleep`: records each requested delay, then waits only while `gate` is closed."""

    def __init__(self) -> None:
        self.delays: list[float] = []
        self.gate = asyncio.Event()
        self.gate.set()

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)
        await self.gate.wait()
        await asyncio.sleep(0.001)  # a real yield, so a failing loop cannot starve the server


@pytest.fixture
def recording_sleep() -> RecordingSleep:
    return RecordingSleep()
