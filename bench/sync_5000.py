"""Benchmark: initial sync of the 5,000-node scenario into the in-memory store, against a floor.

    .venv/bin/python bench/sync_5000.py [--scenario scale-5000] [--runs 3]

The simulator runs in its own process (`dra-mirror sim`), so its CPU is not the mirror's.
Each measurement runs in a fresh child process (its own peak RSS, no heap left over from the
previous one); figures exclude interpreter start and imports, which are printed separately.

* floor: fetch every page (`limit=500`) of the six watched collections through the same
  kubernetes_asyncio transport (`ClusterApi.get`), all six at once as the reactor does, and
  decode each page with the same JSON library (msgspec, untyped) — nothing more;
* sync:  `run_reactors` into a `MemoryStore`, as `serve` runs it, until the cluster has synced
  once (lists decoded into records, folded into the one index the store serves: reverse maps,
  device statuses, idle marks; each batch's live events published on the store's bus).

Prints seconds, objects/s and peak RSS of each, and the ratio sync/floor (target ≤ 2.5x,
< 1.5 GiB RSS). The first floor run warms the simulator's page cache and is not counted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_STARTED = time.perf_counter()

REPO = Path(__file__).resolve().parents[1]
PATHS = (
    "/apis/resource.k8s.io/v1/deviceclasses",
    "/apis/resource.k8s.io/v1/resourceslices",
    "/apis/resource.k8s.io/v1/resourceclaims",
    "/apis/resource.k8s.io/v1/resourceclaimtemplates",
    "/api/v1/pods",
    "/api/v1/nodes",
)


def _peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


async def _floor(kubeconfig: str) -> dict:
    import msgspec

    from dra_mirror.service.clusters.config import close_all, connect
    from dra_mirror.service.clusters.transport import ClusterApi

    imported = time.perf_counter()
    connections = await connect(kubeconfig, None)
    [connection] = connections
    api = ClusterApi(connection.name, connection.api_client)
    totals = {"objects": 0, "bytes": 0, "pages": 0}

    async def fetch(path: str) -> None:
        token = None
        while True:
            params: dict = {"limit": 500}
            if token:
                params["continue"] = token
            body = await api.get(path, params, time_limit=300)
            page = msgspec.json.decode(body)
            totals["objects"] += len(page.get("items") or ())
            totals["bytes"] += len(body)
            totals["pages"] += 1
            token = (page.get("metadata") or {}).get("continue")
            if not token:
                return

    start = time.perf_counter()
    await asyncio.gather(*(fetch(path) for path in PATHS))
    seconds = time.perf_counter() - start
    await close_all(connections)
    return totals | {"seconds": seconds, "imports": imported - _STARTED, "rss_mib": _peak_rss_mib()}


async def _sync(kubeconfig: str) -> dict:
    from dra_mirror.service.clusters.config import close_all, connect
    from dra_mirror.service.model.records import KINDS
    from dra_mirror.service.reactor.reactor import run_reactors
    from dra_mirror.service.stores.memory import MemoryStore

    imported = time.perf_counter()
    connections = await connect(kubeconfig, None)
    store = MemoryStore()
    start = time.perf_counter()
    reactors = await run_reactors(
        connections, sinks=[store], status_sink=store, open_index=store.open_index
    )
    await reactors.wait_synced()
    seconds = time.perf_counter() - start
    [reactor] = list(reactors)
    objects = sum(reactor.index.count(kind) for kind in KINDS)
    rss = _peak_rss_mib()
    await reactors.stop()
    await close_all(connections)
    return {"objects": objects, "seconds": seconds, "imports": imported - _STARTED, "rss_mib": rss}


def _child(part: str, kubeconfig: str) -> dict:
    out = subprocess.run(
        [sys.executable, __file__, "--part", part, "--kubeconfig", kubeconfig],
        check=True,
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def _start_simulator(scenario: str, kubeconfig: Path) -> subprocess.Popen:
    command = [str(REPO / ".venv" / "bin" / "dra-mirror"), "sim", "--scenario", scenario]
    command += ["--kubeconfig-out", str(kubeconfig)]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    started = time.perf_counter()
    while not kubeconfig.exists():
        if process.poll() is not None:
            raise SystemExit(f"simulator exited: {process.stderr.read().decode()}")
        time.sleep(0.1)
    print(f"simulator ready in {time.perf_counter() - started:.1f}s (pid {process.pid})")
    return process


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", default="scale-5000")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--part", choices=("floor", "sync"), help=argparse.SUPPRESS)
    parser.add_argument("--kubeconfig", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.part:
        run = _floor if args.part == "floor" else _sync
        print(json.dumps(asyncio.run(run(args.kubeconfig))))
        return

    with tempfile.TemporaryDirectory() as tmp:
        kubeconfig = Path(tmp) / "kubeconfig"
        simulator = _start_simulator(args.scenario, kubeconfig)
        try:
            warm = _child("floor", str(kubeconfig))
            print(
                f"warm-up: {warm['objects']:,} objects, {warm['bytes'] / 1e6:.0f} MB in "
                f"{warm['pages']:,} pages, {warm['seconds']:.2f}s (sim cache cold)"
            )
            floors, syncs = [], []
            for _ in range(args.runs):
                floors.append(_child("floor", str(kubeconfig)))
                syncs.append(_child("sync", str(kubeconfig)))
        finally:
            simulator.terminate()
            simulator.wait(timeout=30)

    def show(name: str, runs: list[dict]) -> float:
        seconds = statistics.median(r["seconds"] for r in runs)
        objects = runs[0]["objects"]
        rss = max(r["rss_mib"] for r in runs)
        imports = statistics.median(r["imports"] for r in runs)
        each = ", ".join(f"{r['seconds']:.2f}" for r in runs)
        print(
            f"{name:6} {seconds:6.2f}s median ({each})  {objects / seconds:9,.0f} objects/s  "
            f"peak RSS {rss:7.0f} MiB  (+{imports:.2f}s interpreter and imports)"
        )
        return seconds

    print(f"scenario {args.scenario}: {syncs[0]['objects']:,} objects mirrored, {args.runs} runs")
    floor = show("floor", floors)
    sync = show("sync", syncs)
    print(f"ratio sync/floor: {sync / floor:.2f}x  (target <= 2.5x; RSS target < 1536 MiB)")


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    main()
