"""A whole mirror (`mirror_app`) over the simulator whose watch stalls and whose
resourceVersions reset: the watch settings come from the command's `Settings` (a bookmark
interval of 0.2 s makes a stall show within a second, where the default of 60 s would take two
minutes), and the stall and the reset are counted in `/metrics`
(`dra_mirror_watch_stalls_total{cluster,kind}`, `dra_mirror_watch_resets_total{cluster}`) and
in the GraphQL `ClusterStatus` (`stalls`, `resets`) — for the in-memory mirror and for a
watcher over Redis under its lease."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import httpx
import redis.asyncio as aioredis

from dra_mirror.service.runtime.mirror import mirror_app
from dra_mirror.service.settings import ClusterSettings, Settings, StoreSettings
from dra_mirror.service.sim.run import ClusterSpec, Simulator
from dra_mirror.service.stores.memory import MemoryStore
from tests.clusters.conftest import eventually
from tests.clusters.world import small_world
from tests.metrics.scrape import client, scrape

STALL_ONCE = {"stallWatch": {"seconds": 3600, "afterEvents": 0, "count": 1}}
STATUS = "{ clusters { name status { connected stalls resets } } }"


def fast_watch(kubeconfig: Path) -> ClusterSettings:
    # two silent bookmark intervals of 0.2 s: a stall is seen after 0.4 s
    return ClusterSettings(kubeconfig=str(kubeconfig), bookmark_interval=0.2, stall_intervals=2)


async def cluster_status(http: httpx.AsyncClient) -> dict:
    answer = (await http.post("/graphql", json={"query": STATUS})).json()
    [east] = answer["data"]["clusters"]
    return east["status"]


async def stalls_in_metrics(http: httpx.AsyncClient) -> float:
    return sum(
        (await scrape(http)).series("dra_mirror_watch_stalls_total", cluster="east").values()
    )


async def check_stall_then_reset(sim: Simulator, http: httpx.AsyncClient) -> None:
    async def stalled_once() -> bool:
        return (
            await stalls_in_metrics(http) == 1
            and sum((await cluster_status(http))["stalls"].values()) == 1
        )

    await eventually(stalled_once, within=20)
    status = await cluster_status(http)
    [kind] = status["stalls"]  # whichever kind's stream went silent first
    metrics = await scrape(http)
    assert metrics.value("dra_mirror_watch_stalls_total", cluster="east", kind=kind) == 1
    assert metrics.value("dra_mirror_watch_resets_total", cluster="east") == 0
    assert status["resets"] == 0

    # an etcd restore: the counter starts again lower, every stream ends
    sim.served["east"].apply_faults({"restart": {"base": 1}})

    async def reset_counted() -> bool:
        resets = (await scrape(http)).value("dra_mirror_watch_resets_total", cluster="east")
        return resets == 1 and (await cluster_status(http))["resets"] == 1

    await eventually(reset_counted, within=20)


async def test_a_stall_and_a_reset_are_counted_in_metrics_and_graphql(tmp_path: Path) -> None:
    world = small_world("east")
    kubeconfig = tmp_path / "kubeconfig"
    spec = ClusterSpec(world, faults=STALL_ONCE)
    async with Simulator([spec], kubeconfig_path=kubeconfig, bookmark_interval=0.2) as sim:
        app = mirror_app(Settings(clusters=fast_watch(kubeconfig)), store=MemoryStore())
        async with client(app) as http:
            await app.state.mirror.reactors.wait_synced()
            await check_stall_then_reset(sim, http)


async def test_a_leased_watcher_takes_the_watch_settings_too(
    tmp_path: Path, redis_url: str
) -> None:
    world = small_world("east")
    kubeconfig = tmp_path / "kubeconfig"
    prefix = f"watch-faults-{os.getpid()}-{tmp_path.name}"
    settings = Settings(
        clusters=fast_watch(kubeconfig),
        store=StoreSettings(redis_url=redis_url, redis_prefix=prefix),
    )
    spec = ClusterSpec(world, faults=STALL_ONCE)
    try:
        async with Simulator([spec], kubeconfig_path=kubeconfig, bookmark_interval=0.2) as sim:
            app = mirror_app(settings)
            async with client(app) as http:
                await app.state.mirror.reactors.wait_synced()
                await check_stall_then_reset(sim, http)
    finally:
        redis = aioredis.Redis.from_url(redis_url)
        with contextlib.suppress(Exception):
            async for key in redis.scan_iter(match=f"{prefix}:*"):
                await redis.delete(key)
        await redis.aclose()
