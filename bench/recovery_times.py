"""How long the mirror takes to notice a stalled watch, and to be ready again after a restart.

    .venv/bin/python -m bench.recovery_times [--scenario scale-500] [--bookmark 2] [--runs 3]

Two parts, each printing one line per measure with its floor from the same run:

* stall: an in-process mirror (memory store) over the simulator with a bookmark interval of
  `--bookmark` seconds and the default stall rule (2 intervals). Every open watch is dropped
  and the next stream of every kind goes silent; the figure is the time from the drop to the
  first stall counted in the cluster's status. Floor: the rule itself, 2 x the interval (a
  watch cannot be called stalled sooner without calling quiet watches stalled).
* restart: `dra-mirror serve --redis-url` (a subprocess, as a container runs it) over the
  scenario and a private redis-server. Measures: a cold start to `/readyz` 200; the restart
  after SIGTERM (lease released); after SIGKILL of a synced replica (its lease expires after
  `store.lease_ttl`, the shared state stays whole); after SIGKILL mid-sync (the claims'
  list failing), where the restart is ready only once it took the lease and listed. Floor:
  the cold start of the same run (the restarts should not cost more, except the lease TTL
  the crash mid-sync must wait out).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx
import redis.asyncio as aioredis

from bench.redis_common import free_port, redis_server
from dra_mirror.service.runtime.mirror import mirror_app
from dra_mirror.service.settings import ClusterSettings, Settings
from dra_mirror.service.sim.run import Simulator
from dra_mirror.service.sim.scenario import build_world, load_scenario
from dra_mirror.service.stores.memory import MemoryStore
from dra_mirror.service.stores.redis_keys import Keys

DRA_MIRROR = Path(sys.executable).with_name("dra-mirror")
LEASE_TTL = 10.0
CLAIMS_FAIL = {"errors": {"code": 503, "count": 10**6, "path": "resourceclaims"}}


async def _until(predicate, within: float = 600.0, every: float = 0.05) -> float:
    started = time.perf_counter()
    while time.perf_counter() - started < within:
        if await predicate():
            return time.perf_counter() - started
        await asyncio.sleep(every)
    raise SystemExit(f"condition not met within {within:.0f} s")


async def stall_once(scenario: str, bookmark: float) -> float:
    world = build_world(load_scenario(scenario))
    with tempfile.TemporaryDirectory() as workdir:
        kubeconfig = Path(workdir) / "kubeconfig"
        settings = Settings(
            clusters=ClusterSettings(kubeconfig=str(kubeconfig), bookmark_interval=bookmark)
        )
        async with Simulator(
            world.specs, kubeconfig_path=kubeconfig, bookmark_interval=bookmark
        ) as sim:
            app = mirror_app(settings, store=MemoryStore())
            transport = httpx.ASGITransport(app=app)
            async with app.router.lifespan_context(app):
                reactors = app.state.mirror.reactors
                await reactors.wait_synced()
                async with httpx.AsyncClient(transport=transport, base_url="http://mirror"):
                    name, served = next(iter(sim.served.items()))
                    stall = {"seconds": 3600, "afterEvents": 0, "count": 1000}
                    served.apply_faults({"stallWatch": stall, "dropWatches": True})
                    reactor = reactors.by_name[name]
                    return await _until(lambda: _stalled(reactor))


async def _stalled(reactor) -> bool:
    return bool(reactor.status.stalls)


class Serve:
    def __init__(self, kubeconfig: Path, redis_url: str, prefix: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {**os.environ, "DRA_MIRROR_STORE_REDIS_PREFIX": prefix,
               "DRA_MIRROR_STORE_LEASE_TTL": str(LEASE_TTL)}  # fmt: skip
        self.command = [str(DRA_MIRROR), "serve", "--port", str(self.port), "--insecure-no-auth",
                        "--kubeconfig", str(kubeconfig), "--redis-url", redis_url]  # fmt: skip
        self.env = env
        self.process: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        self.process = await asyncio.create_subprocess_exec(
            *self.command, env=self.env, stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )  # fmt: skip

    async def ready(self) -> float:
        async with httpx.AsyncClient(base_url=self.url, timeout=5) as http:

            async def answered() -> bool:
                try:
                    return (await http.get("/readyz")).status_code == 200
                except httpx.TransportError:
                    return False

            return await _until(answered)

    async def stop(self, how: int) -> None:
        assert self.process is not None
        self.process.send_signal(how)
        await self.process.wait()


async def restarts(scenario: str) -> dict[str, float]:
    world = build_world(load_scenario(scenario))
    figures: dict[str, float] = {}
    with redis_server() as redis_url, tempfile.TemporaryDirectory() as workdir:
        kubeconfig = Path(workdir) / "kubeconfig"
        async with Simulator(world.specs, kubeconfig_path=kubeconfig) as sim:
            prefix = f"recovery-{os.getpid()}"
            first = Serve(kubeconfig, redis_url, prefix)
            await first.start()
            figures["cold start → ready"] = await first.ready()
            await first.stop(signal.SIGTERM)
            second = Serve(kubeconfig, redis_url, prefix)
            await second.start()
            figures["restart after SIGTERM → ready"] = await second.ready()
            await asyncio.sleep(2)  # it holds the lease now
            second.process.kill()
            await second.process.wait()
            third = Serve(kubeconfig, redis_url, prefix)
            await third.start()
            figures["restart after SIGKILL (synced) → ready"] = await third.ready()
            await third.stop(signal.SIGTERM)

            # a crash mid-sync: a fresh prefix, the claims never list for the first holder
            redis = aioredis.Redis.from_url(redis_url)
            crash_prefix = f"{prefix}-mid"
            name, served = next(iter(sim.served.items()))
            served.apply_faults(CLAIMS_FAIL)
            partial = Serve(kubeconfig, redis_url, crash_prefix)
            await partial.start()
            lease = Keys(crash_prefix, name).lease
            await _until(lambda: redis.exists(lease), within=60)
            await asyncio.sleep(2)  # it wrote the kinds that list
            partial.process.kill()
            await partial.process.wait()
            served.apply_faults({"errors": None})
            restarted = Serve(kubeconfig, redis_url, crash_prefix)
            await restarted.start()
            figures["restart after SIGKILL mid-sync → ready"] = await restarted.ready()
            await restarted.stop(signal.SIGTERM)
            await redis.aclose()
    return figures


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", default="scale-500")
    parser.add_argument("--bookmark", type=float, default=2.0)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    stalls = [await stall_once(args.scenario, args.bookmark) for _ in range(args.runs)]
    floor = 2 * args.bookmark
    print(f"stall detected after a drop: median {statistics.median(stalls):.2f} s "
          f"(runs {', '.join(f'{s:.2f}' for s in stalls)}); floor {floor:.2f} s "
          f"(2 x bookmark interval {args.bookmark:g} s)")  # fmt: skip
    runs = [await restarts(args.scenario) for _ in range(args.runs)]
    cold = statistics.median(r["cold start → ready"] for r in runs)
    for measure in runs[0]:
        values = [r[measure] for r in runs]
        print(f"{measure}: median {statistics.median(values):.2f} s "
              f"(runs {', '.join(f'{v:.2f}' for v in values)}); floor: cold start {cold:.2f} s, "
              f"lease TTL {LEASE_TTL:g} s")  # fmt: skip


if __name__ == "__main__":
    asyncio.run(main())
