"""An unreachable cluster's log: one WARNING per backoff step for its kinds failing alike,
with a count, instead of one per kind and attempt (eight kinds wrote ~100 lines in 24 s)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

import pytest

from dra_mirror.service.clusters.discovery import DraVersions
from dra_mirror.service.clusters.errors import Forbidden, Unreachable
from dra_mirror.service.clusters.failures import FailureLog
from dra_mirror.service.clusters.transport import ClusterApi
from dra_mirror.service.clusters.watching import KindWatcher
from dra_mirror.service.model.kinds import KINDS
from tests.clusters.conftest import FAST

LOGGER = "dra_mirror.service.clusters.watching"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def warnings(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == LOGGER and r.levelno == logging.WARNING]


def test_kinds_failing_alike_write_one_line_per_step(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, LOGGER)
    clock = Clock()
    failures = FailureLog("east", clock=clock)
    down = Unreachable("/api/v1/pods: connection refused", cluster="east")
    kinds = [f"Kind{i}" for i in range(8)]
    for attempt in range(1, 6):
        for kind in kinds:
            failures.failed(kind, down, attempt, 0.5 * attempt, "a relist")
        clock.now += 2**attempt
    lines = warnings(caplog)
    assert len(lines) == 5  # steps 1..5, not 40
    last = lines[-1].getMessage()
    assert "attempt 5" in last and "8 failed attempts since the last report" in last
    assert "8 kinds failing for 30s" in last

    # a kind refused by RBAC is another failure: its own steps are said
    refused = Forbidden("/apis/resource.k8s.io: forbidden", cluster="east", code=403)
    assert failures.failed("Kind0", refused, 1, 0.5, "a relist")
    assert not failures.failed("Kind1", refused, 1, 0.5, "a relist")

    # every kind answering again: one INFO line, and the next failure is a first step again
    caplog.clear()
    for kind in kinds:
        failures.recovered(kind)
    [back] = [r for r in caplog.records if r.levelno == logging.INFO]
    assert "every kind answers again after 42 failed attempts over 62s" in back.getMessage()
    assert failures.failed("Kind3", down, 1, 0.5, "a relist")


class Refused(ClusterApi):
    """An API server nobody can reach: every request fails to connect."""

    def __init__(self) -> None:
        super().__init__("east", api_client=None)  # type: ignore[arg-type]
        self.calls = 0

    async def get(self, path: str, params: Any = None, *, time_limit: float = 60.0) -> Any:
        self.calls += 1
        raise Unreachable(f"{path}: Cannot connect to host 127.0.0.1:1", cluster="east")


async def test_an_unreachable_cluster_logs_each_backoff_step_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Every kind of a cluster, watched as the reactor watches them (one `FailureLog`), against
    a server that refuses connections."""
    caplog.set_level(logging.INFO, LOGGER)
    api = Refused()
    failures = FailureLog("east")
    attempts: dict[str, int] = {}
    enough = asyncio.Event()  # every kind failed six times

    async def sleep(_delay: float) -> None:
        if min(w.backoff.attempt for w in watchers) >= 6:
            enough.set()
        await asyncio.sleep(0)

    async def emit(_message: Any) -> None:
        return None

    watchers = [
        KindWatcher(kind, api=api, versions=DraVersions(api), emit=emit, sleep=sleep,
                    settings=FAST, failures=failures)
        for kind in KINDS
    ]  # fmt: skip
    tasks = [asyncio.create_task(w.run()) for w in watchers]
    try:
        async with asyncio.timeout(30):
            await enough.wait()
    finally:
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
    for w in watchers:
        attempts[w.kind] = w.backoff.attempt
    lines = warnings(caplog)
    assert sum(attempts.values()) >= 6 * len(watchers)
    assert len(lines) <= max(attempts.values()), [r.getMessage() for r in lines]
    assert all("failed attempt" in r.getMessage() for r in lines)
