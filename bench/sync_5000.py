"""Benchmark: the watchers' initial sync in one process, part by part, against the tight floor.

    prlimit --as=8000000000 .venv/bin/python bench/sync_5000.py [--scenario scale-5000] [--runs 3]
    ... --nodes 10000                 a generated scale scenario
    ... --profile /tmp/sync.prof      cProfile of one sync (pstats file; slows it ~2x)
    ... --transitions                 the indexes also derive transitions (as when history runs)
    ... --loop asyncio                asyncio's own event loop (default: serve's, uvloop's when
                                      it is installed)

The API server is `bench/page_server.py` (pages encoded once, answered from memory), in its
own process. Each measurement runs in a fresh child process; figures exclude interpreter start
and imports (`bench/serve_sync.py` measures the whole `dra-mirror serve` process instead):

* floor: fetch every page of the six collections (all six at once, aiohttp) and decode each
  with msgspec into minimal typed Structs — nothing more (`serve_sync.floor_client`);
* sync: `run_reactors` into the embedded store (a `MemoryStore`, as `serve` runs it: the one
  index the reactor folds into and the store serves; without history, so the index derives no
  transitions unless `--transitions`) until the cluster has synced: pages
  through the real transport (kubernetes_asyncio), `decode_list` into records, the index,
  each batch's live events published on the store's bus.

Also printed: CPU seconds of both (`time.process_time`: a loaded machine stretches wall-clock
times with waiting, much less the CPU seconds), and for the sync the time spent inside `decode_list`, inside the reactor's index, inside
the store, in the garbage collector (`gc.callbacks`) and the number of collections per
generation, and the peak RSS.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
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
sys.path.insert(0, str(REPO / "bench"))


class _Timer:
    """Accumulates the wall time spent in wrapped callables (sync and async)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    def wrap(self, name: str, fn):
        def timed(*args, **kwargs):
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - start

        return timed

    def wrap_async(self, name: str, fn):
        async def timed(*args, **kwargs):
            start = time.perf_counter()
            try:
                return await fn(*args, **kwargs)
            finally:
                self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - start

        return timed


