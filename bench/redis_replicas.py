"""Benchmark: two API replicas over one Redis, ten clusters of 500 nodes, 32 clients.

    .venv/bin/python bench/redis_replicas.py [--clusters 10] [--requests 4000] [--clients 32]

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
    from dra_mirror.service.model.index import ClusterIndex
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
        index = ClusterIndex(name)
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clusters", type=int, default=10)
    parser.add_argument("--requests", type=int, default=4000)
    parser.add_argument("--pages", type=int, default=1000)
    parser.add_argument("--clients", type=int, default=32)
    args = parser.parse_args()
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
