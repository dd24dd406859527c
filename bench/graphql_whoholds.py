"""Bench: `whoHolds` by uuid and one node's page, over HTTP, on the 5,000-node scenario.

    .venv/bin/python bench/graphql_whoholds.py [--scenario scale-5000] [--requests 4000]
        [--rounds 3] [--loop asyncio|uvloop] [--http mirror|httptools|h11]

A server process builds the scenario's objects (the simulator's generator), normalizes them
with the model and applies them to a MemoryStore (the state the mirror would hold after its
initial sync), then serves `compose_app` with uvicorn on a free loopback port. This process is
the load generator: 16 concurrent clients, each with its own connection (one shared client
under 16-way concurrency measures the client, not the server).

Measured, printed (clients use a minimal HTTP/1.1 reader so the load generator costs little CPU),
each `--rounds` times, with the median of the rounds' p50s and its ratio to the floor:

* the floor of `whoHolds`: a minimal Starlette app on the same uvicorn (event loop, HTTP
  protocol), in a process of its own, answering every POST /graphql with the bytes of a real
  `whoHolds` answer — the same requests from the same clients, one and 16;
* `GET /healthz` on the mirror's server (a trivial endpoint behind the mirror's middleware),
  one client and 16 clients: the floor of the node page;
* `whoHolds(device: "<uuid>")` — claim, namespace, pods: one client (target p50 ≤ 1 ms) and
  16 clients (target p50 ≤ 5 ms), the query sent as text and as a persisted query (its
  SHA-256 only, registered once);
* one node's page: node → devices → allocations → claims → pods, one client (target p50
  ≤ 8 ms);
* the server process's CPU seconds per request in each case (from /proc): on a loaded machine
  latencies stretch with the time the server waits for a core, its CPU per request much less.

The server runs on uvloop's event loop when uvloop is installed, as `dra-mirror serve` does
(`--loop asyncio`: on asyncio's own), with the HTTP protocol `serve` uses (`--http mirror`:
`service.runtime.http_protocol`; `--http httptools` or `h11`: uvicorn's own, e.g. for code
from before that protocol, put first on PYTHONPATH).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import multiprocessing
import os
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


def serve(port_queue: Any, scenario: str, loop: str, http: str = "mirror") -> None:
    """The server process: build the state, then serve it until terminated."""
    import uvicorn

    from dra_mirror.service.model.index import MODIFIED, Event
    from dra_mirror.service.model.normalize import normalize
    from dra_mirror.service.runtime.compose import compose_app
    from dra_mirror.service.runtime.mirror import freeze_heap
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
    # IPPROTO_TCP: asyncio sets TCP_NODELAY on accepted connections only then (without it,
    # Nagle and delayed ACKs add ~40 ms to every keep-alive request on asyncio's loop).
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port_queue.put((sock.getsockname()[1], count, loaded, uuids, nodes))
    app = compose_app(Settings(), store=store)
    config = uvicorn.Config(
        app, log_level="warning", access_log=False, lifespan="on", loop=loop, http=_http(http)
    )
    uvicorn.Server(config).run(sockets=[sock])


def _http(http: str) -> Any:
    """uvicorn's HTTP protocol: the one `dra-mirror serve` runs ("mirror") or uvicorn's."""
    if http == "mirror":
        from dra_mirror.service.runtime.http_protocol import protocol_class

        return protocol_class()
    return http


def serve_floor(port_queue: Any, answer: bytes, loop: str, http: str) -> None:
    """The floor's server process: a minimal Starlette app on the same uvicorn (loop, HTTP
    protocol) answering every POST /graphql with the same pre-encoded bytes."""
    import uvicorn
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    async def graphql(request: Request) -> Response:
        await request.body()
        return Response(answer, media_type="application/json")

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port_queue.put(sock.getsockname()[1])
    app = Starlette(routes=[Route("/graphql", graphql, methods=["POST"])])
    config = uvicorn.Config(
        app, log_level="warning", access_log=False, lifespan="off", loop=loop, http=_http(http)
    )
    uvicorn.Server(config).run(sockets=[sock])


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def persisted(query: str) -> dict:
    """The persisted-query extension naming `query` by its SHA-256."""
    digest = hashlib.sha256(query.encode()).hexdigest()
    return {"persistedQuery": {"version": 1, "sha256Hash": digest}}


def http_request(port: int, query: str, variables: dict) -> bytes:
    """One pre-encoded HTTP/1.1 keep-alive request (GET /healthz or POST /graphql); a query
    starting with "sha256:" is sent as a persisted query (the hash only)."""
    if query == "healthz":
        return f"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode()
    if query.startswith("sha256:"):
        body = orjson.dumps({"extensions": persisted(query[7:]), "variables": variables})
    else:
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


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (/proc/PID/stat, in clock ticks)."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def line(
    name: str, timings: list[float], target: str = "", seconds: float | None = None, cpu: float = 0
) -> str:
    rate = f"{len(timings) / seconds:6.0f} req/s" if seconds else " " * 11
    server = f"server {cpu / len(timings) * 1000:.3f} ms CPU/req" if cpu else ""
    return (
        f"{name:<44} n={len(timings):>5}  p50 {statistics.median(timings):7.2f} ms"
        f"  p99 {percentile(timings, 0.99):7.2f} ms  {rate}  {server}  {target}"
    )


def _serve_loop() -> str:
    """The event loop `dra-mirror serve` runs on here: uvloop's when it is installed."""
    try:
        import uvloop  # noqa: F401
    except ImportError:
        return "asyncio"
    return "uvloop"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", default="scale-5000")
    parser.add_argument("--requests", type=int, default=4000)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--pages", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--loop", choices=("asyncio", "uvloop"), default=_serve_loop())
    parser.add_argument(
        "--http",
        default="mirror",
        help="uvicorn's HTTP protocol: mirror (what `dra-mirror serve` runs), httptools, h11",
    )
    parser.add_argument(
        "--no-persisted", action="store_true", help="skip persisted queries (older servers)"
    )
    args = parser.parse_args()

    context = multiprocessing.get_context("spawn")
    ports = context.Queue()
    server = context.Process(
        target=serve, args=(ports, args.scenario, args.loop, args.http), daemon=True
    )
    server.start()
    port, count, loaded, uuids, nodes = ports.get(timeout=600)
    print(
        f"scenario {args.scenario}: {count} objects loaded in {loaded:.1f} s; "
        f"{len(uuids)} held devices with a uuid, {len(nodes)} nodes; {args.loop} event loop, "
        f"{args.http} HTTP protocol; server pid {server.pid}"
    )
    floor_server: Any = None
    base = f"http://127.0.0.1:{port}"
    floor_port = 0
    rng = random.Random(1)
    n, clients = args.requests, args.clients
    p50s: dict[str, list[float]] = {}

    cpu_per_request: dict[str, list[float]] = {}
    last_cpu = [0.0]

    def show(name: str, timings: list[float], target: str = "", seconds: float | None = None):
        p50s.setdefault(name, []).append(statistics.median(timings))
        cpu_per_request.setdefault(name, []).append(last_cpu[0] / len(timings))
        print(line(name, timings, target, seconds, last_cpu[0]))

    async def timed(
        requests: list[tuple[str, dict]], clients: int, floor: bool = False
    ) -> tuple[list[float], float]:
        target, pid = (floor_port, floor_server.pid) if floor else (port, server.pid)
        began, cpu = time.perf_counter(), cpu_seconds(pid)
        timings = await run_load(target, requests, clients)
        last_cpu[0] = cpu_seconds(pid) - cpu
        return timings, time.perf_counter() - began

    async def bench() -> None:
        async with httpx.AsyncClient(base_url=base) as http:
            for _ in range(300):
                try:
                    if (await http.get("/readyz")).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                await asyncio.sleep(0.1)
        nonlocal floor_server, floor_port
        who = [(WHO_HOLDS, {"uuid": rng.choice(uuids)}) for _ in range(n)]
        async with httpx.AsyncClient(base_url=base) as http:
            answer = (
                await http.post("/graphql", json={"query": who[0][0], "variables": who[0][1]})
            ).content
        floor_ports = context.Queue()
        floor_server = context.Process(
            target=serve_floor, args=(floor_ports, answer, args.loop, args.http), daemon=True
        )
        floor_server.start()
        floor_port = floor_ports.get(timeout=60)
        await asyncio.sleep(1)  # uvicorn starts serving on the bound socket
        await run_load(floor_port, who[:400], clients)
        by_hash = [(f"sha256:{WHO_HOLDS}", v) for _, v in who]
        await run_load(port, who[:400], clients)  # warm-up; registers nothing
        register = {"query": WHO_HOLDS, "variables": who[0][1], "extensions": persisted(WHO_HOLDS)}
        if not args.no_persisted:
            async with httpx.AsyncClient(base_url=base) as http:
                assert "errors" not in (await http.post("/graphql", json=register)).json()
        pages = [(NODE_PAGE, {"cluster": c, "node": nd}) for c, nd in rng.sample(nodes, args.pages)]
        await run_load(port, pages[:20], 1)
        healthz = [("healthz", {})] * n
        for round_ in range(args.rounds):
            print(f"round {round_ + 1} (load {os.getloadavg()[0]:.1f})")
            show("floor: GET /healthz, 1 client", (await timed(healthz[: n // 8], 1))[0])
            timings, seconds = await timed(healthz, clients)
            show(f"floor: GET /healthz, {clients} clients", timings, "", seconds)
            floor = (await timed(who[: n // 8], 1, floor=True))[0]
            show("floor: the answer's bytes, 1 client", floor)
            timings, seconds = await timed(who, clients, floor=True)
            show(f"floor: the answer's bytes, {clients} clients", timings, "", seconds)
            show("whoHolds by uuid, 1 client", (await timed(who[: n // 8], 1))[0], "(<= 1 ms)")
            if not args.no_persisted:
                one = (await timed(by_hash[: n // 8], 1))[0]
                show("whoHolds persisted, 1 client", one, "(<= 1 ms)")
            timings, seconds = await timed(who, clients)
            show(f"whoHolds by uuid, {clients} clients", timings, "(<= 5 ms)", seconds)
            if not args.no_persisted:
                timings, seconds = await timed(by_hash, clients)
                show(f"whoHolds persisted, {clients} clients", timings, "(<= 5 ms)", seconds)
            show("node page, 1 client", (await timed(pages, 1))[0], "(<= 8 ms)")

    try:
        asyncio.run(bench())
    finally:
        for process in (server, floor_server):
            if process is not None:
                process.terminate()
                process.join(10)
    print(
        f"median of {args.rounds} rounds' p50 (ratio to the floor with as many clients: whoHolds "
        "to the minimal app answering its bytes, the rest to /healthz), and the server's CPU per "
        "request:"
    )
    floors = {
        (healthz, many): statistics.median(p50s[f"floor: {what}, {count}"])
        for healthz, what in ((True, "GET /healthz"), (False, "the answer's bytes"))
        for many, count in ((False, "1 client"), (True, f"{clients} clients"))
    }
    for name, values in p50s.items():
        floor = floors[("healthz" in name or "node page" in name, f"{clients} clients" in name)]
        cpu = statistics.median(cpu_per_request[name]) * 1000
        p50 = statistics.median(values)
        print(f"  {name:<44} p50 {p50:6.2f} ms  {p50 / floor:5.1f}x  server {cpu:.3f} ms CPU/req")


if __name__ == "__main__":
    main()
