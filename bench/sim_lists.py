"""Benchmark: how fast the simulated API server pages out LISTs and fans out WATCH events.

    .venv/bin/python bench/sim_lists.py [--scenario scale-5000] [--limit 500] [--watchers 10]

Prints, for the scenario's first cluster (scale-5000: ~90,000 objects):

1. page assembly in-process (list_page + cached item bytes, no HTTP), first pass (cold:
   every object encoded) and second pass (warm), pages/s and MB/s per resource;
2. the same for resourceslices served as v1beta1 (converted per request, never cached);
3. a floor: `orjson.dumps` of every object once;
4. over HTTP on loopback with a warm cache (server and httpx client in one process), the
   raw bytes of every page (no client-side decoding), pages/s and MB/s;
5. WATCH fan-out: `--watchers` streams on pods while 2,000 pod status updates are written,
   events delivered per second.

Figures only, no assertions.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import time

import httpx
import orjson

from dra_mirror.service.model.kinds import BY_PLURAL
from dra_mirror.service.sim.convert import to_served
from dra_mirror.service.sim.listing import list_page
from dra_mirror.service.sim.run import ClusterSpec, Simulator
from dra_mirror.service.sim.scenario import build_world, load_scenario
from dra_mirror.service.sim.store import ClusterStore, list_item

PATHS = {
    "nodes": "/api/v1/nodes",
    "pods": "/api/v1/pods",
    "resourceslices": "/apis/resource.k8s.io/v1/resourceslices",
    "resourceclaims": "/apis/resource.k8s.io/v1/resourceclaims",
}


def assemble(store: ClusterStore, plural: str, limit: int, beta: bool = False) -> tuple[int, int]:
    pages = size = 0
    token = ""
    while True:
        page = list_page(store, plural, None, limit=limit, continue_token=token)
        if beta:
            body = b",".join(
                orjson.dumps(list_item(to_served(plural, obj, "v1beta1")))
                for _, obj, _ in page.items
            )
        else:
            body = b",".join(store.encoded(plural, key) for key, _, _ in page.items)
        pages, size = pages + 1, size + len(body)
        token = page.continue_token
        if not token:
            return pages, size


def report(label: str, pages: int, size: int, elapsed: float) -> None:
    print(
        f"  {label:34s} {pages:5d} pages {size / 1e6:8.1f} MB {elapsed:6.2f} s "
        f"{pages / elapsed:8.0f} pages/s {size / 1e6 / elapsed:8.1f} MB/s"
    )


async def over_http(sim: Simulator, name: str, limit: int) -> None:
    async with httpx.AsyncClient(base_url=sim.url(name), timeout=120) as http:
        for plural, path in PATHS.items():
            started = time.perf_counter()
            pages = size = 0
            token = ""
            while True:
                params = {"limit": str(limit), **({"continue": token} if token else {})}
                response = await http.get(path, params=params)
                body = response.content
                pages, size = pages + 1, size + len(body)
                # Only the continue token is read: find it without decoding the items.
                head = body[: body.find(b'"items"')]
                token = orjson.loads(head[:-1] + b"}")["metadata"].get("continue", "")
                if not token:
                    break
            report(f"{plural} over HTTP", pages, size, time.perf_counter() - started)


async def fan_out(sim: Simulator, store: ClusterStore, watchers: int, updates: int) -> None:
    pods = [key for key in store.sorted_keys("pods")][:updates]
    start = str(store.resource_version)

    async def one() -> int:
        seen = 0
        async with (
            httpx.AsyncClient(base_url=sim.url(store.name), timeout=120) as http,
            http.stream(
                "GET", "/api/v1/pods", params={"watch": "1", "resourceVersion": start}
            ) as response,
        ):
            async for line in response.aiter_lines():
                if line:
                    seen += 1
                if seen >= updates:
                    return seen
        return seen

    tasks = [asyncio.create_task(one()) for _ in range(watchers)]
    await asyncio.sleep(0.5)
    started = time.perf_counter()
    for i, (namespace, name) in enumerate(pods):
        store.patch("pods", namespace, name, {"metadata": {"labels": {"bench": str(i)}}})
        if i % 100 == 99:
            await asyncio.sleep(0)
    delivered = sum(await asyncio.gather(*tasks))
    elapsed = time.perf_counter() - started
    print(
        f"  {watchers} watchers x {updates} pod updates: {delivered:,} events in {elapsed:.2f} s "
        f"= {delivered / elapsed:,.0f} events/s delivered"
    )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", default="scale-5000")
    parser.add_argument("--limit", type=int, default=500)
    parser.add_argument("--watchers", type=int, default=10)
    args = parser.parse_args()
    started = time.perf_counter()
    world = build_world(load_scenario(args.scenario))
    store = world.specs[0].store
    gc.freeze()
    counts = {p: store.count(p) for p in BY_PLURAL}
    print(f"built {args.scenario} in {time.perf_counter() - started:.2f} s: {counts}")

    print(f"page assembly in-process (limit={args.limit}):")
    for rnd in ("cold", "warm"):
        for plural in PATHS:
            began = time.perf_counter()
            pages, size = assemble(store, plural, args.limit)
            report(f"{plural} ({rnd})", pages, size, time.perf_counter() - began)
    began = time.perf_counter()
    pages, size = assemble(store, "resourceslices", args.limit, beta=True)
    report("resourceslices as v1beta1", pages, size, time.perf_counter() - began)
    began = time.perf_counter()
    floor = sum(len(orjson.dumps(o)) for p in PATHS for o in store.iter_objects(p))
    elapsed = time.perf_counter() - began
    print(
        f"  floor: orjson.dumps of every object {floor / 1e6:.1f} MB in {elapsed:.2f} s "
        f"= {floor / 1e6 / elapsed:.1f} MB/s"
    )

    spec = ClusterSpec(store, versions=("v1",))
    async with Simulator([spec], warm_list_cache=False) as sim:
        print("over HTTP, warm cache, raw bytes:")
        await over_http(sim, store.name, args.limit)
        print("watch fan-out:")
        await fan_out(sim, store, args.watchers, 2000)


if __name__ == "__main__":
    asyncio.run(main())
