"""`/readyz` of a whole mirror (`mirror_app`, what `serve` runs) in the cases where it said
ready while its answers were wrong:

* `serve --redis-url` to a Redis that does not answer (nothing listening; a frozen server):
  every query fails with STATE_STORE_UNAVAILABLE, so it is not ready — and says so within
  the readiness bound, not after the client's 30 s socket timeout;
* a restart after a crash mid-sync (SIGKILL of a real `dra-mirror serve`): the shared state
  says the cluster never finished its list, so the restarted replica is not ready while the
  dead holder's lease runs out, and ready once it took the cluster over and listed it;
* a 503 storm: the cluster is not connected; `readiness.cluster_down` decides — served stale
  with a flag in the body (the default), or not ready until it is back.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from pathlib import Path

import httpx
import pytest
import redis.asyncio as aioredis

from dra_mirror.service.http.readiness import WATCHER
from dra_mirror.service.runtime.mirror import mirror_app
from dra_mirror.service.settings import (
    ClusterSettings,
    ReadinessSettings,
    Settings,
    StoreSettings,
)
from dra_mirror.service.sim.run import ClusterSpec, Simulator
from dra_mirror.service.stores.memory import MemoryStore
from dra_mirror.service.stores.redis_keys import Keys, status_decoder
from tests.clusters.conftest import eventually
from tests.clusters.world import small_world
from tests.infra.servers import free_port
from tests.metrics.scrape import client
from tests.shutdown.test_sigterm import Mirror

CLAIMS = "{ resourceClaims(first: 10) { edges { node { name } } } }"
ACCESS = "authentication is OFF (--insecure-no-auth): anyone who reaches this port sees everything"
STORM = {"errors": {"code": 503, "count": 10**6, "retryAfter": 1}, "dropWatches": True}


async def ready(http: httpx.AsyncClient) -> tuple[int, dict]:
    answer = await http.get("/readyz")
    assert answer.headers["content-type"] == "application/json"
    return answer.status_code, answer.json()


@contextlib.asynccontextmanager
async def cleaned(redis_url: str, prefix: str):
    redis = aioredis.Redis.from_url(redis_url)
    try:
        yield redis
    finally:
        with contextlib.suppress(Exception):
            async for key in redis.scan_iter(match=f"{prefix}:*"):
                await redis.delete(key)
        await redis.aclose()


async def test_serve_over_an_unreachable_redis_is_not_ready(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    nowhere = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there
    settings = Settings(
        clusters=ClusterSettings(kubeconfig=str(kubeconfig)),
        store=StoreSettings(redis_url=nowhere),
    )
    async with Simulator([small_world("east")], kubeconfig_path=kubeconfig):
        async with client(mirror_app(settings)) as http:
            code, body = await ready(http)
            assert code == 503 and body["ready"] is False
            [reason] = body["reasons"]
            assert reason.startswith("state store unavailable: "), reason
            # what the readiness answer stands for: every query fails
            errors = (await http.post("/graphql", json={"query": CLAIMS})).json()["errors"]
            assert errors[0]["extensions"]["code"] == "STATE_STORE_UNAVAILABLE"


async def test_a_frozen_redis_is_not_ready_within_the_bound(
    tmp_path: Path, redis_url: str, redis_server
) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    prefix = f"readyz-frozen-{os.getpid()}-{tmp_path.name}"
    settings = Settings(
        clusters=ClusterSettings(kubeconfig=str(kubeconfig)),
        store=StoreSettings(redis_url=redis_url, redis_prefix=prefix),
    )
    pid = int((redis_server.workdir / "redis.pid").read_text())
    async with (
        cleaned(redis_url, prefix),
        Simulator([small_world("east")], kubeconfig_path=kubeconfig),
    ):
        app = mirror_app(settings)
        async with client(app) as http:
            await eventually(lambda: _is_ready(http), within=30)
            os.kill(pid, signal.SIGSTOP)  # the server keeps its connections and never answers
            try:
                code, body = await asyncio.wait_for(ready(http), timeout=20)
            finally:
                os.kill(pid, signal.SIGCONT)
            assert code == 503
            assert body["reasons"] == ["state store unavailable: no answer within 1 s"]
            await eventually(lambda: _is_ready(http), within=30)


async def _is_ready(http: httpx.AsyncClient) -> bool:
    return (await ready(http))[0] == 200


async def test_a_restart_after_a_crash_mid_sync_is_not_ready_until_listed(
    tmp_path: Path, redis_url: str
) -> None:
    world = small_world("east")
    kubeconfig = tmp_path / "kubeconfig"
    prefix = f"readyz-crash-{os.getpid()}-{tmp_path.name}"
    keys = Keys(prefix, "east")
    env = {"DRA_MIRROR_STORE_REDIS_PREFIX": prefix, "DRA_MIRROR_STORE_LEASE_TTL": "4"}
    # the claims never list: the first holder writes every other kind and never syncs
    spec = ClusterSpec(
        world, faults={"errors": {"code": 503, "count": 10**6, "path": "resourceclaims"}}
    )
    async with (
        cleaned(redis_url, prefix) as redis,
        Simulator([spec], kubeconfig_path=kubeconfig) as sim,
    ):
        first = Mirror(tmp_path, "--kubeconfig", str(kubeconfig), "--redis-url", redis_url, env=env)
        await first.start()
        try:

            async def partial(_http: httpx.AsyncClient) -> bool:
                raw = await redis.get(keys.status)
                written = await redis.hlen(keys.objects("Node"))
                return raw is not None and not status_decoder.decode(raw).synced and written > 0

            async with httpx.AsyncClient(base_url=first.url) as http:
                await first.until(http, partial)
        finally:
            first.kill()  # SIGKILL: its lease stays in Redis until its TTL runs out
            assert first.process is not None
            await first.process.wait()
        assert await redis.exists(keys.lease)

        settings = Settings(
            clusters=ClusterSettings(kubeconfig=str(kubeconfig)),
            store=StoreSettings(redis_url=redis_url, redis_prefix=prefix, lease_ttl=4),
        )
        app = mirror_app(settings)
        async with client(app) as http:
            code, body = await ready(http)
            assert app.state.mirror.reactors.by_name == {}  # the dead holder's lease is alive
            assert code == 503, body
            assert body["clusters"] == {"east": "syncing"}
            [reason] = body["reasons"]
            assert reason.startswith("east: not synced yet"), reason
            sim.served["east"].apply_faults({"errors": None})
            await eventually(lambda: _is_ready(http), within=40)
            assert (await ready(http))[1]["clusters"] == {"east": "synced"}


@pytest.mark.parametrize("rule", ["serve-stale", "not-ready"])
async def test_a_503_storm_follows_the_cluster_down_rule(tmp_path: Path, rule: str) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    settings = Settings(
        clusters=ClusterSettings(kubeconfig=str(kubeconfig)),
        readiness=ReadinessSettings(cluster_down=rule),
    )
    async with Simulator([small_world("east")], kubeconfig_path=kubeconfig) as sim:
        app = mirror_app(settings, store=MemoryStore())
        async with client(app) as http:
            await eventually(lambda: _is_ready(http), within=30)
            sim.served["east"].apply_faults(STORM)

            async def down() -> bool:
                [status] = await app.state.mirror.store.clusters()
                return not status.connected

            await eventually(down, within=20)
            code, body = await ready(http)
            if rule == "serve-stale":
                assert (code, body["ready"], body["reasons"]) == (200, True, [])
                assert body["stale"] == ["east"] and body["clusters"] == {"east": "stale"}
            else:
                assert code == 503 and body["stale"] == []
                [reason] = body["reasons"]
                assert reason.startswith("east: not connected (state as of "), reason
                assert "503" in reason
                assert body["clusters"] == {"east": "down"}
            sim.served["east"].apply_faults({"errors": None})

            async def back() -> bool:
                return await ready(http) == (200, {"ready": True, "reasons": [], "stale": [],
                    "clusters": {"east": "synced"}, "access": ACCESS})  # fmt: skip

            await eventually(back, within=40)


async def test_a_watcher_answers_for_the_clusters_it_holds(tmp_path: Path, redis_url: str) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    prefix = f"readyz-watcher-{os.getpid()}-{tmp_path.name}"
    settings = Settings(
        clusters=ClusterSettings(kubeconfig=str(kubeconfig)),
        store=StoreSettings(redis_url=redis_url, redis_prefix=prefix, lease_ttl=4),
    )
    spec = ClusterSpec(
        small_world("east"),
        faults={"errors": {"code": 503, "count": 10**6, "path": "resourceclaims"}},
    )
    async with (
        cleaned(redis_url, prefix),
        Simulator([spec], kubeconfig_path=kubeconfig) as sim,
    ):
        holder_app = mirror_app(settings, role=WATCHER)
        async with client(holder_app) as holder:
            taken = holder_app.state.mirror.reactors
            await eventually(lambda: "east" in taken.by_name, within=20)
            await eventually(lambda: taken.by_name["east"].status.error is not None, within=20)
            # it holds the cluster and has not listed the claims: not ready, and why
            code, body = await ready(holder)
            assert code == 503 and body["clusters"] == {"east": "syncing"}, body
            [reason] = body["reasons"]
            assert reason.startswith("east: not synced yet; error: "), reason
            standby_app = mirror_app(settings, role=WATCHER)
            async with client(standby_app) as standby:
                # a standby holds no lease: nothing it answers for is wrong
                assert standby_app.state.mirror.reactors.by_name == {}
                code, body = await ready(standby)
                assert (code, body["clusters"], body["reasons"]) == (200, {}, [])
                sim.served["east"].apply_faults({"errors": None})
                await eventually(lambda: _is_ready(holder), within=40)
                assert (await ready(holder))[1]["clusters"] == {"east": "synced"}
