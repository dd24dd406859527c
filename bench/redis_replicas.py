"""Benchmark: two API replicas over one Redis, ten clusters of 500 nodes, 32 clients; or, with
`--nodes N`, API replicas beside a real watcher of one N-node cluster under a dashboard load.

    .venv/bin/python bench/redis_replicas.py [--clusters 10] [--requests 4000] [--clients 32]
    flock /work/.bench.lock prlimit --as=8000000000 .venv/bin/python bench/redis_replicas.py \
        --nodes 20000 [--redis-cluster] [--readers 2] [--openings 20]

This process builds the scale-500 scenario once, normalizes it under ten cluster names and
writes each cluster through `RedisStore.apply` (as a watcher would after its lists) into a fresh
redis-server on loopback. Two `dra-mirror serve --no-watch` processes then serve GraphQL from
that Redis, and this process is the load generator (the minimal HTTP/1.1 clients of
bench/graphql_whoholds.py), half of the clients on each replica:

* floor: `GET /healthz` through the same stack and clients;
* `whoHolds(device: <uuid>, cluster: <c>)` — p50/p99 (target p50 ≤ 5 ms);
* one node's page (pods, slices, devices > allocations > claims > consumers) — p50/p99
  (target p50 ≤ 15 ms);
* both again with one client on one replica (unloaded latency).

Everything shares the machine's cores (two here): the figures include that contention.

`--nodes N` (bench/page_server.py's generated scenario: N nodes x 8 GPUs, 8 pods a node, 5 %
pending; pages recorded once, served from memory): PostgreSQL-less servers from
tests.infra.stack (one redis-server, or `--redis-cluster`: three masters with one replica
each), `dra-mirror watch` into Redis — seconds to synced (its status in Redis) and its peak RSS
(VmHWM) — then `--readers` `dra-mirror serve --no-watch` replicas beside it. Measured on the
first replica, one client, each document timed (ms, p50/p99, errors kept):

* floor: `GET /healthz` through the same stack and client;
* each list or count on its own (devices, by status, pending and idle claims, a claims page,
  `Cluster.counts`) — target p50 <= 5 ms at 20,000 nodes — and `whoHolds` by uuid
  (`--who-holds` documents, p50 <= 1.2 ms);
* the dashboard load (bench/redis_dashboard.py): `--openings` openings of each screen
  (Overview, claims list page, device page, node page, findDevices, explainClaim);
* then every replica under `--clients` clients opening random screens: each replica's RSS
  (MiB) at ready, after each phase and its peak (VmHWM) — target <= 150 MiB, flat in N.

Also printed: Redis `used_memory` of every master (MiB) and the objects mirrored.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx

from bench.graphql_whoholds import NODE_PAGE, WHO_HOLDS, line, run_load
from bench.redis_common import (
    LIST_ORDER,
    PLURALS,
    free_port,
    redis_server,
    repo_root,
)

WHO_HOLDS_IN = WHO_HOLDS.replace("$uuid: String!)", "$uuid: String!, $cluster: String)").replace(
    "whoHolds(device: $uuid)", "whoHolds(device: $uuid, cluster: $cluster)"
)


async def fill(url: str, prefix: str, clusters: int) -> tuple[int, list, list]:
    from dra_mirror.service.model.normalize import normalize
    from dra_mirror.service.sim.scenario import build_world, load_scenario
    from dra_mirror.service.stores.protocols import ClusterStatus, Relation
    from dra_mirror.service.stores.redis import RedisStore

    world = build_world(load_scenario("scale-500"))
    [(_, source)] = world.stores.items()
    raw = {kind: list(source.iter_objects(plural)) for kind, plural in PLURALS.items()}
    store = RedisStore.from_url(url, prefix=prefix)
    count = 0
    holds: list[tuple[str, str]] = []
    nodes: list[tuple[str, str]] = []
    for number in range(clusters):
        name = f"c{number}"
        index = store.open_index(name)
        for kind in LIST_ORDER:
            records = [normalize(kind, r, cluster=name) for r in raw[kind]]
            count += len(records)
            await store.apply(index.resync(kind, records, at="2026-11-30T00:00:00Z"))
        await store.set_status(ClusterStatus(name=name, connected=True, synced=True))
        entries = await store.list_devices(cluster=name)
        found = await store.lookup(Relation.DEVICE_ALLOCATIONS, [e.key for e in entries])
        holds.extend(
            (e.device.uuid, name)
            for e, h in zip(entries, found, strict=True)
            if h and e.device.uuid
        )
        nodes.extend((name, n.meta.name) for n in await store.list("Node", cluster=name))
    info = await store.redis.info("memory")
    print(f"redis used_memory: {int(info['used_memory']) / 2**20:,.0f} MiB")
    await store.close()
    return count, holds, nodes


def start_replica(url: str, prefix: str, port: int) -> subprocess.Popen:
    env = {**os.environ, "DRA_MIRROR_STORE_REDIS_PREFIX": prefix, "DRA_MIRROR_LOG_LEVEL": "WARNING"}
    return subprocess.Popen(
        [sys.executable, "-m", "dra_mirror.service.cli", "serve", "--no-watch", "--redis-url", url,
         "--port", str(port), "--insecure-no-auth"],
        cwd=repo_root(), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip


async def spread(ports: list[int], requests: list, clients: int) -> list[float]:
    """`clients` clients, half on each replica."""
    per = [requests[i :: len(ports)] for i in range(len(ports))]
    results = await asyncio.gather(
        *(
            run_load(port, share, clients // len(ports))
            for port, share in zip(ports, per, strict=True)
        )
    )
    return [t for timings in results for t in timings]


async def bench(ports: list[int], holds: list, nodes: list, args: argparse.Namespace) -> None:
    rng = random.Random(1)
    async with httpx.AsyncClient() as http:
        for port in ports:
            for _ in range(300):
                try:
                    if (await http.get(f"http://127.0.0.1:{port}/readyz")).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                await asyncio.sleep(0.1)
    who = [
        (WHO_HOLDS_IN, {"uuid": uuid, "cluster": cluster})
        for uuid, cluster in (rng.choice(holds) for _ in range(args.requests))
    ]
    pages = [
        (NODE_PAGE, {"cluster": c, "node": n})
        for c, n in (rng.choice(nodes) for _ in range(args.pages))
    ]
    await spread(ports, who[:400] + pages[:40], args.clients)  # warm-up (parser caches)
    began = time.perf_counter()
    floor = await spread(ports, [("healthz", {})] * args.requests, args.clients)
    floor_s = time.perf_counter() - began
    began = time.perf_counter()
    loaded_who = await spread(ports, who, args.clients)
    who_s = time.perf_counter() - began
    began = time.perf_counter()
    loaded_pages = await spread(ports, pages, args.clients)
    pages_s = time.perf_counter() - began
    single_who = await run_load(ports[0], who[:400], 1)
    single_pages = await run_load(ports[0], pages[:100], 1)
    print(line(f"floor: GET /healthz, {args.clients} clients", floor, seconds=floor_s))
    print(line(f"whoHolds, {args.clients} clients", loaded_who, "(target p50 <= 5 ms)", who_s))
    print(
        line(f"node page, {args.clients} clients", loaded_pages, "(target p50 <= 15 ms)", pages_s)
    )
    print(line("whoHolds, 1 client (unloaded)", single_who))
    print(line("node page, 1 client (unloaded)", single_pages))


def _status(pid: int, field: str) -> int:
    """A /proc/PID/status figure in bytes (VmRSS, VmHWM)."""
    for text in Path(f"/proc/{pid}/status").read_text().splitlines():
        if text.startswith(field + ":"):
            return int(text.split()[1]) * 1024
    return 0


def _mib(value: int) -> str:
    return f"{value / 2**20:,.0f} MiB"


def _client(url: str) -> Any:
    import redis

    if url.startswith("redis+cluster://"):
        return redis.RedisCluster.from_url(url.replace("redis+cluster://", "redis://"))
    return redis.Redis.from_url(url)


def _samples(client: Any, cluster: str) -> Any:
    """Nodes, claims, pending claims and held devices' uuids, drawn from what Redis holds
    (fields every key layout has)."""
    from bench.redis_dashboard import Samples
    from dra_mirror.service.model.records import PENDING
    from dra_mirror.service.stores.redis_keys import (
        DEFAULT_PREFIX,
        Keys,
        entry_decoder,
        record_decoder,
    )

    keys = Keys(DEFAULT_PREFIX, cluster)
    nodes = [f.decode().partition("/")[2] for f in client.hrandfield(keys.objects("Node"), 200)]
    raw = client.hrandfield(keys.objects("ResourceClaim"), 4000, withvalues=True)
    claims = [record_decoder.decode(v) for v in raw[1::2]]
    named = [(c.meta.namespace, c.meta.name) for c in claims]
    pending = [(c.meta.namespace, c.meta.name) for c in claims if c.state == PENDING]
    raw = client.hrandfield(keys.devices, 2000, withvalues=True)
    entries = [entry_decoder.decode(v) for v in raw[1::2]]
    statuses = client.hmget(keys.device_status, raw[0::2])
    uuids = [e.device.uuid for e, st in zip(entries, statuses, strict=True)
             if e.device.uuid and st == b"held"]  # fmt: skip
    return Samples(cluster, nodes, named, pending, uuids)


class Peaks:
    """Each process's resident set sampled every 50 ms in a thread: the largest seen."""

    def __init__(self, pids: dict[str, int]) -> None:
        import threading

        self.pids = pids
        self.peak = dict.fromkeys(pids, 0)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            for name, pid in self.pids.items():
                try:
                    self.peak[name] = max(self.peak[name], _status(pid, "VmRSS"))
                except OSError:
                    pass

    def stop(self) -> dict[str, int]:
        self._stop.set()
        self._thread.join()
        return self.peak


