"""Redis emptied under a running all-in-one replica (every key of the deployment deleted, as
FLUSHALL or a failover to an empty replica does): the replica notices (its fence is gone),
takes the cluster again, relists and rebuilds the shared state, and is ready again — for a
quiet cluster too, where no write would hit the missing fence (the lease renewal finds the
lease gone)."""

from __future__ import annotations

import os
from pathlib import Path

import redis.asyncio as aioredis

from dra_mirror.service.runtime.mirror import mirror_app
from dra_mirror.service.settings import ClusterSettings, Settings, StoreSettings
from dra_mirror.service.sim.run import Simulator
from dra_mirror.service.stores.redis_keys import Keys
from tests.clusters.conftest import eventually
from tests.clusters.world import small_world
from tests.metrics.scrape import client

CLAIMS = "{ resourceClaims(first: 100) { edges { node { name } } } }"


async def names(http) -> set[str]:
    body = (await http.post("/graphql", json={"query": CLAIMS})).json()
    data = body.get("data") or {}
    edges = (data.get("resourceClaims") or {}).get("edges") or []
    return {edge["node"]["name"] for edge in edges}


async def test_a_redis_emptied_under_the_watcher_is_rebuilt(tmp_path: Path, redis_url: str) -> None:
    world = small_world("east")
    kubeconfig = tmp_path / "kubeconfig"
    prefix = f"emptied-{os.getpid()}-{tmp_path.name}"
    settings = Settings(
        clusters=ClusterSettings(kubeconfig=str(kubeconfig)),
        store=StoreSettings(redis_url=redis_url, redis_prefix=prefix, lease_ttl=4),
    )
    redis = aioredis.Redis.from_url(redis_url)
    try:
        async with Simulator([world], kubeconfig_path=kubeconfig):
            app = mirror_app(settings)
            async with client(app) as http:
                expected = {c["metadata"]["name"] for c in world.list("resourceclaims")}

                async def whole() -> bool:
                    return await names(http) == expected

                await eventually(whole, within=30)
                keys = [key async for key in redis.scan_iter(match=f"{prefix}:*")]
                await redis.delete(*keys)
                await eventually(whole, within=40)  # a quiet cluster: nothing to write
                assert await redis.exists(Keys(prefix, "east").lease)  # taken again

                async def ready() -> bool:
                    return (await http.get("/readyz")).status_code == 200

                await eventually(ready, within=30)
    finally:
        async for key in redis.scan_iter(match=f"{prefix}:*"):
            await redis.delete(key)
        await redis.aclose()
