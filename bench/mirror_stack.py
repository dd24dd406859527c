"""A whole dra-mirror deployment on loopback, for the fault suite and the soak. Not a benchmark.

    async with MirrorStack(scenario_doc, run_dir) as stack:
        stack.faults("alpha", {"expireWatches": 2})     # the simulator's fault API
        await stack.converged()                          # seconds until mirror == simulator

What runs: a private redis-server (or, `redis_cluster=True`, a Redis Cluster of three masters
with one replica each) and PostgreSQL (tests.infra.stack, the suite's own), the
simulator in this process (so that every write it makes is recorded as it happens:
`bench.mirror_checks.Reference`), `dra-mirror watch` (state into Redis, history appended
to the Redis stream and drained into PostgreSQL) and `dra-mirror serve --no-watch` (GraphQL,
also a standby drainer) as child processes, logs under `run_dir`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from redis.exceptions import ConnectionError as RedisConnectionError

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.redis_common import free_port  # noqa: E402
from bench.watchdog import ProcessExited, Watchdog  # noqa: E402
from dra_mirror.service.history.migrate import migrate  # noqa: E402
from dra_mirror.service.history.redis_outbox import stream_key  # noqa: E402
from dra_mirror.service.sim.run import Simulator  # noqa: E402
from dra_mirror.service.sim.scenario import build_world, parse_scenario  # noqa: E402
from dra_mirror.service.stores.redis_connect import connect  # noqa: E402
from tests.infra import stack as servers  # noqa: E402
from tests.infra.redis_cluster import RedisCluster  # noqa: E402
from tests.infra.servers import PostgresServer, RedisServer  # noqa: E402

CLAIMS = """query Claims($cluster: String, $after: String) {
  resourceClaims(cluster: $cluster, first: 1000, after: $after) {
    pageInfo { hasNextPage endCursor }
    nodes { namespace name uid state consumers { uid }
            allocation { devices { request shareID device { driver pool name } } } } } }"""
PODS = """query Pods($cluster: String, $after: String) {
  pods(cluster: $cluster, first: 1000, after: $after) {
    pageInfo { hasNextPage endCursor }
    nodes { namespace name uid phase nodeName } } }"""
OTHERS = """query Others($cluster: String) {
  resourceSlices(cluster: $cluster) { name driver pool { name generation } }
  deviceClasses(cluster: $cluster) { name }
  nodes(cluster: $cluster) { name }
  resourceClaimTemplates(cluster: $cluster) { namespace name } }"""


class MirrorStack:
    def __init__(
        self,
        scenario: dict,
        run_dir: Path,
        *,
        api_port: int | None = None,
        redis_cluster: bool = False,
        cluster_node_timeout_ms: int = 1000,
    ) -> None:
        self.run_dir = run_dir
        self.on_redis_cluster = redis_cluster  # three masters, one replica each (tests.infra)
        self.cluster_node_timeout_ms = cluster_node_timeout_ms
        self.scenario = parse_scenario(scenario)
        self.world = build_world(self.scenario)
        self.clusters = [c.name for c in self.scenario.clusters]
        self.api_port = api_port or free_port()
        self.watch_port = free_port()
        self.kubeconfig = run_dir / "sim.kubeconfig"
        self.env: dict[str, str] = {}
        self.watcher: subprocess.Popen | None = None
        self.api: subprocess.Popen | None = None
        self._churn: asyncio.Task | None = None
        self.sim: Simulator | None = None
        # called right before a fault is applied (the reference reads the log a restart clears)
        self.before_faults: Callable[[], None] | None = None
        # a mirror process that exits on its own fails the bench at once (ProcessExited: its
        # exit status and the tail of its log), whatever the bench is waiting for
        self.dog = Watchdog(run_dir)
        self.comparisons = 0  # of the last `converged`

    # --- lifecycle -------------------------------------------------------------------------

    async def __aenter__(self) -> MirrorStack:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.env = await asyncio.to_thread(
            servers.up, self.run_dir, redis_cluster=self.on_redis_cluster,
            cluster_node_timeout_ms=self.cluster_node_timeout_ms,
        )  # fmt: skip
        self.redis_url = self.env[
            "DRA_MIRROR_TEST_REDIS_CLUSTER_URL"
            if self.on_redis_cluster
            else "DRA_MIRROR_TEST_REDIS_URL"
        ]
        self.database_url = self.env["DRA_MIRROR_TEST_POSTGRES_URL"]
        await migrate(self.database_url)
        self.sim = Simulator(self.world.specs, kubeconfig_path=self.kubeconfig)
        await self.sim.start()
        self.redis = connect(self.redis_url)
        self.http = httpx.AsyncClient(base_url=f"http://127.0.0.1:{self.api_port}", timeout=30)
        await self.dog.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        try:
            await self.dog.__aexit__(*exc)  # raises ProcessExited if a mirror process died
        finally:
            self.pause()
            for name, process in (("watcher", self.watcher), ("api", self.api)):
                self.dog.expect_exit(name)
                _stop(process)
            await self.http.aclose()
            await self.redis.aclose()
            if self.sim is not None:
                await self.sim.stop()
            await asyncio.to_thread(servers.down, self.env)

    async def start_mirror(self) -> None:
        await self.start_watcher()
        await self.start_api()

    async def start_api(self) -> None:
        for _ in range(3):  # a free port can be taken before the server binds it: another one
            self.api = self._spawn(["serve", "--no-watch", "--port", str(self.api_port)], "api")
            if await _survives(self.api):
                self.dog.watch("api", self.api)
                return
            self.api_port = free_port()
            await self.http.aclose()
            self.http = httpx.AsyncClient(base_url=f"http://127.0.0.1:{self.api_port}", timeout=30)
        raise ProcessExited("api", self.api.returncode, self.run_dir / "api.log")

    async def start_watcher(self) -> None:
        contexts = [arg for name in self.clusters for arg in ("--context", name)]
        for _ in range(3):
            self.watcher = self._spawn(
                ["watch", "--kubeconfig", str(self.kubeconfig), *contexts, "--port",
                 str(self.watch_port)], "watcher",
            )  # fmt: skip
            if await _survives(self.watcher):
                self.dog.watch("watcher", self.watcher)
                return
            self.watch_port = free_port()
        raise ProcessExited("watcher", self.watcher.returncode, self.run_dir / "watcher.log")

    def kill_watcher(self) -> None:
        """SIGKILL: the watcher dies wherever it is, mid-batch included."""
        if self.watcher is not None:
            self.dog.expect_exit("watcher")
            self.watcher.send_signal(signal.SIGKILL)
            self.watcher.wait()

    def _spawn(self, args: list[str], name: str) -> subprocess.Popen:
        # the bench's own processes on loopback: no credentials
        env = {**os.environ, "DRA_MIRROR_LOG_LEVEL": "WARNING",
               "DRA_MIRROR_HISTORY_OUTBOX_CONSUMER": name,
               "DRA_MIRROR_ACCESS_INSECURE_NO_AUTH": "true"}  # fmt: skip
        log = (self.run_dir / f"{name}.log").open("ab")
        return subprocess.Popen(
            [sys.executable, "-m", "dra_mirror.service.cli", *args,
             "--redis-url", self.redis_url, "--database-url", self.database_url],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip

    def resume(self) -> None:
        """Let the world move: the scenario's churn (pods arriving and leaving)."""
        if self._churn is None or self._churn.done():
            self._churn = asyncio.create_task(self.world.run(), name="churn")

    def pause(self) -> None:
        if self._churn is not None:
            self._churn.cancel()
            self._churn = None

    # --- faults and servers ----------------------------------------------------------------

    def faults(self, cluster: str, changes: dict[str, Any]) -> None:
        assert self.sim is not None
        if self.before_faults is not None:
            self.before_faults()
        self.sim.served[cluster].apply_faults(changes)

    async def drop_watches(self, cluster: str) -> None:
        """End every open watch stream of the cluster's API server now (a dropped connection:
        the watcher resumes from its resourceVersion). Faults set for watches apply to the
        streams that start afterwards, so a stage drops the running ones first."""
        assert self.sim is not None
        served = self.sim.served[cluster]
        served.closing = True
        served.notifier.wake()
        await asyncio.sleep(0.2)
        served.closing = False

    def postgres(self) -> PostgresServer:
        return PostgresServer.from_env(self.env)

    def redis_server(self) -> RedisServer:
        return RedisServer.from_env(self.env)

    def redis_cluster(self) -> RedisCluster:
        cluster = RedisCluster.from_env(self.env)
        if cluster is None:
            raise RuntimeError("the stack runs on one redis-server (redis_cluster=False)")
        return cluster

    async def outbox_backlog(self) -> int:
        for attempt in range(3):  # a pooled connection a restarted Redis closed: once more
            try:
                return int(await self.redis.xlen(stream_key()))
            except RedisConnectionError:
                if attempt == 2:
                    raise
                await asyncio.sleep(0.5)
        raise AssertionError("unreachable")

    # --- reading both sides ----------------------------------------------------------------

    async def graphql(self, query: str, variables: dict[str, Any]) -> dict[str, Any]:
        response = await self.http.post("/graphql", json={"query": query, "variables": variables})
        response.raise_for_status()
        body = response.json()
        if body.get("errors"):
            raise RuntimeError(f"GraphQL errors: {body['errors']}")
        return body["data"]

    async def _paged(self, query: str, field: str, cluster: str) -> list[dict]:
        found: list[dict] = []
        after = None
        while True:
            data = (await self.graphql(query, {"cluster": cluster, "after": after}))[field]
            found.extend(data["nodes"])
            if not data["pageInfo"]["hasNextPage"]:
                return found
            after = data["pageInfo"]["endCursor"]

    async def mirror_state(self, cluster: str) -> dict[tuple, Any]:
        """What the mirror serves of one cluster, object by object, through GraphQL."""
        claims = await self._paged(CLAIMS, "resourceClaims", cluster)
        pods = await self._paged(PODS, "pods", cluster)
        others = await self.graphql(OTHERS, {"cluster": cluster})
        state: dict[tuple, Any] = {}
        for c in claims:
            devices = sorted(
                (d["request"], d["device"]["driver"], d["device"]["pool"], d["device"]["name"],
                 d["shareID"] or "")
                for d in (c["allocation"] or {}).get("devices", [])
            )  # fmt: skip
            consumers = sorted(u["uid"] for u in c["consumers"])
            state[("ResourceClaim", c["namespace"], c["name"])] = (c["uid"], c["state"], devices,
                                                                  consumers)  # fmt: skip
        for p in pods:
            state[("Pod", p["namespace"], p["name"])] = (p["uid"], p["phase"], p["nodeName"])
        for s in others["resourceSlices"]:
            state[("ResourceSlice", "", s["name"])] = (s["driver"], s["pool"]["name"],
                                                       s["pool"]["generation"])  # fmt: skip
        for kind, field in (("DeviceClass", "deviceClasses"), ("Node", "nodes")):
            for item in others[field]:
                state[(kind, "", item["name"])] = ()
        for t in others["resourceClaimTemplates"]:
            state[("ResourceClaimTemplate", t["namespace"], t["name"])] = ()
        return state

    def sim_state(self, cluster: str) -> dict[tuple, Any]:
        """The same view of the simulator's own objects (its store, not its HTTP lists)."""
        assert self.sim is not None
        store = self.sim.clusters[cluster]
        state: dict[tuple, Any] = {}
        for obj in store.list("resourceclaims"):
            meta, status = obj["metadata"], obj.get("status") or {}
            results = ((status.get("allocation") or {}).get("devices") or {}).get("results") or []
            devices = sorted((r["request"], r["driver"], r["pool"], r["device"], r.get("shareID") or "")
                             for r in results)  # fmt: skip
            consumers = sorted(
                r["uid"] for r in status.get("reservedFor") or [] if r.get("resource") == "pods"
            )
            if meta.get("deletionTimestamp"):
                claim_state = "DELETING"
            elif status.get("reservedFor"):
                claim_state = "RESERVED"
            else:
                claim_state = "ALLOCATED" if status.get("allocation") else "PENDING"
            state[("ResourceClaim", meta["namespace"], meta["name"])] = (meta["uid"], claim_state,
                                                                         devices, consumers)  # fmt: skip
        for obj in store.list("pods"):
            meta = obj["metadata"]
            state[("Pod", meta["namespace"], meta["name"])] = (
                meta["uid"], (obj.get("status") or {}).get("phase") or "Pending",
                (obj.get("spec") or {}).get("nodeName"))  # fmt: skip
        for obj in store.list("resourceslices"):
            spec = obj["spec"]
            state[("ResourceSlice", "", obj["metadata"]["name"])] = (
                spec["driver"], spec["pool"]["name"], spec["pool"]["generation"])  # fmt: skip
        for plural, kind in (("deviceclasses", "DeviceClass"), ("nodes", "Node")):
            for obj in store.list(plural):
                state[(kind, "", obj["metadata"]["name"])] = ()
        for obj in store.list("resourceclaimtemplates"):
            state[
                ("ResourceClaimTemplate", obj["metadata"]["namespace"], obj["metadata"]["name"])
            ] = ()
        return state

    async def differences(self, cluster: str) -> list[str]:
        mirror, truth = await self.mirror_state(cluster), self.sim_state(cluster)
        diffs = [f"missing {k}" for k in truth.keys() - mirror.keys()]
        diffs += [f"extra {k}" for k in mirror.keys() - truth.keys()]
        diffs += [f"differs {k}: mirror {mirror[k]} != api {truth[k]}"
                  for k in truth.keys() & mirror.keys() if mirror[k] != truth[k]]  # fmt: skip
        return sorted(diffs)

    async def converged(self, within: float = 180.0) -> tuple[float, list[str]]:
        """Seconds until every cluster's mirror equals the simulator (the world paused), and
        what still differed if it never did."""
        began = time.monotonic()
        diffs: list[str] = []
        self.comparisons = 0
        while time.monotonic() - began < within:
            self.comparisons += 1  # how many whole comparisons it took (each costs seconds)
            try:
                diffs = [f"{c}: {d}" for c in self.clusters for d in await self.differences(c)]
            except (httpx.HTTPError, RuntimeError) as error:
                diffs = [f"api not answering: {error}"]
            if not diffs:
                return time.monotonic() - began, []
            await asyncio.sleep(0.5)
        return time.monotonic() - began, diffs

    async def drained(self, within: float = 300.0) -> float:
        """Seconds until the history outbox is empty (every entry committed to SQL)."""
        began = time.monotonic()
        while await self.outbox_backlog() > 0:
            if time.monotonic() - began > within:
                raise TimeoutError(f"history backlog still {await self.outbox_backlog()}")
            await asyncio.sleep(0.5)
        return time.monotonic() - began


async def _survives(process: subprocess.Popen, seconds: float = 3.0) -> bool:
    """Whether the process is still running `seconds` after it started (it binds its port)."""
    for _ in range(int(seconds * 10)):
        if process.poll() is not None:
            return False
        await asyncio.sleep(0.1)
    return True


def _stop(process: subprocess.Popen | None) -> None:
    if process is None or process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=15)
        return
    process.kill()
    process.wait()
