"""SIGTERM to a real `dra-mirror serve` process: it exits 0 after flushing what it mirrored into
history, and with Redis it releases its cluster leases (a successor need not wait for the TTL).
`dra-mirror demo` and `dra-mirror sim` exit 0 on SIGTERM as well (without the fix, uvicorn's
re-raised signal killed them with status 143).

The simulated cluster runs in the test's event loop on loopback; the mirror is a subprocess of
the installed console script, exactly as a container runs it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import sqlite3
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis.asyncio as aioredis
import websockets
import yaml

from dra_mirror.service.sim.run import Simulator
from dra_mirror.service.stores.redis_keys import Keys
from tests.clusters.world import claim, small_world

DRA_MIRROR = Path(sys.executable).with_name("dra-mirror")
PATIENCE = 60.0  # seconds before a hung process fails the test (not a speed check)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Mirror:
    """`dra-mirror serve …` as a subprocess, its output in files."""

    def __init__(self, tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> None:
        self.port = free_port()
        self.args = ["serve", "--port", str(self.port), "--insecure-no-auth", *args]
        self.env = {**os.environ, **(env or {})}
        self.stdout = tmp_path / "stdout.log"
        self.stderr = tmp_path / "stderr.log"
        self.process: asyncio.subprocess.Process | None = None
        self.url = f"http://127.0.0.1:{self.port}"
        self.cwd = tmp_path  # what a command writes beside it (the demo's kubeconfig) stays here

    async def start(self) -> None:
        with self.stdout.open("wb") as out, self.stderr.open("wb") as err:
            self.process = await asyncio.create_subprocess_exec(
                str(DRA_MIRROR), *self.args, stdout=out, stderr=err, env=self.env, cwd=self.cwd
            )

    def log(self) -> str:
        return self.stderr.read_text() + self.stdout.read_text()

    async def until(self, http: httpx.AsyncClient, predicate: Any) -> None:
        """Poll until `await predicate(http)` is true; fail if the process dies or hangs."""
        async with asyncio.timeout(PATIENCE):
            while True:
                assert self.process is not None
                if self.process.returncode is not None:
                    raise AssertionError(f"dra-mirror exited early:\n{self.log()}")
                try:
                    if await predicate(http):
                        return
                except httpx.TransportError:
                    pass  # not listening yet
                await asyncio.sleep(0.1)

    async def terminate(self) -> int:
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        async with asyncio.timeout(PATIENCE):
            return await self.process.wait()

    def kill(self) -> None:
        if self.process is not None and self.process.returncode is None:
            self.process.kill()


@contextlib.asynccontextmanager
async def subscribed(url: str, selection: str):
    """A graphql-transport-ws subscription, acknowledged and open."""
    async with websockets.connect(
        url.replace("http", "ws", 1) + "/graphql", subprotocols=["graphql-transport-ws"]
    ) as socket:
        await socket.send(json.dumps({"type": "connection_init"}))
        assert json.loads(await socket.recv())["type"] == "connection_ack"
        query = f"subscription {{ {selection} }}"
        await socket.send(json.dumps({"id": "1", "type": "subscribe", "payload": {"query": query}}))
        yield socket


async def claim_names(http: httpx.AsyncClient) -> set[str]:
    query = "{ resourceClaims(first: 1000) { edges { node { name } } } }"
    answer = await http.post("/graphql", json={"query": query})
    return {edge["node"]["name"] for edge in answer.json()["data"]["resourceClaims"]["edges"]}


async def test_sigterm_flushes_history_and_exits_zero(tmp_path: Path) -> None:
    world = small_world("east")
    kubeconfig = tmp_path / "kubeconfig"
    database = tmp_path / "history.db"
    async with Simulator([world], kubeconfig_path=kubeconfig):
        mirror = Mirror(tmp_path, "--kubeconfig", str(kubeconfig), "--database-url", str(database))
        await mirror.start()
        try:
            async with httpx.AsyncClient(base_url=mirror.url) as http:
                await mirror.until(http, lambda h: _ready(h))
                # Changes the mirror sees right before the signal must reach history too.
                for i in range(20):
                    world.create("resourceclaims", claim(f"late-{i}"))
                expected = {c["metadata"]["name"] for c in world.list("resourceclaims")}

                async def mirrored(h: httpx.AsyncClient) -> bool:
                    return await claim_names(h) == expected

                await mirror.until(http, mirrored)
            # An open GraphQL subscription must not hold the shutdown up.
            async with subscribed(mirror.url, 'claimEvents(cluster: "east") { __typename }'):
                code = await mirror.terminate()
        finally:
            mirror.kill()
    assert code == 0, mirror.log()
    assert "Traceback" not in mirror.log()
    with sqlite3.connect(database) as db:
        rows = db.execute(
            "SELECT DISTINCT name FROM object_versions WHERE cluster = 'east' AND kind = 'ResourceClaim'"
        ).fetchall()
    assert {name for (name,) in rows} == expected


async def _ready(http: httpx.AsyncClient) -> bool:
    return (await http.get("/readyz")).status_code == 200


async def test_sigterm_releases_the_leases(tmp_path: Path, redis_url: str) -> None:
    world = small_world("east")
    kubeconfig = tmp_path / "kubeconfig"
    prefix = f"sigterm-{os.getpid()}-{tmp_path.name}"
    lease_key = Keys(prefix, "east").lease
    redis = aioredis.Redis.from_url(redis_url)
    env = {
        "DRA_MIRROR_STORE_REDIS_PREFIX": prefix,
        # A TTL far longer than the test: only a release can remove the key.
        "DRA_MIRROR_STORE_LEASE_TTL": "300",
    }
    try:
        async with Simulator([world], kubeconfig_path=kubeconfig):
            mirror = Mirror(
                tmp_path, "--kubeconfig", str(kubeconfig), "--redis-url", redis_url, env=env
            )
            await mirror.start()
            try:
                expected = {c["metadata"]["name"] for c in world.list("resourceclaims")}

                async def holding_and_mirrored(http: httpx.AsyncClient) -> bool:
                    held = await redis.exists(lease_key)
                    return bool(held) and await claim_names(http) == expected

                async with httpx.AsyncClient(base_url=mirror.url) as http:
                    await mirror.until(http, holding_and_mirrored)
                assert await redis.pttl(lease_key) > 200_000
                code = await mirror.terminate()
            finally:
                mirror.kill()
        assert code == 0, mirror.log()
        assert not await redis.exists(lease_key), "the lease outlived its holder"
    finally:
        for key in [k async for k in redis.scan_iter(match=f"{prefix}:*")]:
            await redis.delete(key)
        await redis.aclose()


@pytest.mark.slow
async def test_sigterm_stops_the_demo_with_exit_zero(tmp_path: Path) -> None:
    """The demo also writes its simulator's kubeconfig where it runs and prints it: a change
    made through that kubeconfig (kubectl's way) reaches the mirror; the file goes with it."""
    mirror = Mirror(tmp_path)
    mirror.args = ["demo", "--port", str(mirror.port)]
    kubeconfig = tmp_path / "demo.kubeconfig"
    await mirror.start()
    try:
        async with httpx.AsyncClient(base_url=mirror.url) as http:
            await mirror.until(http, _ready)
            assert {"shared-h200", "notebook-gpu"} <= await claim_names(http)

            async def announced(_http: httpx.AsyncClient) -> bool:
                return "kubectl --kubeconfig demo.kubeconfig --context east" in mirror.log()

            await mirror.until(http, announced)
            config = yaml.safe_load(kubeconfig.read_text())
            east = next(c["cluster"]["server"] for c in config["clusters"] if c["name"] == "east")
            deleted = await http.delete(
                f"{east}/apis/resource.k8s.io/v1/namespaces/research/resourceclaims/notebook-gpu"
            )
            assert deleted.status_code == 200, deleted.text

            async def gone(_http: httpx.AsyncClient) -> bool:
                return "notebook-gpu" not in await claim_names(http)

            await mirror.until(http, gone)  # the mirror watches the clusters the file names
        code = await mirror.terminate()
    finally:
        mirror.kill()
    # The demo's simulated clusters serve in the same process; they leave the signal to the
    # mirror, which stops its watches before the clusters go: no stream ends in an error.
    assert code == 0, mirror.log()
    assert "GraphiQL at" in mirror.log()  # it got as far as announcing itself
    assert "Traceback" not in mirror.log() and " ERROR " not in mirror.log(), mirror.log()
    assert not kubeconfig.exists()  # its servers are gone


async def test_sigterm_stops_the_simulator_with_exit_zero(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "sim.kubeconfig"
    mirror = Mirror(tmp_path)
    mirror.args = ["sim", "--scenario", "demo", "--kubeconfig-out", str(kubeconfig)]
    await mirror.start()
    try:

        async def serving(_http: httpx.AsyncClient) -> bool:
            return "kubeconfig written" in mirror.log()

        async with httpx.AsyncClient() as http:
            await mirror.until(http, serving)
        code = await mirror.terminate()
    finally:
        mirror.kill()
    assert code == 0, mirror.log()
    assert "Traceback" not in mirror.log()
