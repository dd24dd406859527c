"""The mirror on a real Redis Cluster, end to end: a `dra-mirror watch` process and an API
replica (`dra-mirror serve --no-watch`) given `--redis-url redis+cluster://…`, over a simulated
cluster. The API answers what the simulator holds (claims with their uids, slices with their
devices). Then, while claims are created and deleted every few milliseconds, the master of the
slot holding the mirrored cluster's keys is killed (SIGKILL): its replica is promoted, the
watcher's failed batches stay pending and are written to the new master, and once the churn
stops the API answers exactly what the simulator holds — nothing lost, nothing duplicated,
nothing stale — with the watcher still the same process. The seconds from the kill to the
promotion and to that answer are printed (`-s`); timeouts are failure bounds, not targets."""

from __future__ import annotations

import asyncio
import os
import sys
import time
import uuid
from pathlib import Path

import httpx
import pytest
from redis.crc import key_slot

from dra_mirror.service.sim.run import ClusterSpec, Simulator
from dra_mirror.service.sim.store import ClusterStore
from tests.redis.test_replicas import Replica, free_port, graphql, until
from tests.sim.conftest import claim_body, slice_body

REPO_ROOT = Path(__file__).resolve().parents[2]
CLUSTER = "alpha"
ANSWERS = """{
  resourceClaims(cluster: "alpha", first: 1000) { nodes { namespace name uid } }
  resourceSlices(cluster: "alpha") { name devices { name } }
}"""


async def start(url: str, prefix: str, *args: str) -> Replica:
    env = {
        **os.environ,
        "DRA_MIRROR_STORE_REDIS_PREFIX": prefix,
        "DRA_MIRROR_STORE_LEASE_TTL": "10",
        "DRA_MIRROR_ACCESS_INSECURE_NO_AUTH": "true",  # loopback only, no credentials
    }
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "dra_mirror.service.cli", *args, "--redis-url", url,
        cwd=REPO_ROOT, env=env, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    return Replica(process)


def truth(store: ClusterStore) -> dict:
    """What the API must answer, read from the simulator's own objects."""
    claims = sorted(
        (o["metadata"]["namespace"], o["metadata"]["name"], o["metadata"]["uid"])
        for o in store.list("resourceclaims")
    )
    slices = sorted(
        (o["metadata"]["name"], sorted(d["name"] for d in o["spec"].get("devices", [])))
        for o in store.list("resourceslices")
    )
    return {"claims": claims, "slices": slices}


async def answers(http: httpx.AsyncClient) -> dict | None:
    body = await graphql(http, ANSWERS)
    if body.get("errors"):
        return None
    data = body["data"]
    claims = sorted((c["namespace"], c["name"], c["uid"]) for c in data["resourceClaims"]["nodes"])
    slices = sorted(
        (s["name"], sorted(d["name"] for d in s["devices"])) for s in data["resourceSlices"]
    )
    return {"claims": claims, "slices": slices}


@pytest.mark.slow
async def test_mirror_on_redis_cluster_survives_a_master_failover(
    tmp_path: Path, redis_cluster
) -> None:
    prefix = f"test-cluster-{uuid.uuid4().hex[:8]}"
    store = ClusterStore(CLUSTER, seed=3)
    for number in range(3):
        store.create("resourceslices", slice_body(f"n{number}-gpu", f"n{number}", devices=4))
    for number in range(5):
        store.create("resourceclaims", claim_body(f"first-{number}"))
    port = free_port()
    replicas: list[Replica] = []
    async with (
        Simulator(
            [ClusterSpec(store)], kubeconfig_path=tmp_path / "kubeconfig", bookmark_interval=0.2
        ) as sim,
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as http,
    ):
        url = redis_cluster.url
        try:
            replicas.append(await start(url, prefix, "serve", "--no-watch", "--port", str(port)))
            assert sim.kubeconfig_path is not None
            watch = ("watch", "--kubeconfig", str(sim.kubeconfig_path), "--port", "0")
            replicas.append(await start(url, prefix, *watch))
            watcher = replicas[1]

            async def same() -> bool:
                try:
                    return await answers(http) == truth(store)
                except (httpx.TransportError, AssertionError):
                    return False

            await until(same, "the API answers what the simulator holds", within=60)

            # Churn: a claim created every 20 ms, the oldest deleted once 20 exist.
            churning = True
            written = 0

            async def churn() -> None:
                nonlocal written
                live: list[str] = []
                while churning:
                    name = f"churn-{written}"
                    store.create("resourceclaims", claim_body(name))
                    live.append(name)
                    written += 1
                    if len(live) > 20:
                        store.delete("resourceclaims", "default", live.pop(0))
                    await asyncio.sleep(0.02)

            churner = asyncio.ensure_future(churn())
            await asyncio.sleep(1.0)
            slot = key_slot(f"{{{CLUSTER}}}".encode())
            killed_at = time.monotonic()
            victim, promotion = await asyncio.to_thread(redis_cluster.kill_master, slot=slot)
            await asyncio.sleep(1.0)  # churn goes on against the promoted master
            churning = False
            await churner
            await until(same, "the API answers the simulator after the failover", within=60)
            converged = time.monotonic() - killed_at
            assert watcher.process.returncode is None, "the watcher retried; it did not exit"
            assert written > 50
            print(
                f"\nredis cluster failover: master :{victim.port} of slot {slot} killed; "
                f"replica promoted after {promotion:.1f}s; API equal to the simulator "
                f"{converged:.1f}s after the kill (churn stopped {promotion + 1:.1f}s after "
                f"it; {written} claims created)"
            )
        except BaseException:
            for number, replica in enumerate(replicas):
                print(f"--- replica {number} log:", *replica.log[-60:], sep="\n")
            raise
        finally:
            for replica in replicas:
                await replica.stop()
