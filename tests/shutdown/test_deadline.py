"""The shutdown deadline: a process told to stop exits by `http.shutdown_deadline`, whatever
its shutdown still waits for — here a frozen Redis (SIGSTOP: connections stay open, nothing
answers), which held a real `dra-mirror serve` for 60 s after SIGTERM (twice the client's
socket timeout), past the chart's 30 s grace. It exits with status 3 and says why."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
from pathlib import Path

import httpx
import pytest
import redis.asyncio as aioredis

from dra_mirror.service.cli.deadline import EXIT_DEADLINE, ShutdownDeadline
from dra_mirror.service.settings import HttpSettings, SettingsError
from dra_mirror.service.sim.run import Simulator
from dra_mirror.service.stores.redis_keys import Keys
from tests.clusters.world import small_world
from tests.shutdown.test_sigterm import Mirror

DEADLINE = 3.0


async def test_sigterm_over_a_frozen_redis_exits_by_the_deadline(
    tmp_path: Path, redis_url: str, redis_server
) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    prefix = f"deadline-{os.getpid()}-{tmp_path.name}"
    env = {
        "DRA_MIRROR_STORE_REDIS_PREFIX": prefix,
        "DRA_MIRROR_HTTP_SHUTDOWN_DEADLINE": str(DEADLINE),
    }
    pid = int((redis_server.workdir / "redis.pid").read_text())
    redis = aioredis.Redis.from_url(redis_url)
    try:
        async with Simulator([small_world("east")], kubeconfig_path=kubeconfig):
            mirror = Mirror(
                tmp_path, "--kubeconfig", str(kubeconfig), "--redis-url", redis_url, env=env
            )
            await mirror.start()
            assert mirror.process is not None
            try:

                async def holding(http: httpx.AsyncClient) -> bool:
                    ready = (await http.get("/readyz")).status_code == 200
                    return ready and bool(await redis.exists(Keys(prefix, "east").lease))

                async with httpx.AsyncClient(base_url=mirror.url) as http:
                    await mirror.until(http, holding)
                os.kill(pid, signal.SIGSTOP)
                try:
                    mirror.process.send_signal(signal.SIGTERM)
                    # Without a deadline the shutdown waits out the socket timeouts (60 s).
                    code = await asyncio.wait_for(mirror.process.wait(), timeout=DEADLINE + 15)
                finally:
                    os.kill(pid, signal.SIGCONT)
            finally:
                mirror.kill()
        assert code == EXIT_DEADLINE, mirror.log()
        assert f"shutdown did not finish within {DEADLINE:g} s" in mirror.log()
        assert "Traceback" not in mirror.log()
    finally:
        async for key in redis.scan_iter(match=f"{prefix}:*"):
            await redis.delete(key)
        await redis.aclose()


def test_the_deadline_exits_once_when_it_passes_and_never_once_disarmed() -> None:
    exits: list[int] = []
    fired = threading.Event()

    def exit(code: int) -> None:
        exits.append(code)
        fired.set()

    deadline = ShutdownDeadline(0.05, exit=exit)
    assert not deadline.armed
    deadline.arm()
    deadline.arm()  # a second signal keeps the first deadline
    assert fired.wait(5)
    assert exits == [EXIT_DEADLINE]

    calm = ShutdownDeadline(0.05, exit=exits.append)
    calm.arm()
    calm.disarm()
    threading.Event().wait(0.2)
    assert exits == [EXIT_DEADLINE]


def test_the_deadline_must_be_positive() -> None:
    with pytest.raises(SettingsError, match="shutdown_deadline"):
        HttpSettings(shutdown_deadline=0)
