"""A takeover does not make the API unready: the new holder's index is seeded with the whole
state an earlier holder synced, so the shared status stays `synced` while the new holder
relists (not connected until its watches open: served stale, flagged). Two all-in-one
replicas (`mirror_app` over the suite's Redis) in one process; the first stops and releases
its lease while the cluster answers the claims' list with 503."""

from __future__ import annotations

import asyncio
import contextlib
import os
from pathlib import Path

import redis.asyncio as aioredis

from dra_mirror.service.runtime.mirror import mirror_app
from dra_mirror.service.settings import ClusterSettings, Settings, StoreSettings
from dra_mirror.service.sim.run import ClusterSpec, Simulator
from dra_mirror.service.stores.redis_keys import Keys, status_decoder
from tests.clusters.conftest import eventually
from tests.clusters.world import small_world
from tests.metrics.scrape import client


async def test_the_shared_status_stays_synced_through_a_takeover(
    tmp_path: Path, redis_url: str
) -> None:
    world = small_world("east")
    kubeconfig = tmp_path / "kubeconfig"
    prefix = f"takeover-ready-{os.getpid()}-{tmp_path.name}"
    settings = Settings(
        clusters=ClusterSettings(kubeconfig=str(kubeconfig)),
        store=StoreSettings(redis_url=redis_url, redis_prefix=prefix, lease_ttl=2),
    )
    redis = aioredis.Redis.from_url(redis_url)
    status_key = Keys(prefix, "east").status
    seen: list[bool] = []

    async def shared_synced() -> bool:
        raw = await redis.get(status_key)
        seen.append(raw is not None and status_decoder.decode(raw).synced)
        return seen[-1]

    async def watch_status() -> None:
        while True:
            await shared_synced()
            await asyncio.sleep(0.02)

    async def _ready(http) -> bool:
        return (await http.get("/readyz")).status_code == 200

    try:
        async with Simulator([ClusterSpec(world)], kubeconfig_path=kubeconfig) as sim:
            first, second = mirror_app(settings), mirror_app(settings)
            holding: contextlib.AbstractAsyncContextManager | None = client(first)
            holder = await holding.__aenter__()
            try:
                await first.state.mirror.reactors.wait_synced()  # it holds the lease
                async with client(second) as standby:
                    assert (await holder.get("/readyz")).status_code == 200
                    await eventually(lambda: _ready(standby))  # from the shared state
                    # the new holder's list of claims fails until the fault is cleared
                    sim.served["east"].apply_faults(
                        {"errors": {"code": 503, "count": 10**6, "path": "resourceclaims"}}
                    )
                    seen.clear()
                    poller = asyncio.create_task(watch_status())
                    # the first replica stops and releases its lease: the second takes over
                    await holding.__aexit__(None, None, None)
                    holding = None
                    taken = second.state.mirror.reactors
                    await eventually(lambda: "east" in taken.by_name, within=20)
                    reactor = taken.by_name["east"]
                    await eventually(lambda: reactor.status.error is not None, within=20)
                    await eventually(shared_synced)
                    answer = await standby.get("/readyz")
                    assert answer.status_code == 200, answer.text
                    assert answer.json()["clusters"] == {"east": "stale"}
                    sim.served["east"].apply_faults({"errors": None})
                    await eventually(lambda: reactor.synced.is_set(), within=40)
                    poller.cancel()
                    await shared_synced()
                    assert len(seen) > 10 and all(seen), seen  # never partial for readers
                    answer = await standby.get("/readyz")
                    assert answer.json()["clusters"] == {"east": "synced"}
            finally:
                if holding is not None:
                    await holding.__aexit__(None, None, None)
    finally:
        with contextlib.suppress(Exception):
            async for key in redis.scan_iter(match=f"{prefix}:*"):
                await redis.delete(key)
        await redis.aclose()
