"""Bench: `whoHolds` by uuid and one node's page, over HTTP, on the 5,000-node scenario.

    .venv/bin/python bench/graphql_whoholds.py [--scenario scale-5000] [--requests 4000]

A server process builds the scenario's objects (the simulator's generator), normalizes them
with the model and applies them to a MemoryStore (the state the mirror would hold after its
initial sync), then serves `create_app` with uvicorn on a free loopback port. This process is
the load generator: 16 concurrent clients, each with its own connection (one shared client
under 16-way concurrency measures the client, not the server — performance-notes.md).

Measured, printed (clients use a minimal HTTP/1.1 reader so the load generator costs little CPU):
* `whoHolds(device: "<uuid>")` — claim, namespace, pods: p50/p99 with 16 clients (target p50
  ≤ 5 ms), plus the unloaded p50 of one client;
* one node's page: node → devices → allocations → claims → pods, p50 of one client
  (target ≤ 15 ms);
* a floor in the same run: `GET /healthz` through the same stack, p50 with 16 clients.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import random
import socket
import statistics
import time
from typing import Any

import httpx
import orjson

WHO_HOLDS = """query($uuid: String!) { whoHolds(device: $uuid) {
  cluster shareID claim { namespace name state } pods { namespace name phase } } }"""

NODE_PAGE = """query($cluster: String!, $node: String!) {
  pods(cluster: $cluster, node: $node, first: 1) { totalCount }
  resourceSlices(cluster: $cluster, node: $node) { name pool { name generation complete } }
  devices(cluster: $cluster, node: $node, first: 100) { edges { node {
    name uuid status
    allocations { request shareID claim { namespace name state
      consumers { namespace name phase } } } } } } }"""


def serve(port_queue: Any, scenario: str) -> None:
    """The server process: build the state, then serve it until terminated."""
    import uvicorn

    from dra_mirror.service.http.app import create_app, freeze_heap
    from dra_mirror.service.model.index import MODIFIED, Event
    from dra_mirror.service.model.normalize import normalize
    from dra_mirror.service.settings import Settings
    from dra_mirror.service.sim.scenario import build_world, load_scenario
    from dra_mirror.service.stores.memory import MemoryStore
    from dra_mirror.service.stores.protocols import ClusterStatus, Relation

    kinds = {
        "nodes": "Node",
        "deviceclasses": "DeviceClass",
        "resourceslices": "ResourceSlice",
        "resourceclaimtemplates": "ResourceClaimTemplate",
        "resourceclaims": "ResourceClaim",
        "pods": "Pod",
    }
    started = time.perf_counter()
    world = build_world(load_scenario(scenario))
    store = MemoryStore()
    uuids: list[str] = []
    nodes: list[tuple[str, str]] = []
    count = 0

    async def load() -> None:
        nonlocal count
        for name, cluster in world.stores.items():
            records = [
                normalize(kind, raw, cluster=name)
                for plural, kind in kinds.items()
                for raw in cluster.list(plural)
            ]
            count += len(records)
            events = [Event(MODIFIED, r) for r in records]
            index = store.open_index(name)  # the index the store serves, as a reactor folds it
            await store.apply(index.apply(events, at="2026-01-01T00:00:00Z"))
            await store.set_status(ClusterStatus(name=name, connected=True, synced=True))
            entries = await store.list_devices(cluster=name)
            holds = await store.lookup(Relation.DEVICE_ALLOCATIONS, [e.key for e in entries])
            uuids.extend(
                e.device.uuid for e, h in zip(entries, holds, strict=True) if h and e.device.uuid
            )
            nodes.extend((name, n.meta.name) for n in await store.list("Node", cluster=name))

    asyncio.run(load())
    freeze_heap()  # what the app's lifespan does once every cluster synced
    loaded = time.perf_counter() - started
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port_queue.put((sock.getsockname()[1], count, loaded, uuids, nodes))
    app = create_app(Settings(), store=store)
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on")
    uvicorn.Server(config).run(sockets=[sock])


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def http_request(port: int, query: str, variables: dict) -> bytes:
    """One pre-encoded HTTP/1.1 keep-alive request (GET /healthz or POST /graphql)."""
    if query == "healthz":
        return f"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode()
    body = orjson.dumps({"query": query, "variables": variables})
    head = (
        f"POST /graphql HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


async def one_client(port: int, requests: list[tuple[str, dict]], timings: list[float]) -> None:
    """A client with its own connection and a minimal HTTP/1.1 reader: the load generator
    shares the machine's two cores with the server, so it must cost as little CPU as it can
    (httpx costs about as much per request as the server's /healthz)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        for query, variables in requests:
            payload = http_request(port, query, variables)
            began = time.perf_counter()
            writer.write(payload)
            status_line = await reader.readline()
            length = 0
            while (line := await reader.readline()) not in (b"\r\n", b""):
                name, _, value = line.partition(b":")
                if name.lower() == b"content-length":
                    length = int(value)
            body = await reader.readexactly(length)
            timings.append((time.perf_counter() - began) * 1000)
            if b" 200 " not in status_line or b'"errors"' in body:
                raise RuntimeError(f"{status_line!r} {body[:500]!r}")
    finally:
        writer.close()


async def run_load(port: int, requests: list[tuple[str, dict]], clients: int) -> list[float]:
    timings: list[float] = []
    shares = [requests[i::clients] for i in range(clients)]
    await asyncio.gather(*(one_client(port, share, timings) for share in shares))
    return timings


def line(name: str, timings: list[float], target: str = "", seconds: float | None = None) -> str:
    rate = f"{len(timings) / seconds:6.0f} req/s" if seconds else " " * 11
    return (
        f"{name:<44} n={len(timings):>5}  p50 {statistics.median(timings):7.2f} ms"
        f"  p99 {percentile(timings, 0.99):7.2f} ms  {rate}  {target}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", default="scale-5000")
    parser.add_argument("--requests", type=int, default=4000)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--pages", type=int, default=200)
    args = parser.parse_args()

    context = multiprocessing.get_context("spawn")
    ports = context.Queue()
    server = context.Process(target=serve, args=(ports, args.scenario), daemon=True)
    server.start()
    port, count, loaded, uuids, nodes = ports.get(timeout=600)
    print(
        f"scenario {args.scenario}: {count} objects loaded in {loaded:.1f} s; "
        f"{len(uuids)} held devices with a uuid, {len(nodes)} nodes"
    )
    base = f"http://127.0.0.1:{port}"
    rng = random.Random(1)

    async def bench() -> None:
        async with httpx.AsyncClient(base_url=base) as http:
            for _ in range(300):
                try:
                    if (await http.get("/readyz")).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                await asyncio.sleep(0.1)
        who = [(WHO_HOLDS, {"uuid": rng.choice(uuids)}) for _ in range(args.requests)]
        await run_load(port, who[:400], args.clients)  # warm-up (parser/validation caches)
        began = time.perf_counter()
        floor = await run_load(port, [("healthz", {})] * args.requests, args.clients)
        floor_s = time.perf_counter() - began
        began = time.perf_counter()
        loaded_who = await run_load(port, who, args.clients)
        who_s = time.perf_counter() - began
        single_who = await run_load(port, who[: args.requests // 8], 1)
        pages = [(NODE_PAGE, {"cluster": c, "node": n}) for c, n in rng.sample(nodes, args.pages)]
        await run_load(port, pages[:20], 1)
        single_page = await run_load(port, pages, 1)
        print(line(f"floor: GET /healthz, {args.clients} clients", floor, seconds=floor_s))
        print(
            line(
                f"whoHolds by uuid, {args.clients} clients",
                loaded_who,
                "(target p50 <= 5 ms)",
                seconds=who_s,
            )
        )
        print(line("whoHolds by uuid, 1 client", single_who))
        print(
            line(
                "node page (devices>allocations>claims>pods)", single_page, "(target p50 <= 15 ms)"
            )
        )

    try:
        asyncio.run(bench())
    finally:
        server.terminate()
        server.join(10)


if __name__ == "__main__":
    main()
