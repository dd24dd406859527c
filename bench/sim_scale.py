"""Benchmark: generate the scale-5000 scenario, then serve it in full as paged lists.

    .venv/bin/python bench/sim_scale.py [--scenario scale-5000] [--limit 500]

Prints (1) how long generating the scenario takes in this process (build_world: 5,000 nodes,
5,000 slices, 40,000 claims, 40,000 pods), (2) a floor: encoding every object once with orjson
in this process, and (3) serving: a separate `serve_scenario` process (so client and server do
not share one interpreter) answers every LIST of every resource in pages of `--limit` over HTTP
on loopback; objects, pages, bytes, seconds and MB/s per resource and in total, and the ratio
to the encoding floor. Figures only, no assertions (speed belongs here, not in tests).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import multiprocessing
import tempfile
import time
from pathlib import Path

import httpx
import orjson
import yaml

from dra_mirror.service.sim.scenario import build_world, load_scenario, serve_scenario

PATHS = {
    "namespaces": "/api/v1/namespaces",
    "nodes": "/api/v1/nodes",
    "pods": "/api/v1/pods",
    "deviceclasses": "/apis/resource.k8s.io/v1/deviceclasses",
    "resourceslices": "/apis/resource.k8s.io/v1/resourceslices",
    "resourceclaimtemplates": "/apis/resource.k8s.io/v1/resourceclaimtemplates",
    "resourceclaims": "/apis/resource.k8s.io/v1/resourceclaims",
}


def _serve(scenario: str, kubeconfig: str) -> None:
    asyncio.run(serve_scenario(scenario, kubeconfig_path=kubeconfig, announce=lambda _: None))


def generate(scenario: str) -> float:
    started = time.perf_counter()
    world = build_world(load_scenario(scenario))
    elapsed = time.perf_counter() - started
    counts = {p: s.count(p) for s in world.stores.values() for p in PATHS}
    total = sum(counts.values())
    print(f"generate {scenario}: {elapsed:.2f} s for {total:,} objects ({total / elapsed:,.0f}/s)")
    print("  " + ", ".join(f"{p} {n:,}" for p, n in counts.items()))
    started = time.perf_counter()
    encoded = sum(
        len(orjson.dumps(obj))
        for store in world.stores.values()
        for plural in PATHS
        for obj in store.iter_objects(plural)
    )
    floor = time.perf_counter() - started
    print(
        f"floor: orjson encodes every object once in {floor:.2f} s "
        f"({encoded / 1e6:,.0f} MB, {encoded / 1e6 / floor:,.0f} MB/s)"
    )
    return encoded / floor


async def serve_all(url: str, limit: int) -> tuple[int, float]:
    total_bytes = 0
    started_all = time.perf_counter()
    async with httpx.AsyncClient(base_url=url, timeout=120) as client:
        for plural, path in PATHS.items():
            started = time.perf_counter()
            pages = objects = size = 0
            token = ""
            while True:
                params = {"limit": str(limit)}
                if token:
                    params["continue"] = token
                response = await client.get(path, params=params)
                response.raise_for_status()
                body = response.content
                size += len(body)
                page = orjson.loads(body)
                pages += 1
                objects += len(page["items"])
                token = page["metadata"].get("continue") or ""
                if not token:
                    break
            elapsed = time.perf_counter() - started
            total_bytes += size
            print(
                f"  {plural:24s} {objects:7,} objects {pages:5,} pages {size / 1e6:8.1f} MB "
                f"{elapsed:6.2f} s {size / 1e6 / elapsed:7.1f} MB/s"
            )
    return total_bytes, time.perf_counter() - started_all


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", default="scale-5000")
    parser.add_argument("--limit", type=int, default=500)
    args = parser.parse_args()
    floor_rate = generate(args.scenario)
    gc.collect()
    with tempfile.TemporaryDirectory() as tmp:
        kubeconfig = Path(tmp) / "kubeconfig"
        started = time.perf_counter()
        server = multiprocessing.get_context("spawn").Process(
            target=_serve, args=(args.scenario, str(kubeconfig)), daemon=True
        )
        server.start()
        try:
            while not kubeconfig.exists():
                if not server.is_alive():
                    raise SystemExit("the simulator process exited")
                time.sleep(0.05)
            print(f"serve: simulator process ready in {time.perf_counter() - started:.2f} s")
            url = yaml.safe_load(kubeconfig.read_text())["clusters"][0]["cluster"]["server"]
            print(f"paged LIST (limit={args.limit}) of every resource from {url}:")
            size, elapsed = asyncio.run(serve_all(url, args.limit))
            rate = size / elapsed
            print(
                f"served in full: {size / 1e6:,.1f} MB in {elapsed:.2f} s = {rate / 1e6:,.1f} MB/s "
                f"({rate / floor_rate:.2f}x the in-process orjson encoding floor)"
            )
        finally:
            server.terminate()
            server.join(10)


if __name__ == "__main__":
    main()
