"""The production shape, end to end: two `dra-mirror watch` processes (real CLI, real
Kubernetes client) watching one simulated cluster into the suite's redis-server under a lease,
and an API replica (`dra-mirror serve --no-watch`, over HTTP) answering GraphQL from Redis. The holder is killed (SIGKILL) while the cluster changes: the standby takes
over, relists, and nothing stale survives. Then Redis itself stops: the API answers "state
store unavailable", and once Redis is back (empty: no persistence) the watchers rebuild it and
the API recovers by itself. Timeouts are failure bounds, not speed targets."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sys
import uuid
from pathlib import Path

import httpx

from dra_mirror.service.sim.run import ClusterSpec, Simulator
from dra_mirror.service.sim.store import ClusterStore
from tests.sim.conftest import claim_body

REPO_ROOT = Path(__file__).resolve().parents[2]
CLAIMS = '{ resourceClaims(cluster: "alpha") { nodes { namespace name } } }'


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Replica:
    """A `dra-mirror watch` or `serve --no-watch` subprocess; its log (stderr) is kept, and
    read to see the leases a watcher takes."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.log: list[str] = []
        self.reader = asyncio.ensure_future(self._read())

    @classmethod
    async def start(cls, redis_url: str, prefix: str, *args: str) -> Replica:
        env = {
            **os.environ,
            "DRA_MIRROR_STORE_REDIS_PREFIX": prefix,
            "DRA_MIRROR_STORE_LEASE_TTL": "1.5",
            "DRA_MIRROR_ACCESS_INSECURE_NO_AUTH": "true",  # loopback only, no credentials
        }
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "dra_mirror.service.cli", *args, "--redis-url", redis_url,
            cwd=REPO_ROOT, env=env, stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        return cls(process)

    async def _read(self) -> None:
        assert self.process.stderr is not None
        while raw := await self.process.stderr.readline():
            self.log.append(raw.decode(errors="replace").rstrip())

    def holds(self) -> bool:
        taken = [i for i, line in enumerate(self.log) if "lease taken" in line]
        lost = [i for i, line in enumerate(self.log) if "lease lost" in line]
        return bool(taken) and (not lost or taken[-1] > lost[-1])

    async def stop(self) -> None:
        if self.process.returncode is None:
            self.process.kill()
        await self.process.wait()
        await self.reader


async def graphql(http: httpx.AsyncClient, query: str) -> dict:
    response = await http.post("/graphql", json={"query": query})
    assert response.status_code == 200, response.text
    return response.json()


async def claim_names(http: httpx.AsyncClient) -> list[str] | None:
    body = await graphql(http, CLAIMS)
    if body.get("errors"):
        return None
    return sorted(n["name"] for n in body["data"]["resourceClaims"]["nodes"])


async def until(check, what: str, within: float = 30.0) -> None:
    for _ in range(int(within / 0.1)):
        if await check():
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"not within {within}s: {what}")


async def test_takeover_and_redis_outage(tmp_path: Path, redis_url: str, redis_server) -> None:
    prefix = f"test-replicas-{uuid.uuid4().hex[:8]}"
    cluster = ClusterStore("alpha", seed=1)
    for name in ("one", "two"):
        cluster.create("resourceclaims", claim_body(name))
    port = free_port()
    watchers: list[Replica] = []
    async with (
        Simulator(
            [ClusterSpec(cluster)], kubeconfig_path=tmp_path / "kubeconfig", bookmark_interval=0.2
        ) as sim,
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as http,
    ):
        api = await Replica.start(redis_url, prefix, "serve", "--no-watch", "--port", str(port))
        try:
            assert sim.kubeconfig_path is not None
            watch = ("watch", "--kubeconfig", str(sim.kubeconfig_path), "--port", "0")
            for _ in range(2):
                watchers.append(await Replica.start(redis_url, prefix, *watch))

            async def api_ready() -> bool:
                try:
                    return (await http.get("/readyz")).status_code == 200
                except httpx.TransportError:
                    return False

            await until(api_ready, "the API replica reads every cluster synced from Redis")

            async def names_are(expected: list[str]):
                async def check():
                    return await claim_names(http) == expected

                return check

            await until(await names_are(["one", "two"]), "the first sync reaches the API")
            holders = [w for w in watchers if w.holds()]
            assert len(holders) == 1, [w.log for w in watchers]
            holder = holders[0]
            standby = next(w for w in watchers if w is not holder)

            # The holder dies; meanwhile one claim is deleted and another created.
            os.kill(holder.process.pid, signal.SIGKILL)
            await holder.stop()
            cluster.delete("resourceclaims", "default", "one")
            cluster.create("resourceclaims", claim_body("three"))
            await until(await names_are(["three", "two"]), "the standby takes over and relists")
            assert standby.holds()
            status = (await graphql(http, "{ clusters { name status { synced } } }"))["data"]
            assert status == {"clusters": [{"name": "alpha", "status": {"synced": True}}]}

            # Redis stops: the API says so clearly; then Redis returns EMPTY.
            await asyncio.to_thread(redis_server.stop)
            unready = await http.get("/readyz")
            assert unready.status_code == 503 and "state store unavailable" in unready.text
            body = await graphql(http, CLAIMS)
            assert body["data"] is None
            assert body["errors"][0]["message"].startswith("state store unavailable")
            assert body["errors"][0]["extensions"]["code"] == "STATE_STORE_UNAVAILABLE"
            cluster.create("resourceclaims", claim_body("four"))
            await asyncio.to_thread(redis_server.start)
            await until(await names_are(["four", "three", "two"]), "the watcher rebuilds Redis")
            await until(api_ready, "the API replica is ready again by itself")
        except BaseException:
            for number, replica in enumerate([*watchers, api]):
                print(f"--- replica {number} log:", *replica.log[-60:], sep="\n")
            raise
        finally:
            for replica in [*watchers, api]:
                await replica.stop()
