"""Bench: first paint of each Devices screen in headless Chromium, on the 5,000-node scenario.

    .venv/bin/python bench/web_first_paint.py [--scenario scale-5000] [--runs 5]

A server process, started under `prlimit --as` (6 GB), builds the scenario's objects (the
simulator's generator), normalizes them and applies them to the in-memory store with live
events — the state the mirror holds after its initial sync — and serves the whole app
(`compose_app`: GraphQL, the screens, an empty SQLite history) with uvicorn on a free loopback
port. This process drives Debian's chromium through Playwright (no address-space cap:
Chromium reserves tens of GB of virtual memory up front), a fresh profile, every request
beyond 127.0.0.1 aborted.

For each screen, `--runs` navigations (the first one, cold, is printed apart), measured in the
page from navigation start (`performance.now()`), then as many of the same screen on a second
mirror holding the small scenario (`--small`, the demo's 73 objects): what the browser and the
screen cost with little data, under the same load, so `ready/small` is what the 90,000 objects
add:
* paint  — first contentful paint (the shell and its frame drawn);
* ready  — the screen's data drawn (`main[data-ready=true]`: its first GraphQL answer rendered);
  target ≤ 1 s;
* done   — every figure of the screen drawn, for screens that fill in after the first answer
  (the Overview's per-status counts, the explained pending claims, the device's history);
* floor  — in the same run: a page of plain HTML from the same server (`/bench/floor`), its
  first contentful paint: what the browser and the loopback cost with nothing to do.

Before the browser, the server's share: the first documents of the Overview and the claims
list (the screens' own text, `service.web.documents`) posted over HTTP, `--runs` times each,
median against a floor of `{ __typename }` over the same connection.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

KINDS = {
    "nodes": "Node",
    "deviceclasses": "DeviceClass",
    "resourceslices": "ResourceSlice",
    "resourceclaimtemplates": "ResourceClaimTemplate",
    "resourceclaims": "ResourceClaim",
    "pods": "Pod",
}

# Records when the screen is ready and complete, from navigation start.
MARKS = """
(() => {
  const marks = {};
  window.__marks = marks;
  const look = () => {
    const now = performance.now();
    const main = document.querySelector("main[data-ready=true]");
    if (main && marks.ready === undefined) marks.ready = now;
    const want = document.querySelector("main")?.dataset.screen;
    if (marks.ready !== undefined && marks.done === undefined && complete(want)) marks.done = now;
  };
  const complete = (screen) => {
    if (screen === "overview") return document.querySelectorAll("section.cluster-card").length > 0
      && !document.querySelector("section.cluster-card[data-complete=false]");
    if (screen === "claims") {  // the first 10 pending claims of the page are explained at once
      const pending = document.querySelectorAll("tr[data-state=PENDING]").length;
      return document.querySelectorAll("tr[data-state=PENDING] [data-verdict]").length >= Math.min(10, pending);
    }
    if (screen === "device") return !!document.querySelector("[data-history]");
    if (screen === "claim") return !!document.querySelector("[data-history], [data-incarnation]");
    if (screen === "classes") return !document.querySelector("tr[data-class] td.num .muted");
    if (screen === "pod") return !!document.querySelector("[data-mistakes], [data-missing]");
    return true;
  };
  new MutationObserver(look).observe(document, { subtree: true, childList: true, attributes: true });
})();
"""


def serve(port_file: str, scenario: str, workdir: str) -> None:
    """The server process: build the state, then serve the app until terminated."""
    import uvicorn
    from starlette.responses import HTMLResponse
    from starlette.routing import Route

    from dra_mirror.service.history.runtime import History
    from dra_mirror.service.model.index import MODIFIED, Event
    from dra_mirror.service.model.normalize import normalize
    from dra_mirror.service.runtime.compose import compose_app
    from dra_mirror.service.runtime.mirror import freeze_heap
    from dra_mirror.service.settings import Settings
    from dra_mirror.service.sim.scenario import build_world, load_scenario
    from dra_mirror.service.stores.memory import MemoryStore
    from dra_mirror.service.stores.protocols import ClusterStatus

    started = time.perf_counter()
    world = build_world(load_scenario(scenario))
    store = MemoryStore()

    async def load() -> int:
        count = 0
        for name, cluster in world.stores.items():
            records = [
                normalize(kind, raw, cluster=name)
                for plural, kind in KINDS.items()
                for raw in cluster.list(plural)
            ]
            count += len(records)
            index = store.open_index(name)  # the index the store serves, as a reactor folds it
            events = [Event(MODIFIED, r) for r in records]
            await store.apply(index.apply(events, at="2026-01-01T00:00:00Z"))
            await store.set_status(
                ClusterStatus(name=name, connected=True, synced=True, api_version="v1")
            )
        return count

    count = asyncio.run(load())
    freeze_heap()
    loaded = time.perf_counter() - started

    async def history() -> Any:
        return await History.open(f"sqlite+aiosqlite:///{workdir}/history.db")

    app = compose_app(Settings(), store=store, history=history)

    async def floor(_request: Any) -> HTMLResponse:
        return HTMLResponse("<!doctype html><title>floor</title><p>floor</p>")

    app.router.routes.insert(0, Route("/bench/floor", floor))
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    Path(port_file).write_text(f"{sock.getsockname()[1]} {count} {loaded:.1f}")
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on")
    uvicorn.Server(config).run(sockets=[sock])


async def pick(http: Any) -> dict[str, str]:
    """Objects for the detail screens, asked of the graph like any client would."""

    async def ask(query: str) -> dict:
        body = (await http.post("/graphql", json={"query": query})).json()
        assert "errors" not in body, body
        return body["data"]

    held = await ask(
        "{ devices(status: HELD, first: 1) { nodes { cluster driver pool name nodeName } } }"
    )
    device = held["devices"]["nodes"][0]
    pending = await ask(
        "{ resourceClaims(state: PENDING, first: 1) { nodes { cluster namespace name } } }"
    )
    claim = pending["resourceClaims"]["nodes"][0]
    pods = await ask(
        "{ pods(usesDevices: true, first: 1) { nodes { cluster namespace name nodeName } } }"
    )
    pod = pods["pods"]["nodes"][0]
    c = device["cluster"]
    return {
        "overview": "/ui/",
        "classes": "/ui/classes",
        "slices": f"/ui/slices?cluster={c}",
        "slices (one node)": f"/ui/slices?cluster={c}&node={device['nodeName']}",
        "claims": f"/ui/claims?cluster={c}",
        "claims (pending)": f"/ui/claims?cluster={c}&state=PENDING",
        "claim": f"/ui/claim?cluster={claim['cluster']}&namespace={claim['namespace']}&name={claim['name']}",
        "templates": "/ui/templates",
        "device": (
            f"/ui/device?cluster={c}&driver={device['driver']}&pool={device['pool']}"
            f"&device={device['name']}&node={device['nodeName']}"
        ),
        "contention": "/ui/contention",
        "pods": f"/ui/pods?cluster={c}",
        "pod": f"/ui/pod?cluster={pod['cluster']}&namespace={pod['namespace']}&name={pod['name']}&node={pod['nodeName']}",
    }


# The first answers of the two screens with the largest lists (scale-5000: 40,000 claims and
# 40,000 devices), as the screens send them.
ANSWERS = [
    ("overview.js:TOTALS", {}),
    ("overview.js:UNAVAILABLE", {}),
    ("claims.js:CLAIMS", {"first": 50}),
    ("claims.js:CLAIMS", {"first": 50, "state": "PENDING"}),
    ("claims.js:WAITING", {}),
]


async def answers(http: Any, cluster: str, runs: int) -> None:
    """The server's share of a screen's first paint: its first documents over HTTP."""
    from dra_mirror.service.web.documents import screen_documents

    documents = dict(screen_documents())

    async def timed(query: str, variables: dict) -> float:
        started = time.perf_counter()
        body = (await http.post("/graphql", json={"query": query, "variables": variables})).json()
        took = (time.perf_counter() - started) * 1000
        assert "errors" not in body, str(body)[:300]
        return took

    floor = statistics.median([await timed("{ __typename }", {}) for _ in range(runs + 1)][1:])
    print(f"server floor: {{ __typename }} over HTTP, median {floor:6.1f} ms")
    for label, extra in ANSWERS:
        variables = {"cluster": cluster, **extra}
        samples = [await timed(documents[f"screens/{label}"], variables) for _ in range(runs + 1)]
        took = statistics.median(samples[1:])
        shown = label + (f" {extra}" if extra else "")
        print(f"  {shown:<52} {took:7.1f} ms {took / floor:7.1f}x  (first {samples[0]:.1f} ms)")


async def measure(page: Any, url: str, *, data: bool = True) -> dict[str, float]:
    await page.goto(url)
    if data:
        await page.wait_for_selector("main[data-ready=true]", timeout=60_000)
        await page.wait_for_function(
            "() => window.__marks && window.__marks.done !== undefined", timeout=60_000
        )
        # Nothing of this visit may still run on the server when the next one starts.
        for _ in range(600):
            if not page.in_flight:
                break
            await asyncio.sleep(0.05)
    else:
        await page.wait_for_load_state("load")
    return await page.evaluate(
        """() => ({
          paint: (performance.getEntriesByName("first-contentful-paint")[0] || {}).startTime,
          ready: window.__marks ? window.__marks.ready : undefined,
          done: window.__marks ? window.__marks.done : undefined })"""
    )


def median(samples: list[dict[str, float]], key: str) -> float:
    values = [s[key] for s in samples if s.get(key) is not None]
    return statistics.median(values) if values else float("nan")


async def bench(base: str, runs: int, small: str | None) -> None:
    import httpx
    from playwright.async_api import async_playwright

    from tests.web.harness import CHROMIUM, CHROMIUM_ARGS, LOCAL, VIEWPORT

    async with httpx.AsyncClient(base_url=base, timeout=60) as http:
        screens = await pick(http)
        cluster = screens["slices"].split("cluster=")[1]
        await answers(http, cluster, runs)
    small_screens: dict[str, str] = {}
    if small is not None:
        async with httpx.AsyncClient(base_url=small, timeout=60) as http:
            small_screens = await pick(http)
    with tempfile.TemporaryDirectory(prefix="web-bench-") as profile:
        async with async_playwright() as playwright:
            context = await playwright.chromium.launch_persistent_context(
                profile,
                executable_path=CHROMIUM,
                headless=True,
                args=CHROMIUM_ARGS,
                viewport=VIEWPORT,
            )
            foreign: list[str] = []

            async def route(route: Any) -> None:
                if route.request.url.startswith(LOCAL):
                    await route.continue_()
                else:
                    foreign.append(route.request.url)
                    await route.abort()

            await context.route("**/*", route)
            await context.add_init_script(MARKS)
            page = await context.new_page()
            page.in_flight = set()
            page.on("request", lambda r: r.method == "POST" and page.in_flight.add(r))
            page.on("requestfinished", lambda r: page.in_flight.discard(r))
            page.on("requestfailed", lambda r: page.in_flight.discard(r))
            floors = [
                await measure(page, f"{base}/bench/floor", data=False) for _ in range(runs + 1)
            ][1:]
            floor = median(floors, "paint")
            print(
                f"floor: plain HTML page from the same server, first paint median {floor:6.0f} ms"
            )
            if small_screens:
                print(
                    "small: the same screen on the small scenario's mirror, measured right after"
                    " (the browser's and the screen's own cost, with little data)"
                )
            print(
                f"{'screen':<20} {'cold ready':>10} {'paint':>7} {'ready':>7} {'done':>7} {'ready/floor':>12}"
                f" {'small ready':>11} {'ready/small':>11}  target ready ≤ 1000 ms"
            )
            worst = 0.0
            for name, path in screens.items():
                samples = [await measure(page, f"{base}{path}") for _ in range(runs + 1)]
                cold, warm = samples[0], samples[1:]
                ready = median(warm, "ready")
                worst = max(worst, ready, cold["ready"])
                little = float("nan")
                if name in small_screens:
                    url = f"{small}{small_screens[name]}"
                    little = median(
                        [await measure(page, url) for _ in range(runs + 1)][1:], "ready"
                    )
                print(
                    f"{name:<20} {cold['ready']:8.0f} ms {median(warm, 'paint'):5.0f} ms {ready:5.0f} ms"
                    f" {median(warm, 'done'):5.0f} ms {ready / floor:10.1f}x {little:8.0f} ms"
                    f" {ready / little:10.1f}x  {'met' if ready <= 1000 else 'NOT MET'}"
                )
            await context.close()
    print(
        f"slowest ready (cold or warm median): {worst:.0f} ms; requests beyond 127.0.0.1: {len(foreign)}"
    )


def start_server(scenario: str, memory: str, workdir: Path) -> tuple[Any, str, str, str]:
    """A server process for `scenario`, once it answers: (process, base URL, objects, load s)."""
    import httpx

    workdir.mkdir()
    port_file = workdir / "port"
    server = subprocess.Popen(
        [
            "prlimit",
            f"--as={memory}",
            sys.executable,
            __file__,
            "--scenario",
            scenario,
            "--serve",
            str(port_file),
            str(workdir),
        ],
        env={**os.environ, "PYTHONPATH": os.environ.get("PYTHONPATH") or str(REPO)},
    )
    while not port_file.exists() or not port_file.read_text():
        if server.poll() is not None:
            raise SystemExit(f"the server process ended ({server.returncode})")
        time.sleep(0.2)
    port, count, loaded = port_file.read_text().split()
    base = f"http://127.0.0.1:{port}"
    for _ in range(600):
        try:
            if httpx.get(f"{base}/readyz", timeout=5).status_code == 200:
                break
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    return server, base, count, loaded


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", default="scale-5000")
    parser.add_argument(
        "--small",
        default="demo",
        help="scenario of the second mirror each screen is also measured on ('none': no second)",
    )
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--memory", default="6000000000", help="prlimit --as of the server (bytes)")
    parser.add_argument(
        "--serve", nargs=2, metavar=("PORT_FILE", "WORKDIR"), help=argparse.SUPPRESS
    )
    args = parser.parse_args()
    if args.serve:
        serve(args.serve[0], args.scenario, args.serve[1])
        return
    servers: list[Any] = []
    with tempfile.TemporaryDirectory(prefix="web-bench-") as workdir:
        try:
            server, base, count, loaded = start_server(
                args.scenario, args.memory, Path(workdir) / "big"
            )
            servers.append(server)
            print(
                f"scenario {args.scenario}: {count} objects loaded in {loaded} s (server under prlimit --as={args.memory})"
            )
            small = None
            if args.small != "none":
                server, small, count, _ = start_server(
                    args.small, args.memory, Path(workdir) / "small"
                )
                servers.append(server)
                print(f"small scenario {args.small}: {count} objects")
            asyncio.run(bench(base, args.runs, small))
        finally:
            for server in servers:
                server.terminate()
                server.wait(30)


if __name__ == "__main__":
    main()