class _GcClock:
    def __init__(self) -> None:
        self.seconds = 0.0
        self.collections = [0, 0, 0]
        self.by_generation = [0.0, 0.0, 0.0]
        self._start = 0.0
        gc.callbacks.append(self)

    def __call__(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._start = time.perf_counter()
        else:
            elapsed = time.perf_counter() - self._start
            self.seconds += elapsed
            self.collections[info["generation"]] += 1
            self.by_generation[info["generation"]] += elapsed


async def _sync(kubeconfig: str, profile: str | None, transitions: bool) -> dict:
    import functools

    from dra_mirror.service.clusters import watching
    from dra_mirror.service.clusters.config import close_all, connect
    from dra_mirror.service.model import index as index_module
    from dra_mirror.service.model.kinds import KINDS
    from dra_mirror.service.reactor.reactor import run_reactors
    from dra_mirror.service.stores.memory import MemoryStore

    imported = time.perf_counter()
    timer = _Timer()
    watching.decode_list = timer.wrap("decode_list", watching.decode_list)
    cls = index_module.ClusterIndex
    cls.apply = timer.wrap("index", cls.apply)  # resync goes through apply
    connections = await connect(kubeconfig, None)
    store = MemoryStore()
    store.apply = timer.wrap_async("store", store.apply)  # type: ignore[method-assign]
    clock = _GcClock()
    profiler = None
    if profile:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    start, cpu = time.perf_counter(), time.process_time()
    reactors = await run_reactors(
        connections,
        sinks=[store],
        status_sink=store,
        open_index=functools.partial(store.open_index, transitions=transitions),
    )
    await reactors.wait_synced()
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    if profiler is not None:
        profiler.disable()
        profiler.dump_stats(profile)
    gc_seconds, collections = clock.seconds, list(clock.collections)
    gc_by_generation = [round(s, 3) for s in clock.by_generation]
    [reactor] = list(reactors)
    objects = sum(reactor.index.count(kind) for kind in KINDS)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    # the store's own index is in the time of "store" (it calls ClusterIndex.apply too)
    store_index = timer.seconds.get("index", 0.0)
    await reactors.stop()
    await close_all(connections)
    return {
        "objects": objects,
        "seconds": seconds,
        "cpu": cpu,
        "imports": imported - _STARTED,
        "rss_mib": rss,
        "decode": timer.seconds.get("decode_list", 0.0),
        "index_all": store_index,
        "store": timer.seconds.get("store", 0.0),
        "gc": gc_seconds,
        "collections": collections,
        "gc_by_generation": gc_by_generation,
    }


def _child(args: list[str]) -> dict:
    out = subprocess.run(
        [sys.executable, __file__, *args], check=True, capture_output=True, text=True, cwd=REPO
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def _run(coro, loop: str):
    """Run `coro` on the event loop `dra-mirror serve` runs (uvloop's when it is installed), or
    on asyncio's own (`--loop asyncio`)."""
    from dra_mirror.service.cli.running import loop_factory

    with asyncio.Runner(loop_factory=loop_factory() if loop == "serve" else None) as runner:
        return runner.run(coro)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", default="scale-5000")
    parser.add_argument("--nodes", type=int)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--limit", type=int, default=500)
    parser.add_argument("--profile", help="write a cProfile of one sync to this file")
    parser.add_argument(
        "--transitions", action="store_true", help="derive transitions (as with history)"
    )
    parser.add_argument(
        "--loop",
        choices=("serve", "asyncio"),
        default="serve",
        help="the event loop serve runs (uvloop when installed; the default) or asyncio's own",
    )
    parser.add_argument("--part", choices=("sync",), help=argparse.SUPPRESS)
    parser.add_argument("--kubeconfig", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.part:
        print(json.dumps(_run(_sync(args.kubeconfig, args.profile, args.transitions), args.loop)))
        return

    from serve_sync import run_floor, start_server

    with tempfile.TemporaryDirectory() as tmp:
        kubeconfig = Path(tmp) / "kubeconfig"
        server, url = start_server(args, kubeconfig)
        try:
            warm = run_floor(url, args.limit)
            floors, syncs = [], []
            for _ in range(args.runs):
                load = os.getloadavg()[0]
                floors.append(run_floor(url, args.limit, in_process=True))
                extra = ["--transitions"] if args.transitions else []
                extra += ["--loop", args.loop]
                syncs.append(_child(["--part", "sync", "--kubeconfig", str(kubeconfig), *extra]))
                syncs[-1]["load"] = load
            if args.profile:
                _child(
                    ["--part", "sync", "--kubeconfig", str(kubeconfig), "--profile", args.profile]
                )
        finally:
            server.terminate()
            server.wait(30)

    print(
        f"{args.nodes or args.scenario}: {warm['objects']:,} objects, {warm['bytes'] / 1e6:.0f} MB "
        f"in {warm['pages']} pages, {args.runs} runs"
    )
    for floor, sync in zip(floors, syncs, strict=True):
        print(
            f"  floor {floor['seconds']:.2f}s ({floor['cpu_inside']:.2f} CPU s)  sync "
            f"{sync['seconds']:.2f}s ({sync['cpu']:.2f} CPU s; {sync['seconds'] / floor['seconds']:.2f}x"
            f" wall, {sync['cpu'] / floor['cpu_inside']:.2f}x CPU; decode_list {sync['decode']:.2f}s, "
            f"indexes {sync['index_all']:.2f}s, store {sync['store']:.2f}s, "
            f"GC {sync['gc']:.2f}s in {sync['collections']} collections "
            f"({sync['gc_by_generation']} s by generation); "
            f"peak RSS {sync['rss_mib']:.0f} MiB; load {sync['load']:.1f})"
        )
    floor = statistics.median(r["seconds"] for r in floors)
    sync = statistics.median(r["seconds"] for r in syncs)
    imports = statistics.median(r["imports"] for r in syncs)
    floor_cpu = statistics.median(r["cpu_inside"] for r in floors)
    sync_cpu = statistics.median(r["cpu"] for r in syncs)
    print(
        f"median: floor {floor:.2f}s, sync {sync:.2f}s (+{imports:.2f}s interpreter and imports), "
        f"ratio {sync / floor:.2f}x; CPU {sync_cpu:.2f}s / {floor_cpu:.2f}s = "
        f"{sync_cpu / floor_cpu:.2f}x; peak RSS {statistics.median(r['rss_mib'] for r in syncs):.0f} "
        "MiB"
    )


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    main()
