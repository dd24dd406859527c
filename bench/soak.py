"""Soak: a deployment under steady churn for half an hour, watched for growth and lag.

    .venv/bin/python bench/soak.py [--minutes 30] [--clusters 10] [--events 2000]
                                   [--sim-processes 2] [--keep]

The simulator (what `dra-mirror sim` runs, with a shorter event window; `--sim-processes` of
them, the clusters dealt out between them) serves `--clusters` simulated clusters (60 nodes x 8 H100 each: at 2,000 writes/s about three quarters of the
GPUs are held) whose pods arrive so that the API servers make about `--events` writes per
second in all (a pod's life is ~11.5 writes: pod, claim, allocation, reservation, binding,
Running, then the deletions); `dra-mirror watch` mirrors
them into Redis and history into PostgreSQL; `dra-mirror serve --no-watch` answers GraphQL.
Every second a probe claim is created through one cluster's API (a class nothing matches: it
stays pending, costs no scheduling) and the time from the API server's answer until GraphQL
serves it is the end-to-end lag; it is deleted again. Every 10 s: API writes/s achieved (the simulators'
resourceVersions), RSS, open fds, threads and CPU of every process (simulator, watcher, API,
redis-server, PostgreSQL summed over its processes — one per connection), Redis clients and
memory, the history outbox backlog. At the end: lag p50/p99/max, CPU, each process's RSS
over the run (the first 5 minutes are warm-up) — flat means within ±10 % of its median after
warm-up — and whether connections or fds grew. A process that exits on its own stops the
soak at once with its exit status and the tail of its log (bench.watchdog). Not part of the
test run.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import redis.asyncio as aioredis
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.mirror_stack import ROOT, _stop
from bench.redis_common import free_port
from bench.watchdog import Watchdog, run_watched
from dra_mirror.service.history.migrate import migrate
from dra_mirror.service.history.redis_outbox import stream_key
from tests.infra import stack as servers

# writes the API servers make per pod of the soak's plan (pod, claim, allocation and
# reservation, binding, Running, then the deletions and releases; a fifth turn Succeeded
# first): 11.5 measured by folding the plan through one simulated cluster for 60 s
WRITES_PER_POD = 11.5
PROBE = """query Probe($c: String!, $n: String!) { resourceClaim(cluster: $c, namespace: "probe", name: $n) { uid } }"""


def scenario(clusters: int, events: float, lifetime: float, nodes: int = 60) -> dict:
    rate = events / WRITES_PER_POD / clusters
    template = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                "metadata": {"name": "h100", "namespace": "jobs"},
                "spec": {"spec": {"devices": {"requests": [
                    {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}}}}  # fmt: skip
    return {"name": "soak", "seed": 11, "clusters": [
        {"name": f"soak-{i:02d}", "versions": ["v1"], "namespaces": ["jobs", "probe"],
         "deviceClasses": ["gpu.nvidia.com"],
         "nodes": [{"name": f"soak-{i:02d}-n{{i}}", "count": nodes,
                    "devices": [{"profile": "nvidia-h100-80gb-hbm3", "count": 8}]}],
         "objects": [template],
         "churn": {"rate": rate, "lifetime": lifetime, "seed": 100 + i, "namespace": "jobs",
                   "succeed": 0.2, "linger": 3,
                   "shapes": [{"name": "gpu", "weight": 1,
                               "claims": [{"name": "gpu", "resourceClaimTemplateName": "h100"}]}]}}
        for i in range(clusters)]}  # fmt: skip


def probe_claim(name: str) -> dict:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": "probe"},
            "spec": {"devices": {"requests": [
                {"name": "x", "exactly": {"deviceClassName": "no-such-class"}}]}}}  # fmt: skip


def proc_figures(pid: int) -> tuple[int, int, int, float]:
    """RSS bytes, open fds, threads and CPU seconds so far of one process (Linux /proc)."""
    status = Path(f"/proc/{pid}/status").read_text()
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    rss = int(fields["VmRSS"].split()[0]) * 1024
    stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    cpu = (int(stat[11]) + int(stat[12])) / os.sysconf("SC_CLK_TCK")
    return rss, len(os.listdir(f"/proc/{pid}/fd")), int(fields["Threads"]), cpu


def children(pid: int) -> list[int]:
    found = [pid]
    for path in Path(f"/proc/{pid}/task").glob("*/children"):
        with contextlib.suppress(OSError):  # the task ended meanwhile
            for child in path.read_text().split():
                found.extend(children(int(child)))
    return found


def pid_of(pidfile: Path) -> int:
    return int(pidfile.read_text().split()[0])


class Soak:
    def __init__(self, args: argparse.Namespace, run_dir: Path) -> None:
        self.args = args
        self.run_dir = run_dir
        self.processes: dict[str, subprocess.Popen] = {}
        self.samples: list[dict] = []
        self.lags: list[float] = []
        self.probe_failures = 0
        self.stalls = 0
        self.dog = Watchdog(run_dir)  # a process that dies fails the soak at once

    def spawn(
        self, name: str, argv: list[str], env: dict[str, str], script: str | None = None
    ) -> subprocess.Popen:
        log = (self.run_dir / f"{name}.log").open("ab")
        command = [script] if script else ["-m", "dra_mirror.service.cli"]
        process = subprocess.Popen([sys.executable, *command, *argv],
                                   cwd=ROOT, env={**os.environ, **env}, stdout=log,
                                   stderr=subprocess.STDOUT)  # fmt: skip
        self.processes[name] = process
        self.dog.watch(name, process)
        return process

    async def start(self) -> None:
        self.env = await asyncio.to_thread(servers.up, self.run_dir)
        redis_url = self.env["DRA_MIRROR_TEST_REDIS_URL"]
        database_url = self.env["DRA_MIRROR_TEST_POSTGRES_URL"]
        await migrate(database_url)
        doc = scenario(self.args.clusters, self.args.events, self.args.lifetime)
        kubeconfig = self.run_dir / "sim.kubeconfig"
        # loopback only, no credentials: the bench's own processes
        quiet = {"DRA_MIRROR_LOG_LEVEL": "WARNING", "DRA_MIRROR_ACCESS_INSECURE_NO_AUTH": "true"}
        # the simulated clusters spread over --sim-processes simulators (one event loop, so
        # one core, each: ten clusters' writes in one loop left it no time to answer), each
        # with a shorter event window than its default 100,000 per cluster: at ~200
        # writes/s a cluster, each retained event (object and previous state) would
        # otherwise grow it by gigabytes before the window fills; the mirror reads live
        shards = max(1, min(self.args.sim_processes, self.args.clusters))
        parts = []
        for shard in range(shards):
            scenario_file = self.run_dir / f"soak-{shard}.yaml"
            scenario_file.write_text(
                yaml.safe_dump({**doc, "clusters": doc["clusters"][shard::shards]})
            )
            part = self.run_dir / f"sim-{shard}.kubeconfig"
            self.spawn(f"sim-{shard}", [str(scenario_file), str(part), str(self.args.sim_window)],
                       quiet, script=str(Path(__file__).with_name("soak_sim.py")))  # fmt: skip
            parts.append(part)
        self.parts = parts
        for _ in range(6000):  # 10 minutes; the watchdog ends a simulator's death at once
            if all(part.exists() for part in parts):
                break
            await asyncio.sleep(0.1)
        configs = [yaml.safe_load(part.read_text()) for part in parts]
        merged = {**configs[0]} | {
            field: [entry for config in configs for entry in config[field]]
            for field in ("clusters", "users", "contexts")
        }
        kubeconfig.write_text(yaml.safe_dump(merged, sort_keys=False))
        self.sims = {c["name"]: c["cluster"]["server"] for c in merged["clusters"]}
        mirror = ["--redis-url", redis_url, "--database-url", database_url]
        self.spawn("watcher", ["watch", "--kubeconfig", str(kubeconfig), "--port",
                               str(free_port()), *mirror], quiet)  # fmt: skip
        self.api_port = free_port()
        self.spawn("api", ["serve", "--no-watch", "--port", str(self.api_port), *mirror], quiet)
        self.redis = aioredis.Redis.from_url(redis_url)
        self.http = httpx.AsyncClient(timeout=30)
        self.pg_pid = pid_of(Path(self.env["DRA_MIRROR_TEST_PGDATA"]) / "postmaster.pid")
        self.redis_pid = pid_of(Path(self.env["DRA_MIRROR_TEST_REDIS_DIR"]) / "redis.pid")

    async def stop(self) -> None:
        for name, process in self.processes.items():
            self.dog.expect_exit(name)
            _stop(process)
        if hasattr(self, "http"):
            await self.http.aclose()
            await self.redis.aclose()
        await asyncio.to_thread(servers.down, self.env)

    async def rvs(self) -> dict[str, int]:
        found = {}
        for name, url in self.sims.items():
            try:
                status = (await self.http.get(f"{url}/sim/status", timeout=15)).json()
            except httpx.HTTPError:
                self.stalls += 1  # the simulator did not answer within the timeout
                continue
            found[name] = int(status["resourceVersion"])
        return found

    async def sample(self, previous: dict[str, int], interval: float) -> dict[str, int]:
        rvs = await self.rvs()
        writes = sum(max(0, rvs[c] - previous.get(c, rvs[c])) for c in rvs) / interval
        rvs = previous | rvs
        figures: dict[str, tuple[int, int, int, float]] = {}
        for name, process in self.processes.items():
            figures[name] = proc_figures(process.pid)
        for name, pid in (("redis", self.redis_pid), ("postgres", self.pg_pid)):
            parts = []
            for child in children(pid):  # PostgreSQL's backends come and go meanwhile
                with contextlib.suppress(OSError, KeyError):  # gone, or a zombie (no VmRSS)
                    parts.append(proc_figures(child))
            figures[name] = (sum(p[0] for p in parts), sum(p[1] for p in parts), len(parts),
                             sum(p[3] for p in parts))  # fmt: skip
        behind = 0.0
        for part in self.parts:
            with contextlib.suppress(OSError, ValueError):
                text = Path(f"{part}.behind").read_text()  # noqa: ASYNC240 (a few bytes)
                behind = max(behind, *json.loads(text).values())
        info = await self.redis.info()
        sample = {"t": time.monotonic(), "writes": writes, "procs": figures,
                  "redis_clients": info["connected_clients"], "redis_mem": info["used_memory"],
                  "backlog": await self.redis.xlen(stream_key()),
                  "lag_p99": _percentile(self.lags[-100:], 0.99), "behind": behind}  # fmt: skip
        self.samples.append(sample)
        rss = " ".join(f"{n} {f[0] / 2**20:.0f}M/{f[1]}fd" for n, f in figures.items())
        print(f"{time.strftime('%H:%M:%S')} writes/s {writes:7.0f}  backlog {sample['backlog']:6d}  "
              f"redis clients {sample['redis_clients']}  lag p99(last 100) "
              f"{sample['lag_p99']:.2f}s  sim behind plan {behind:.0f}s  {rss}", flush=True)  # fmt: skip
        return rvs

    async def probe(self, serial: int) -> None:
        cluster = sorted(self.sims)[serial % len(self.sims)]
        name = f"probe-{serial}"
        base = f"{self.sims[cluster]}/apis/resource.k8s.io/v1/namespaces/probe/resourceclaims"
        try:
            response = await self.http.post(base, json=probe_claim(name))
        except httpx.HTTPError:
            self.probe_failures += 1
            return
        if response.status_code >= 300:
            self.probe_failures += 1
            return
        began = time.monotonic()  # the API server has the claim: from here it is the mirror's
        api = f"http://127.0.0.1:{self.api_port}/graphql"
        while time.monotonic() - began < 60:
            try:
                found = await self.http.post(
                    api, json={"query": PROBE, "variables": {"c": cluster, "n": name}}
                )
                if found.status_code == 200 and (found.json().get("data") or {}).get(
                    "resourceClaim"
                ):
                    self.lags.append(time.monotonic() - began)
                    break
            except httpx.HTTPError:
                pass
            await asyncio.sleep(0.02)
        else:
            self.probe_failures += 1
        with contextlib.suppress(httpx.HTTPError):
            await self.http.delete(f"{base}/{name}")


def _percentile(values: list[float], fraction: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


async def run(soak: Soak, minutes: float) -> None:
    # the simulators build their clusters (minutes on a loaded machine), then the first sync
    for _ in range(120):
        if len(await soak.rvs()) == len(soak.sims):
            break
        await asyncio.sleep(5)
    soak.stalls = 0
    await asyncio.sleep(30)
    end = time.monotonic() + minutes * 60
    previous = await soak.rvs()
    last = time.monotonic()
    serial = 0
    probes: set[asyncio.Task] = set()
    while time.monotonic() < end:
        serial += 1
        task = asyncio.create_task(soak.probe(serial))
        probes.add(task)
        task.add_done_callback(probes.discard)
        await asyncio.sleep(1.0)
        if time.monotonic() - last >= 10:
            previous = await soak.sample(previous, time.monotonic() - last)
            last = time.monotonic()
    await asyncio.gather(*probes, return_exceptions=True)


def report(soak: Soak, warmup: float) -> None:
    if not soak.samples:
        return
    start = soak.samples[0]["t"]
    steady = [s for s in soak.samples if s["t"] - start >= warmup] or soak.samples
    writes = [s["writes"] for s in steady]
    behind = [s["behind"] for s in steady]
    print(f"\nAPI writes/s after warm-up: median {statistics.median(writes):.0f}, "
          f"min {min(writes):.0f}, max {max(writes):.0f}; the simulators' churn behind its "
          f"plan: median {statistics.median(behind):.1f}s, max {max(behind):.1f}s (growing: "
          f"the simulators lack the CPU to make the writes asked)")  # fmt: skip
    print(f"lag (probe claim created -> served by GraphQL): {len(soak.lags)} probes, "
          f"p50 {_percentile(soak.lags, 0.5):.3f}s, p99 {_percentile(soak.lags, 0.99):.3f}s, "
          f"max {max(soak.lags, default=float('nan')):.3f}s, {soak.probe_failures} failed; "
          f"the simulator did not answer a status request {soak.stalls} times")  # fmt: skip
    span = steady[-1]["t"] - steady[0]["t"] or 1.0
    for name in steady[0]["procs"]:
        cpu = (steady[-1]["procs"][name][3] - steady[0]["procs"][name][3]) / span * 100
        print(f"{name:<9} CPU {cpu:.0f} % of one core after warm-up")
    for name in steady[0]["procs"]:
        rss = [s["procs"][name][0] / 2**20 for s in steady]
        fds = [s["procs"][name][1] for s in steady]
        mid = statistics.median(rss)
        spread = max(abs(r - mid) for r in rss) / mid * 100 if mid else 0.0
        first, last = (
            statistics.median(rss[: max(1, len(rss) // 5)]),
            statistics.median(rss[-max(1, len(rss) // 5) :]),
        )
        print(f"{name:<9} RSS median {mid:7.1f} MiB, first fifth {first:7.1f}, last fifth "
              f"{last:7.1f} ({(last - first) / first * 100 if first else 0:+.1f} %), max "
              f"deviation {spread:.1f} % -> {'flat' if spread <= 10 else 'NOT flat'}; fds "
              f"{fds[0]} -> {fds[-1]} (max {max(fds)})")  # fmt: skip
    clients = [s["redis_clients"] for s in steady]
    backlog = [s["backlog"] for s in steady]
    print(f"redis clients {clients[0]} -> {clients[-1]} (max {max(clients)}); redis used_memory "
          f"{steady[0]['redis_mem'] / 2**20:.0f} -> {steady[-1]['redis_mem'] / 2**20:.0f} MiB; "
          f"history backlog max {max(backlog)}, last {backlog[-1]}")  # fmt: skip


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--clusters", type=int, default=10)
    parser.add_argument(
        "--events", type=float, default=2000.0, help="API writes per second, all clusters"
    )
    parser.add_argument("--lifetime", type=float, default=20.0)
    parser.add_argument(
        "--warmup", type=float, default=300.0, help="seconds left out of the RSS figures"
    )
    parser.add_argument("--sim-window", type=int, default=20_000,
                        help="events each simulated cluster retains for watches to resume")  # fmt: skip
    parser.add_argument("--sim-processes", type=int, default=2,
                        help="simulator processes the clusters are spread over")  # fmt: skip
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    run_dir = Path(tempfile.mkdtemp(prefix="dra-mirror-soak-", dir="/tmp"))
    print(f"run directory {run_dir}")
    soak = Soak(args, run_dir)
    try:
        try:
            async with soak.dog:
                await soak.start()
                await run(soak, args.minutes)
        finally:
            report(soak, min(args.warmup, args.minutes * 60 / 3))
            if hasattr(soak, "env"):
                await soak.stop()
    finally:
        if not args.keep:
            shutil.rmtree(run_dir, ignore_errors=True)


if __name__ == "__main__":
    run_watched(main, "soak")
