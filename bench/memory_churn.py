"""Benchmark: steady claim churn through the reactor into the embedded store, with lag.

    prlimit --as=6000000000 .venv/bin/python bench/memory_churn.py [--scenario scale-5000]
        [--rate 10000] [--seconds 10] [--profile /tmp/churn.prof] [--transitions]
        [--loop asyncio]

Both the floor and the churn run on the event loop `dra-mirror serve` runs (uvloop's when it
is installed; `--loop asyncio`: asyncio's own).

The API server is `bench/page_server.py --churn` in its own process: the scenario's pages for
the initial sync, then, on request, MODIFIED claim events on the claims WATCH stream at
`--rate` events/s (consumers leaving and coming back, so each event changes the claim's
state and idleness; `bench/churn_stream.py`). Each run is a fresh child process:

* floor: a client that only reads the watch stream (aiohttp, lines split as the transport
  splits them) and decodes each event with msgspec into a minimal typed Struct;
* churn: `run_reactors` into a `MemoryStore` (as `dra-mirror serve` runs the embedded
  store without history: its index derives no transitions, unless `--transitions`), synced first (the sync is not measured; its heap is frozen as the app does), then
  the same stream: transport, `decode_watch_line`, the reactor's batches, its index, the
  store, the live bus. A subscriber in the same process (as a GraphQL subscription would be)
  receives each claim's event.

Lag is from an event's scheduled moment (the server's wall-clock schedule, carried in its
resourceVersion) to its arrival at the reader. Printed: events/s delivered, lag p50/p99/max,
and the reader process's CPU seconds over the window, i.e. events per CPU-second (per core).
Targets: >= 10,000 events/s per core, lag p99 <= 0.5 s.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import msgspec

REPO = Path(__file__).resolve().parents[1]
CLAIMS = "/apis/resource.k8s.io/v1/resourceclaims"


class _Meta(msgspec.Struct, gc=False):
    name: str = ""
    resourceVersion: str = ""


class _Object(msgspec.Struct, gc=False):
    metadata: _Meta


class _Event(msgspec.Struct, gc=False):
    type: str
    object: _Object


def _start_churn(url: str, rate: float, seconds: float) -> dict:
    with urllib.request.urlopen(f"{url}/churn?rate={rate}&seconds={seconds}", timeout=60) as r:
        return json.loads(r.read())


def _report(lags: list[float], expected: int, window: float, cpu: float) -> dict:
    lags.sort()
    return {
        "seen": len(lags),
        "expected": expected,
        "rate": len(lags) / window if window else 0.0,
        "p50": lags[len(lags) // 2] if lags else float("nan"),
        "p99": lags[min(len(lags) - 1, int(0.99 * len(lags)))] if lags else float("nan"),
        "max": lags[-1] if lags else float("nan"),
        "cpu": cpu,
    }


async def _floor(url: str, rate: float, seconds: float) -> dict:
    import aiohttp

    decoder = msgspec.json.Decoder(_Event)
    lags: list[float] = []
    async with aiohttp.ClientSession(url) as session:
        params = {"watch": "true", "timeoutSeconds": "600", "allowWatchBookmarks": "true"}
        async with session.get(CLAIMS, params=params) as response:
            loop = asyncio.get_running_loop()
            plan = await loop.run_in_executor(None, _start_churn, url, rate, seconds)
            cpu = time.process_time()
            pending = b""
            async for chunk in response.content.iter_any():
                now = time.time()
                chunk = pending + chunk
                lines = chunk.split(b"\n")
                pending = lines.pop()
                for line in lines:
                    if line:
                        event = decoder.decode(line)
                        number = int(event.object.metadata.resourceVersion) - plan["base"]
                        lags.append(now - (plan["t0"] + number / rate))
                if len(lags) >= plan["events"]:
                    break
            window = time.time() - plan["t0"]
    return _report(lags, plan["events"], window, time.process_time() - cpu)


async def _churn(
    url: str, kubeconfig: str, rate: float, seconds: float, profile: str | None, transitions: bool
):
    import functools

    from dra_mirror.service.clusters.config import close_all, connect
    from dra_mirror.service.model.live import ClaimEvent
    from dra_mirror.service.reactor.reactor import run_reactors
    from dra_mirror.service.stores.memory import MemoryStore

    connections = await connect(kubeconfig, None)
    store = MemoryStore()
    reactors = await run_reactors(
        connections,
        sinks=[store],
        status_sink=store,
        open_index=functools.partial(store.open_index, transitions=transitions),
    )
    await reactors.wait_synced()
    await asyncio.sleep(0.5)  # the reactors' GC tuning ends and freezes the heap
    gc.freeze()  # as the app does once synced
    [reactor] = list(reactors)
    arrivals: list[tuple[int, float]] = []  # (resourceVersion, when it reached the reader)
    done = asyncio.Event()
    expected = int(rate * seconds)

    async def read() -> None:
        async for delivery in store.subscribe(reactor.name):
            event = delivery.event
            if isinstance(event, ClaimEvent) and event.new is not None:
                arrivals.append((int(event.new.meta.resource_version), time.time()))
                if len(arrivals) >= expected:
                    done.set()

    reader = asyncio.create_task(read())
    await asyncio.sleep(0.2)
    profiler = None
    if profile:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    loop = asyncio.get_running_loop()
    cpu = time.process_time()
    plan = await loop.run_in_executor(None, _start_churn, url, rate, seconds)
    try:
        await asyncio.wait_for(done.wait(), seconds + 60)
    except TimeoutError:
        pass
    window = time.time() - plan["t0"]
    cpu = time.process_time() - cpu
    if profiler is not None:
        profiler.disable()
        profiler.dump_stats(profile)
    reader.cancel()
    await reactors.stop()
    await close_all(connections)
    lags = [at - (plan["t0"] + (rv - plan["base"]) / rate) for rv, at in arrivals]
    return _report(lags, plan["events"], window, cpu)


def _child(args: list[str]) -> dict:
    out = subprocess.run(
        [sys.executable, __file__, *args], check=True, capture_output=True, text=True, cwd=REPO
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def _show(name: str, r: dict) -> None:
    print(
        f"  {name:6} {r['seen']:,} of {r['expected']:,} events, {r['rate']:8,.0f}/s; lag p50 "
        f"{r['p50'] * 1000:6.0f} ms, p99 {r['p99'] * 1000:6.0f} ms, max {r['max'] * 1000:6.0f} ms;"
        f" {r['cpu']:.2f} CPU s = {r['seen'] / r['cpu'] if r['cpu'] else 0:8,.0f} events per "
        "CPU-second"
    )


def _run(coro, loop: str):
    """Run `coro` on the event loop `dra-mirror serve` runs (uvloop's when it is installed), or
    on asyncio's own (`--loop asyncio`)."""
    from dra_mirror.service.cli.running import loop_factory

    with asyncio.Runner(loop_factory=loop_factory() if loop == "serve" else None) as runner:
        return runner.run(coro)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", default="scale-5000")
    parser.add_argument("--rate", type=float, default=10_000)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--profile", help="write a cProfile of the churn window to this file")
    parser.add_argument(
        "--transitions", action="store_true", help="derive transitions (as with history)"
    )
    parser.add_argument(
        "--loop",
        choices=("serve", "asyncio"),
        default="serve",
        help="the event loop serve runs (uvloop when installed; the default) or asyncio's own",
    )
    parser.add_argument("--part", choices=("floor", "churn"), help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--kubeconfig", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.part == "floor":
        print(json.dumps(_run(_floor(args.url, args.rate, args.seconds), args.loop)))
        return
    if args.part == "churn":
        result = _churn(
            args.url, args.kubeconfig, args.rate, args.seconds, args.profile, args.transitions
        )
        print(json.dumps(_run(result, args.loop)))
        return

    common = ["--rate", str(args.rate), "--seconds", str(args.seconds), "--loop", args.loop]
    results: dict[str, list[dict]] = {"floor": [], "churn": []}
    with tempfile.TemporaryDirectory() as tmp:
        kubeconfig = Path(tmp) / "kubeconfig"
        for _ in range(args.runs):
            for part in ("floor", "churn"):
                # a fresh server each run: its churn goes to the first claims watch once
                command = [sys.executable, str(REPO / "bench/page_server.py"), "--churn"]
                command += ["--scenario", args.scenario, "--kubeconfig-out", str(kubeconfig)]
                server = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
                assert server.stdout is not None
                url = f"http://127.0.0.1:{server.stdout.readline().split()[1]}"
                try:
                    extra = ["--profile", args.profile] if args.profile and part == "churn" else []
                    extra += ["--transitions"] if args.transitions and part == "churn" else []
                    more = ["--url", url, "--kubeconfig", str(kubeconfig), *extra]
                    results[part].append(_child(["--part", part, *common, *more]))
                finally:
                    server.terminate()
                    server.wait(30)
    print(f"{args.scenario}: claim churn offered at {args.rate:,.0f}/s for {args.seconds:.0f} s")
    for part, runs in results.items():
        for r in runs:
            _show(part, r)
    churn = results["churn"]
    print(
        f"median: {statistics.median(r['rate'] for r in churn):,.0f} events/s delivered, lag p99 "
        f"{statistics.median(r['p99'] for r in churn) * 1000:.0f} ms, "
        f"{statistics.median(r['seen'] / r['cpu'] for r in churn):,.0f} events per CPU-second "
        "(targets >= 10,000 per core, p99 <= 500 ms)"
    )


if __name__ == "__main__":
    main()