def _rss(readers: dict[str, subprocess.Popen]) -> str:
    return ", ".join(f"{n} {_mib(_status(p.pid, 'VmRSS'))}" for n, p in readers.items())


async def _phase(port: int, name: str, requests: list, target: str = "") -> None:
    from bench.redis_dashboard import Run, timed

    run = Run()
    await timed(port, requests, run)
    errors = f"  {len(run.errors)} errors: {sorted(set(run.errors))[:2]}" if run.errors else ""
    print(line(name, run.timings, target) + errors, flush=True)


async def dashboard(ports: list[int], readers: dict[str, subprocess.Popen], samples: Any,
                    args: argparse.Namespace) -> None:  # fmt: skip
    from bench.redis_dashboard import Run, counts, screens, timed

    rng = random.Random(1)
    port = ports[0]
    opened = [screens(samples, rng) for _ in range(args.openings)]
    await _phase(port, "warm-up (every screen once)", [r for s in opened[0].values() for r in s])
    print(f"reader RSS after the warm-up: {_rss(readers)}", flush=True)
    await _phase(port, "floor: GET /healthz", [("healthz", {})] * 200)
    for name, requests in counts(samples.cluster).items():
        await _phase(port, name, requests * max(1, 50 // len(requests)), "(target p50 <= 5 ms)")
    print(f"reader RSS after the counts: {_rss(readers)}", flush=True)
    if args.who_holds:  # on its own, before the diagnostics load the reader
        who = [r for _ in range(args.who_holds) for r in screens(samples, rng)["whoHolds"]]
        await _phase(port, "whoHolds by uuid", who, "(target p50 <= 1.2 ms)")
    for screen in opened[0]:
        documents = [r for o in opened for r in o[screen]]
        target = "(target p50 <= 1.2 ms)" if screen == "whoHolds" else ""
        await _phase(port, f"{screen} ({len(opened[0][screen])} documents)", documents, target)
        print(f"  reader RSS after {screen}: {_rss(readers)}", flush=True)
    mixed = [r for o in opened for s in o.values() for r in s]
    rng.shuffle(mixed)
    peaks = Peaks({n: p.pid for n, p in readers.items()})
    began = time.perf_counter()
    runs = [Run() for _ in range(args.clients * len(ports))]
    await asyncio.gather(*(
        timed(ports[i % len(ports)], mixed[i :: len(runs)], run) for i, run in enumerate(runs)
    ))  # fmt: skip
    took = time.perf_counter() - began
    seen = peaks.stop()
    timings = [t for r in runs for t in r.timings]
    errors = sum(len(r.errors) for r in runs)
    print(line(f"mixed screens, {len(runs)} clients", timings, seconds=took) + f"  {errors} errors")
    hwm = ", ".join(f"{n} {_mib(_status(p.pid, 'VmHWM'))}" for n, p in readers.items())
    print(f"reader RSS after the mixed load: {_rss(readers)}; sampled peak "
          f"{', '.join(f'{n} {_mib(v)}' for n, v in seen.items())}; VmHWM {hwm}", flush=True)  # fmt: skip


def watched(args: argparse.Namespace) -> None:
    import shutil
    import tempfile

    from dra_mirror.service.stores.redis_keys import DEFAULT_PREFIX, Keys, status_decoder
    from tests.infra import stack as servers

    base = Path(tempfile.mkdtemp(prefix="dra-mirror-replicas-", dir="/tmp"))
    base.chmod(0o755)
    env = servers.up(base, redis_cluster=args.redis_cluster, cluster_node_timeout_ms=5000)
    processes: list[subprocess.Popen] = []
    try:
        url = env["DRA_MIRROR_TEST_REDIS_CLUSTER_URL" if args.redis_cluster
                  else "DRA_MIRROR_TEST_REDIS_URL"]  # fmt: skip
        kubeconfig = base / "pages.kubeconfig"
        began = time.perf_counter()
        pages = subprocess.Popen(
            [sys.executable, str(repo_root() / "bench" / "page_server.py"), "--nodes",
             str(args.nodes), "--kubeconfig-out", str(kubeconfig)],
            cwd=repo_root(), stdout=subprocess.PIPE, stderr=(base / "pages.log").open("ab"),
        )  # fmt: skip
        processes.append(pages)
        assert pages.stdout is not None
        ready = pages.stdout.readline().decode()
        if not ready.startswith("ready"):
            raise RuntimeError(f"the page server did not start: {base / 'pages.log'}")
        print(f"{args.nodes:,} nodes: pages ready in {time.perf_counter() - began:.1f}s "
              f"(page server {_mib(_status(pages.pid, 'VmRSS'))}); load "
              f"{os.getloadavg()[0]:.1f}", flush=True)  # fmt: skip
        child = {**os.environ, "DRA_MIRROR_LOG_LEVEL": "WARNING",
                 "DRA_MIRROR_ACCESS_INSECURE_NO_AUTH": "true"}  # fmt: skip
        client = _client(url)
        keys = Keys(DEFAULT_PREFIX, "scale")
        began = time.perf_counter()
        watcher = subprocess.Popen(
            [sys.executable, "-m", "dra_mirror.service.cli", "watch", "--kubeconfig",
             str(kubeconfig), "--redis-url", url, "--port", str(free_port())],
            cwd=repo_root(), env=child, stdout=(base / "watcher.log").open("ab"),
            stderr=subprocess.STDOUT,
        )  # fmt: skip
        processes.append(watcher)
        while True:
            raw = client.get(keys.status)
            if raw is not None and status_decoder.decode(raw).synced:
                break
            if watcher.poll() is not None or time.perf_counter() - began > 1800:
                raise RuntimeError(f"the watcher did not sync: {base / 'watcher.log'}")
            time.sleep(0.05)
        synced = time.perf_counter() - began
        time.sleep(3.0)
        objects = sum(int(client.hlen(keys.objects(k))) for k in LIST_ORDER)
        print(f"watcher synced {objects:,} objects in {synced:.1f}s; peak RSS (VmHWM) "
              f"{_mib(_status(watcher.pid, 'VmHWM'))}, RSS 3 s later "
              f"{_mib(_status(watcher.pid, 'VmRSS'))}", flush=True)  # fmt: skip
        if args.redis_cluster:
            for node in client.get_primaries():
                used = client.info("memory", target_nodes=node)["used_memory"]
                print(f"  redis master {node.host}:{node.port}: used_memory {_mib(int(used))}")
        else:
            print(f"  redis used_memory {_mib(int(client.info('memory')['used_memory']))}")
        ports = [free_port() for _ in range(args.readers)]
        readers = {f"reader{i}": start_replica(url, DEFAULT_PREFIX, port)
                   for i, port in enumerate(ports)}  # fmt: skip
        processes.extend(readers.values())
        asyncio.run(_ready(ports))
        print(f"readers ready: {_rss(readers)}; watcher {_mib(_status(watcher.pid, 'VmRSS'))}",
              flush=True)  # fmt: skip
        samples = _samples(client, "scale")
        print(
            f"samples: {len(samples.nodes)} nodes, {len(samples.claims)} claims "
            f"({len(samples.pending)} pending), {len(samples.uuids)} held uuids",
            flush=True,
        )
        asyncio.run(dashboard(ports, readers, samples, args))
        print(f"watcher RSS at the end {_mib(_status(watcher.pid, 'VmRSS'))}; load "
              f"{os.getloadavg()[0]:.1f}")  # fmt: skip
        client.close()
    finally:
        for process in reversed(processes):
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
        servers.down(env)
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)


async def _ready(ports: list[int]) -> None:
    async with httpx.AsyncClient() as http:
        for port in ports:
            for _ in range(600):
                try:
                    if (await http.get(f"http://127.0.0.1:{port}/readyz")).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                await asyncio.sleep(0.1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, help="one watched cluster of N nodes (see above)")
    parser.add_argument("--redis-cluster", action="store_true")
    parser.add_argument("--readers", type=int, default=2)
    parser.add_argument("--openings", type=int, default=20)
    parser.add_argument("--who-holds", type=int, default=200,
                        help="whoHolds documents timed on their own after the counts")  # fmt: skip
    parser.add_argument("--keep", action="store_true", help="keep the run directory (logs)")
    parser.add_argument("--clusters", type=int, default=10)
    parser.add_argument("--requests", type=int, default=4000)
    parser.add_argument("--pages", type=int, default=1000)
    parser.add_argument("--clients", type=int, default=32)
    args = parser.parse_args()
    if args.nodes:
        args.clients = min(args.clients, 4)
        watched(args)
        return
    prefix = "replicas"
    with redis_server() as url:
        started = time.perf_counter()
        count, holds, nodes = asyncio.run(fill(url, prefix, args.clusters))
        print(f"{args.clusters} clusters, {count:,} objects written in "
              f"{time.perf_counter() - started:.1f}s; {len(holds):,} held devices, {len(nodes):,} nodes")  # fmt: skip
        ports = [free_port(), free_port()]
        replicas = [start_replica(url, prefix, port) for port in ports]
        try:
            asyncio.run(bench(ports, holds, nodes, args))
        finally:
            for replica in replicas:
                replica.terminate()
                replica.wait(10)


if __name__ == "__main__":
    main()
