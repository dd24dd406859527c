"""A watcher over Redis under its lease reports the same DRA series as the in-memory mirror of
the same cluster (its timed store still takes the lease's fencing token), and so does an app
reading them back from Redis."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import redis.asyncio as aioredis

from dra_mirror.service.runtime.compose import compose_app
from dra_mirror.service.runtime.mirror import mirror_app
from dra_mirror.service.settings import ClusterSettings, Settings, StoreSettings
from dra_mirror.service.sim.run import Simulator
from dra_mirror.service.stores.memory import MemoryStore
from dra_mirror.service.stores.redis import RedisStore
from tests.clusters.world import small_world
from tests.metrics.scrape import Scrape, client, scrape

DRA_FAMILIES = (
    "kube_deviceclass_info",
    "kube_resourceslice_info",
    "kube_resourceslice_devices_total",
    "kube_resourceclaim_status_reserved_for",
    "kube_resourceclaim_allocation_device_info",
    "kube_resourceclaim_info",
    "kube_resourceclaim_status_allocated",
    "kube_resourceclaim_status_reserved",
    "kube_pod_resourceclaim_info",
    "dra_mirror_devices",
    "dra_mirror_claims",
    "dra_mirror_claim_pending_seconds_count",
    "dra_mirror_idle_held_devices",
)


@contextlib.asynccontextmanager
async def mirrored(store, settings: Settings):
    app = mirror_app(settings, store=store)
    async with client(app) as http:
        await app.state.mirror.reactors.wait_synced()
        yield await scrape(http)


def dra_series(metrics: Scrape) -> dict:
    return {name: metrics.samples.get(name, {}) for name in DRA_FAMILIES}


async def test_redis_watcher_reports_what_the_memory_mirror_does(
    tmp_path: Path, redis_url: str
) -> None:
    world = small_world("east")
    kubeconfig = tmp_path / "kubeconfig"
    prefix = f"metrics-{os.getpid()}-{tmp_path.name}"
    clusters = ClusterSettings(kubeconfig=str(kubeconfig))
    try:
        async with Simulator([world], kubeconfig_path=kubeconfig):
            async with mirrored(MemoryStore(), Settings(clusters=clusters)) as memory:
                pass
            redis_settings = Settings(
                clusters=clusters, store=StoreSettings(redis_url=redis_url, redis_prefix=prefix)
            )
            store = RedisStore.from_url(redis_url, prefix=prefix)
            async with mirrored(store, redis_settings) as redis:
                # The composition root watches a Redis store under leases, whatever wraps it.
                keys = store.keys("east")
                assert await store.redis.get(keys.lease) is not None
                assert await store.redis.get(keys.fence) is not None
            # An app that watches nothing reads the series from Redis itself.
            reader = RedisStore.from_url(redis_url, prefix=prefix)
            async with client(compose_app(Settings(), store=reader)) as http:
                from_store = await scrape(http)
        expected = dra_series(memory)
        assert expected["kube_resourceclaim_info"] and expected["dra_mirror_devices"]
        assert dra_series(redis) == expected
        assert dra_series(from_store) == expected
        # Batches reached Redis through the timed store, under the lease's fence.
        assert redis.value("dra_mirror_store_apply_seconds_count", store="state") > 0
        assert redis.value("dra_mirror_cluster_synced", cluster="east") == 1
    finally:
        client_ = aioredis.Redis.from_url(redis_url)
        for key in [k async for k in client_.scan_iter(match=f"{prefix}:*")]:
            await client_.delete(key)
        await client_.aclose()
