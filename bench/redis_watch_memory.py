"""Benchmark: the memory of `dra-mirror watch` during an initial sync into Redis.

    prlimit --as=8000000000 .venv/bin/python bench/redis_watch_memory.py
        [--scenario scale-5000] [--runs 1] [--redis-cluster] [--history] [--in-memory]
        [--timeline]

`dra-mirror sim --scenario …` in a child process, a private redis-server (or, with
`--redis-cluster`, a Redis Cluster of three masters with one replica each) and PostgreSQL from
tests.infra.stack, and `dra-mirror watch` into it (with `--history` it also records history:
the Redis stream outbox, drained into PostgreSQL by the same process; its peak is also
reported once the outbox is empty). The watcher's resident set is sampled every 50 ms from its
start until the cluster's status in Redis says synced, and for 3 s after. Printed per run: seconds and CPU seconds (user + system of the watcher) to
synced, peak RSS until synced and until 3 s later (the kernel's high-water mark, VmHWM), the
objects in Redis and the `used_memory` of the master holding them, per object. `--in-memory`
runs `dra-mirror serve` (state in its own memory, synced when /readyz answers 200) on the same
simulator instead, for comparison; `--timeline` prints the RSS sampled every second. Not part
of the test run; every run starts fresh servers.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import redis

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.redis_common import LIST_ORDER, free_port  # noqa: E402
from dra_mirror.service.stores.redis_keys import DEFAULT_PREFIX, Keys, status_decoder  # noqa: E402
from tests.infra import stack as servers  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def _status(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    return 0


def _cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def _wait_for(path: Path, process: subprocess.Popen, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"the simulator did not write {path}")
        time.sleep(0.1)


def _client(url: str) -> redis.Redis | redis.RedisCluster:
    if url.startswith("redis+cluster://"):
        return redis.RedisCluster.from_url(url.replace("redis+cluster://", "redis://"))
    return redis.Redis.from_url(url)


def _synced(client: redis.Redis | redis.RedisCluster, keys: Keys) -> bool:
    try:
        raw = client.get(keys.status)
    except redis.RedisError:
        return False
    return raw is not None and status_decoder.decode(raw).synced


def _ready(port: int) -> bool:
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as answer:
            return answer.status == 200
    except (urllib.error.URLError, OSError):
        return False


def one(scenario: str, run_dir: Path, *, cluster: bool, history: bool, memory: bool) -> dict:
    env = servers.up(run_dir, redis_cluster=cluster, cluster_node_timeout_ms=5000)
    sim = watcher = None
    try:
        url = env["DRA_MIRROR_TEST_REDIS_CLUSTER_URL" if cluster else "DRA_MIRROR_TEST_REDIS_URL"]
        kubeconfig = run_dir / "sim.kubeconfig"
        sim = subprocess.Popen(
            [sys.executable, "-m", "dra_mirror.service.cli", "sim", "--scenario", scenario,
             "--kubeconfig-out", str(kubeconfig)],
            cwd=ROOT, stdout=(run_dir / "sim.log").open("ab"), stderr=subprocess.STDOUT,
        )  # fmt: skip
        _wait_for(kubeconfig, sim, timeout=300)
        time.sleep(1.0)  # the kubeconfig is written once the server listens; let it settle
        port = free_port()
        args = ["watch", "--kubeconfig", str(kubeconfig), "--port", str(port), "--redis-url", url]
        if memory:
            args = ["serve", "--kubeconfig", str(kubeconfig), "--port", str(port)]
        if history:
            import asyncio

            from dra_mirror.service.history.migrate import migrate

            asyncio.run(migrate(env["DRA_MIRROR_TEST_POSTGRES_URL"]))
            args += ["--database-url", env["DRA_MIRROR_TEST_POSTGRES_URL"]]
        child_env = {**os.environ, "DRA_MIRROR_LOG_LEVEL": "WARNING",
                     "DRA_MIRROR_HISTORY_OUTBOX_CONSUMER": "watcher",
                     "DRA_MIRROR_ACCESS_INSECURE_NO_AUTH": "true"}  # fmt: skip
        client = _client(url)
        import yaml

        doc = yaml.safe_load((ROOT / f"service/sim/scenarios/{scenario}.yaml").read_text())
        keys = Keys(DEFAULT_PREFIX, doc["clusters"][0]["name"])
        began = time.monotonic()
        watcher = subprocess.Popen(
            [sys.executable, "-m", "dra_mirror.service.cli", *args], cwd=ROOT, env=child_env,
            stdout=(run_dir / "watcher.log").open("ab"), stderr=subprocess.STDOUT,
        )  # fmt: skip
        peak = 0
        timeline: list[tuple[float, int]] = []
        while not (_ready(port) if memory else _synced(client, keys)):
            if watcher.poll() is not None:
                raise RuntimeError(f"the watcher exited ({watcher.returncode}): {run_dir}")
            if time.monotonic() - began > 900:
                raise RuntimeError("not synced within 15 minutes")
            rss = _status(watcher.pid, "VmRSS")
            peak = max(peak, rss)
            if not timeline or time.monotonic() - began >= timeline[-1][0] + 1.0:
                timeline.append((time.monotonic() - began, rss))
            time.sleep(0.05)
        row = {"synced": time.monotonic() - began, "cpu": _cpu(watcher.pid),
               "hwm_sync": _status(watcher.pid, "VmHWM"), "sampled_peak": peak,
               "timeline": timeline}  # fmt: skip
        time.sleep(3.0)
        row["hwm_after"] = _status(watcher.pid, "VmHWM")
        if history:  # the watcher drains its outbox into PostgreSQL too: wait for that
            from dra_mirror.service.history.redis_outbox import stream_key

            while int(client.xlen(stream_key())) > 0 and time.monotonic() - began < 1800:
                time.sleep(0.2)
            row["drained"] = time.monotonic() - began
            row["hwm_drained"] = _status(watcher.pid, "VmHWM")
        row["rss_after"] = _status(watcher.pid, "VmRSS")
        row["objects"] = sum(int(client.hlen(keys.objects(kind))) for kind in LIST_ORDER)
        if isinstance(client, redis.RedisCluster):
            node = client.get_node_from_key(keys.status)
            info = client.info("memory", target_nodes=node)
        else:
            info = client.info("memory")
        row["used_memory"] = int(info["used_memory"])
        client.close()
        return row
    finally:
        for process in (watcher, sim):
            if process is not None and process.poll() is None:
                process.terminate()
                try:
                    process.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
        servers.down(env)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", default="scale-5000")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--redis-cluster", action="store_true")
    parser.add_argument("--history", action="store_true", help="record history (PostgreSQL)")
    parser.add_argument("--in-memory", action="store_true", help="`serve` in memory instead")
    parser.add_argument("--timeline", action="store_true", help="print RSS every second")
    parser.add_argument("--keep", action="store_true", help="keep the run directory (logs)")
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="dra-mirror-watch-memory-", dir="/tmp"))
    base.chmod(0o755)
    target = "Redis Cluster" if args.redis_cluster else "one redis-server"
    target = "serve's own memory" if args.in_memory else target
    print(f"{args.scenario} into {target}{', with history' if args.history else ''}; "
          f"load {os.getloadavg()[0]:.1f}; run directory {base}", flush=True)  # fmt: skip
    try:
        for run in range(args.runs):
            row = one(args.scenario, base / f"run-{run}", cluster=args.redis_cluster,
                      history=args.history, memory=args.in_memory)  # fmt: skip
            mib = 2**20
            print(f"run {run}: synced {row['synced']:.1f}s after start, {row['cpu']:.2f} CPU s; "
                  f"peak RSS {row['hwm_sync'] / mib:.0f} MiB at sync (sampled "
                  f"{row['sampled_peak'] / mib:.0f}), {row['hwm_after'] / mib:.0f} MiB 3 s later "
                  f"(RSS then {row['rss_after'] / mib:.0f}); {row['objects']:,} objects in Redis, "
                  f"used_memory {row['used_memory'] / mib:.0f} MiB "
                  f"({row['used_memory'] / max(1, row['objects']):,.0f} bytes an object); "
                  f"load {os.getloadavg()[0]:.1f}", flush=True)  # fmt: skip
            if "drained" in row:
                print(f"  outbox drained {row['drained']:.1f}s after start; peak RSS then "
                      f"{row['hwm_drained'] / mib:.0f} MiB", flush=True)  # fmt: skip
            if args.timeline:
                print("  RSS MiB by second: " + " ".join(
                    f"{at:.0f}s:{rss / mib:.0f}" for at, rss in row["timeline"]))  # fmt: skip
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
