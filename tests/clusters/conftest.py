"""Helpers for the watcher tests: fast settings, a recording sleep, and polling with a bound."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable

import pytest

from dra_mirror.service.clusters.watching import WatchSettings

# Short streams and tiny backoffs: the tests exercise reconnects, not patience. No stall
# watchdog (its waits would go through the recorded `sleep`); the stall tests turn it on.
FAST = WatchSettings(
    stall_intervals=0.0,
    quiet_intervals=0.0,  # a test that wants the bookmark deadline or position checks says so
    position_check_interval=0.0,
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


class FakeTime:
    """Time that stands still until the test moves it. `clock()` is the fake now; `sleep(d)`
    for a short `d` (the fast settings' backoffs) returns after a real yield, a longer one
    waits until `advance` has moved the clock past its end."""

    SHORT = 1.0

    def __init__(self) -> None:
        self.now = 0.0
        self._sleepers: list[tuple[float, asyncio.Future[None]]] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, delay: float) -> None:
        if delay < self.SHORT:
            await asyncio.sleep(0.001)
            return
        entry = (self.now + delay, asyncio.get_running_loop().create_future())
        self._sleepers.append(entry)
        try:
            await entry[1]
        finally:
            self._sleepers.remove(entry)

    @property
    def waiting(self) -> int:
        """How many long sleeps are waiting for the clock."""
        return len(self._sleepers)

    def advance(self, seconds: float) -> None:
        self.now += seconds
        for due, future in list(self._sleepers):
            if due <= self.now and not future.done():
                future.set_result(None)


@pytest.fixture
def fake_time() -> FakeTime:
    return FakeTime()
