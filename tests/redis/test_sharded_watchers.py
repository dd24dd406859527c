"""Watchers sharded by cluster, end to end on a real Redis Cluster: ten simulated clusters, three
`dra-mirror watch` processes and an API replica (`serve --no-watch`). The leases spread (each
watcher holds some clusters, at most 4, no cluster twice); one watcher is killed (SIGKILL) and
its clusters are taken over by the other two once its leases expire; claims created after
the kill in every cluster reach the API, which answers exactly what the simulator holds. The
seconds from the kill to the last takeover are printed (`-s`); the lease TTL is 3 s here.
Timeouts are failure bounds, not speed targets."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sys
import time
import uuid
from pathlib import Path

import httpx
import pytest

from dra_mirror.service.sim.run import ClusterSpec, Simulator
from dra_mirror.service.sim.store import ClusterStore
from tests.redis.test_replicas import Replica, free_port, graphql, until
from tests.sim.conftest import claim_body

REPO_ROOT = Path(__file__).resolve().parents[2]
NAMES = [f"c{number}" for number in range(10)]
TTL = 3.0
CLAIMS = "{ resourceClaims(first: 1000) { nodes { cluster namespace name uid } } }"
_CLUSTER = re.compile(r"cluster=(\S+)")


async def start(url: str, prefix: str, *args: str) -> Replica:
    env = {
        **os.environ,
        "DRA_MIRROR_STORE_REDIS_PREFIX": prefix,
        "DRA_MIRROR_STORE_LEASE_TTL": str(TTL),
        "DRA_MIRROR_ACCESS_INSECURE_NO_AUTH": "true",  # loopback only, no credentials
    }
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "dra_mirror.service.cli", *args, "--redis-url", url,
        cwd=REPO_ROOT, env=env, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    return Replica(process)


def holding(replica: Replica) -> set[str]:
    """The clusters a watcher holds, from its log: taken, and not lost or handed back since."""
    held: set[str] = set()
    for line in replica.log:
        found = _CLUSTER.search(line)
        if found is None:
            continue
        if "lease taken" in line:
            held.add(found.group(1))
        elif "lease lost" in line or "lease handed back" in line:
            held.discard(found.group(1))
    return held


def truth(stores: list[ClusterStore]) -> list[tuple]:
    return sorted(
        (store.name, o["metadata"]["namespace"], o["metadata"]["name"], o["metadata"]["uid"])
        for store in stores
        for o in store.list("resourceclaims")
    )


async def answers(http: httpx.AsyncClient) -> list[tuple] | None:
    body = await graphql(http, CLAIMS)
    if body.get("errors"):
        return None
    nodes = body["data"]["resourceClaims"]["nodes"]
    return sorted((c["cluster"], c["namespace"], c["name"], c["uid"]) for c in nodes)


@pytest.mark.slow
async def test_ten_clusters_three_watchers_spread_and_take_over(
    tmp_path: Path, redis_cluster
) -> None:
    prefix = f"test-shards-{uuid.uuid4().hex[:8]}"
    stores = [ClusterStore(name, seed=number) for number, name in enumerate(NAMES)]
    for store in stores:
        store.create("resourceclaims", claim_body("before"))
    port = free_port()
    replicas: list[Replica] = []
    async with (
        Simulator(
            [ClusterSpec(s) for s in stores], kubeconfig_path=tmp_path / "kubeconfig",
            bookmark_interval=0.2,
        ) as sim,
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as http,
    ):  # fmt: skip
        url = redis_cluster.url
        try:
            replicas.append(await start(url, prefix, "serve", "--no-watch", "--port", str(port)))
            assert sim.kubeconfig_path is not None
            watch = ("watch", "--kubeconfig", str(sim.kubeconfig_path), "--port", "0")
            watchers = [await start(url, prefix, *watch) for _ in range(3)]
            replicas += watchers

            async def spread() -> bool:
                held = [holding(w) for w in watchers]
                every = [c for h in held for c in h]
                return sorted(every) == sorted(NAMES) and all(0 < len(h) <= 4 for h in held)

            # at most ceil(10 / 3) each: the first watcher took every cluster, then handed
            # back its surplus as the others joined
            await until(spread, "the leases spread over the three watchers", within=60)

            async def same() -> bool:
                try:
                    return await answers(http) == truth(stores)
                except (httpx.TransportError, AssertionError):
                    return False

            await until(same, "the API answers what the ten simulated clusters hold", within=60)
            victim = max(watchers, key=lambda w: len(holding(w)))
            orphaned = holding(victim)
            survivors = [w for w in watchers if w is not victim]
            killed_at = time.monotonic()
            os.kill(victim.process.pid, signal.SIGKILL)
            await victim.stop()
            for store in stores:
                store.create("resourceclaims", claim_body("after"))

            async def taken_over() -> bool:
                held = [holding(w) for w in survivors]
                return sorted(c for h in held for c in h) == sorted(NAMES)

            await until(taken_over, "the survivors hold every cluster", within=30)
            took = time.monotonic() - killed_at
            await until(same, "the claims created after the kill reach the API", within=30)
            answered = time.monotonic() - killed_at
            print(
                f"\nsharded watchers: {sorted(len(holding(w)) for w in survivors)} clusters "
                f"held after the kill of a watcher holding {len(orphaned)}; every cluster held "
                f"again {took:.1f}s after the kill (lease TTL {TTL:.0f}s), the API equal to "
                f"the simulators {answered:.1f}s after it"
            )
        except BaseException:
            for number, replica in enumerate(replicas):
                print(f"--- replica {number} log:", *replica.log[-40:], sep="\n")
            raise
        finally:
            for replica in replicas:
                await replica.stop()
