"""Benchmark: `dra-mirror serve` from process start to synced, against the tight floor.

    prlimit --as=8000000000 .venv/bin/python bench/serve_sync.py --scenario scale-5000 --runs 5
    prlimit --as=8000000000 .venv/bin/python bench/serve_sync.py --nodes 10000 --runs 3
    ... --history   (also record history into a fresh SQLite file per run)

The API server is `bench/page_server.py` (the scenario's pages encoded once, answered from
memory: it costs next to nothing), in its own process. Runs alternate, each in a fresh process:

* floor: a process that fetches every page of the six collections (all six at once, as the
  watchers do; aiohttp, one connection each) and decodes each page with msgspec into minimal
  typed Structs (an item's name, namespace, uid and resourceVersion) kept in a list — nothing
  more — on uvloop's event loop when it is installed (as serve). Timed from spawn to its exit
  (it prints its totals last); interpreter start and imports included;
* stack floor: the same process, after it has imported the libraries the chosen stack cannot
  start without (strawberry, Starlette, uvicorn, click) and nothing of the mirror: what any
  mirror written on this stack pays before it reads a field beyond the floor's four;
* serve: `dra-mirror serve --kubeconfig …` (embedded defaults: state in memory, no history
  unless `--history`), timed from spawn to the log line of every cluster saying "synced"
  (then /readyz is checked). Peak RSS is the child's VmHWM read from /proc at that moment,
  and again `--settle` seconds later (after the diagnostics' preparation that follows a sync).
  `dra-mirror serve` runs on uvloop's event loop when uvloop is installed; `--loop uvloop` sets
  uvloop's policy before the command starts (the same loop, for a serve without that choice).

Each serve run also says when it got going: its first LIST (the page server's log of each
collection's first page, `--request-log`) and uvicorn's "Application startup complete", each as
seconds from spawn and the CPU seconds used by then (read from /proc every few ms). With
`--delay-ms N` the page server holds every answer N ms, as an API server some way off does.

Before the first run, the mirror's sources (and any `PYTHONPATH` entry's) are compiled to
bytecode, as an installed package is (`pip install` compiles; a container image ships the
`.pyc`): with `PYTHONDONTWRITEBYTECODE` set, each run would otherwise compile ~300 modules
again (~0.17 s), a cost no installation pays and the floor's libraries do not pay either.

Prints each run, the medians, the ratio of the medians and the load average around each run
(the machine is shared: a busy one shows in `load`), and the CPU seconds each process used
(user + system, from start to done or synced): on a loaded machine the wall-clock times
stretch with the time the process waits for a core, its CPU seconds much less.
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
import threading
import time
import urllib.request
from pathlib import Path

import msgspec

REPO = Path(__file__).resolve().parents[1]
PATHS = (
    "/apis/resource.k8s.io/v1/deviceclasses",
    "/apis/resource.k8s.io/v1/resourceslices",
    "/apis/resource.k8s.io/v1/resourceclaims",
    "/apis/resource.k8s.io/v1/resourceclaimtemplates",
    "/api/v1/pods",
    "/api/v1/nodes",
)


# --- the floor client (runs in its own process) ----------------------------------------------


class Meta(msgspec.Struct, gc=False):
    name: str = ""
    namespace: str = ""
    uid: str = ""
    resourceVersion: str = ""


class Item(msgspec.Struct, gc=False):
    metadata: Meta


class ListMeta(msgspec.Struct, gc=False):
    resourceVersion: str = ""
    continue_: str = msgspec.field(default="", name="continue")


class Page(msgspec.Struct, gc=False):
    metadata: ListMeta
    items: list[Item] = []


# What any `serve` on the chosen stack imports before it reads anything (the stack floor).
STACK = ("strawberry", "starlette.applications", "uvicorn", "click")


def floor_client(url: str, limit: int, *, stack: bool = False) -> None:
    if stack:
        import importlib

        for name in STACK:
            importlib.import_module(name)
    import aiohttp

    decoder = msgspec.json.Decoder(Page)
    kept: list[Item] = []
    totals = {"objects": 0, "bytes": 0, "pages": 0}

    async def fetch(path: str) -> None:
        async with aiohttp.ClientSession(url) as session:
            token = ""
            while True:
                params = {"limit": str(limit), **({"continue": token} if token else {})}
                async with session.get(path, params=params) as response:
                    body = await response.read()
                page = decoder.decode(body)
                kept.extend(page.items)
                totals["objects"] += len(page.items)
                totals["bytes"] += len(body)
                totals["pages"] += 1
                token = page.metadata.continue_
                if not token:
                    return

    async def everything() -> None:
        await asyncio.gather(*(fetch(path) for path in PATHS))

    try:  # the loop serve runs: uvloop's when it is installed
        import uvloop

        factory = uvloop.new_event_loop
    except ImportError:
        factory = None
    start, cpu_start = time.perf_counter(), time.process_time()
    with asyncio.Runner(loop_factory=factory) as runner:
        runner.run(everything())
    inside, cpu_inside = time.perf_counter() - start, time.process_time() - cpu_start
    usage = resource.getrusage(resource.RUSAGE_SELF)
    rss, cpu = usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime
    result = totals | {"rss_mib": rss, "kept": len(kept), "inside": inside, "cpu": cpu}
    result["cpu_inside"] = cpu_inside
    print(json.dumps(result), flush=True)


# --- the parent ----------------------------------------------------------------------------


def _hwm_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (/proc/PID/stat, in clock ticks)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _load() -> float:
    return os.getloadavg()[0]


def run_floor(url: str, limit: int, *, in_process: bool = False, stack: bool = False) -> dict:
    """One floor run; `seconds` from spawn to exit, or (`in_process`) without start and imports.
    `stack`: the stack floor (the stack's libraries imported first)."""
    started = time.perf_counter()
    part = "stack-floor" if stack else "floor"
    out = subprocess.run(
        [sys.executable, __file__, "--part", part, "--url", url, "--limit", str(limit)],
        check=True,
        capture_output=True,
        text=True,
    )
    seconds = time.perf_counter() - started
    result = json.loads(out.stdout.strip().splitlines()[-1])
    return result | {"seconds": result["inside"] if in_process else seconds}


def compile_sources() -> None:
    """Compile the mirror's sources (and every PYTHONPATH entry) to bytecode, as installed."""
    import compileall

    roots = [REPO / "service", REPO / "schema", REPO / "migrations"]
    roots += [Path(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    for root in roots:
        if root.is_dir():
            compileall.compile_dir(root, quiet=1, workers=0)


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# `dra-mirror serve` with uvloop's policy set before it starts (`--loop uvloop`).
_ON_UVLOOP = (
    "import asyncio, sys, uvloop; asyncio.set_event_loop_policy(uvloop.EventLoopPolicy()); "
    "from dra_mirror.service.cli.main import main; sys.argv[0] = 'dra-mirror'; main()"
)


class CpuSampler(threading.Thread):
    """(time.time(), CPU seconds) of a process every few ms, to read the CPU used by a moment."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.samples: list[tuple[float, float]] = []
        self.stopping = threading.Event()

    def run(self) -> None:
        while not self.stopping.wait(0.003):
            try:
                self.samples.append((time.time(), _cpu_seconds(self.pid)))
            except (OSError, ValueError, IndexError):
                return

    def at(self, moment: float) -> float:
        """The CPU seconds of the last sample at or before `moment`."""
        before = [cpu for when, cpu in self.samples if when <= moment]
        return before[-1] if before else 0.0


def _first_list(request_log: Path | None, since: float) -> float | None:
    """time.time() of the first collection's first page the page server logged after `since`."""
    if request_log is None or not request_log.exists():
        return None
    times = [float(line.split()[0]) for line in request_log.read_text().splitlines() if line]
    later = [when for when in times if when >= since]
    return min(later) if later else None


def run_serve(
    kubeconfig: Path,
    clusters: int,
    *,
    history: Path | None,
    settle: float,
    loop: str = "asyncio",
    request_log: Path | None = None,
) -> dict:
    port = _free_port()
    program = [str(REPO / ".venv/bin/dra-mirror")]
    if loop == "uvloop":
        program = [sys.executable, "-c", _ON_UVLOOP]
    command = [*program, "serve", "--kubeconfig", str(kubeconfig), "--insecure-no-auth"]
    command += ["--port", str(port)]
    env = dict(os.environ, DRA_MIRROR_LOG_LEVEL="INFO")
    if history is not None:
        history.unlink(missing_ok=True)
        command += ["--database-url", f"sqlite+aiosqlite:///{history}"]
    started, epoch = time.perf_counter(), time.time()
    child = subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=REPO
    )
    sampler = CpuSampler(child.pid)
    sampler.start()
    synced = threading.Event()
    marks: dict[str, float] = {}
    log: list[str] = []

    def read_log() -> None:
        seen = 0
        assert child.stderr is not None
        for raw in child.stderr:
            line = raw.decode(errors="replace")
            log.append(line)
            if "synced: every kind listed once" in line:
                seen += 1
                if seen == clusters:
                    marks["synced"] = time.perf_counter()
                    marks["hwm"] = _hwm_mib(child.pid)
                    marks["cpu"] = _cpu_seconds(child.pid)
                    synced.set()
            elif "Application startup complete" in line and "http" not in marks:
                marks["http"] = time.perf_counter()
                marks["http_cpu"] = _cpu_seconds(child.pid)

    def read_until_exit() -> None:
        read_log()
        synced.set()  # the child closed its stderr (it exited): stop waiting

    reader = threading.Thread(target=read_until_exit, daemon=True)
    reader.start()
    try:
        if not synced.wait(600) or "synced" not in marks:
            raise SystemExit("serve did not sync:\n" + "".join(log[-20:]))
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=30) as answer:
            ready = answer.status == 200
        time.sleep(settle)
        settled = _hwm_mib(child.pid)
    finally:
        sampler.stopping.set()
        child.terminate()
        try:
            child.wait(30)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
    first = _first_list(request_log, epoch)
    return {
        "first_list": (first - epoch) if first is not None else float("nan"),
        "first_list_cpu": sampler.at(first) if first is not None else float("nan"),
        "http": marks.get("http", float("nan")) - started,
        "http_cpu": marks.get("http_cpu", float("nan")),
        "seconds": marks["synced"] - started,
        "cpu": marks["cpu"],
        "rss_mib": marks["hwm"],
        "settled_rss_mib": settled,
        "ready": ready,
    }


def start_server(
    args: argparse.Namespace, kubeconfig: Path, request_log: Path | None = None
) -> tuple[subprocess.Popen, str]:
    command = [sys.executable, str(REPO / "bench/page_server.py"), "--kubeconfig-out"]
    command += [str(kubeconfig), "--limit", str(args.limit), "--delay-ms", str(args.delay_ms)]
    command += ["--request-log", str(request_log)] if request_log is not None else []
    command += ["--nodes", str(args.nodes)] if args.nodes else ["--scenario", args.scenario]
    server = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    assert server.stdout is not None
    line = server.stdout.readline()
    if not line.startswith("ready "):
        server.kill()
        raise SystemExit("page server did not start")
    return server, f"http://127.0.0.1:{line.split()[1]}"


def _median(runs: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", default="scale-5000")
    parser.add_argument("--nodes", type=int, help="a generated scale scenario of N nodes")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--limit", type=int, default=500)
    parser.add_argument("--history", action="store_true", help="serve with a SQLite history")
    parser.add_argument("--settle", type=float, default=3.0)
    parser.add_argument("--loop", choices=("asyncio", "uvloop"), default="asyncio")
    parser.add_argument(
        "--delay-ms", type=float, default=0.0, help="the page server holds every answer this long"
    )
    parser.add_argument("--part", choices=("floor", "stack-floor"), help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.part is not None:
        floor_client(args.url, args.limit, stack=args.part == "stack-floor")
        return
    compile_sources()

    with tempfile.TemporaryDirectory() as tmp:
        kubeconfig = Path(tmp) / "kubeconfig"
        history = Path(tmp) / "history.db" if args.history else None
        request_log = Path(tmp) / "requests.log"
        server, url = start_server(args, kubeconfig, request_log)
        try:
            warm = run_floor(url, args.limit)
            print(
                f"{args.nodes or args.scenario}: {warm['objects']:,} objects, "
                f"{warm['bytes'] / 1e6:.0f} MB in {warm['pages']} pages (warm-up floor "
                f"{warm['seconds']:.2f}s)"
            )
            floors, stacks, serves = [], [], []
            for run in range(args.runs):
                before = _load()
                floors.append(run_floor(url, args.limit))
                stacks.append(run_floor(url, args.limit, stack=True))
                serves.append(
                    run_serve(
                        kubeconfig,
                        1,
                        history=history,
                        settle=args.settle,
                        loop=args.loop,
                        request_log=request_log,
                    )
                )
                floor, serve = floors[-1], serves[-1]
                print(
                    f"run {run + 1}: floor {floor['seconds']:.2f}s, {floor['cpu']:.2f} CPU s "
                    f"({floor['rss_mib']:.0f} MiB)  stack floor {stacks[-1]['seconds']:.2f}s, "
                    f"{stacks[-1]['cpu']:.2f} CPU s  serve {serve['seconds']:.2f}s, "
                    f"{serve['cpu']:.2f} CPU s (peak RSS {serve['rss_mib']:.0f} MiB at sync, "
                    f"{serve['settled_rss_mib']:.0f} MiB {args.settle:.0f}s later; ready "
                    f"{serve['ready']})  ratio {serve['seconds'] / floor['seconds']:.2f}x wall, "
                    f"{serve['cpu'] / floor['cpu']:.2f}x CPU  load {before:.1f}->{_load():.1f}"
                )
                print(
                    f"       serve's first LIST at {serve['first_list']:.2f}s "
                    f"({serve['first_list_cpu']:.2f} CPU s), app started at {serve['http']:.2f}s "
                    f"({serve['http_cpu']:.2f} CPU s)"
                )
        finally:
            server.terminate()
            server.wait(30)
    floor_s, serve_s = _median(floors, "seconds"), _median(serves, "seconds")
    ratios = sorted(s["seconds"] / f["seconds"] for f, s in zip(floors, serves, strict=True))
    print(
        f"median: floor {floor_s:.2f}s ({warm['objects'] / floor_s:,.0f} objects/s, "
        f"{_median(floors, 'rss_mib'):.0f} MiB)  serve {serve_s:.2f}s "
        f"({warm['objects'] / serve_s:,.0f} objects/s), peak RSS at sync "
        f"{_median(serves, 'rss_mib'):.0f} MiB, settled {_median(serves, 'settled_rss_mib'):.0f} "
        f"MiB"
    )
    floor_cpu, serve_cpu = _median(floors, "cpu"), _median(serves, "cpu")
    print(
        f"ratio serve/floor: {serve_s / floor_s:.2f}x (per run {', '.join(f'{r:.2f}' for r in ratios)})"
        f"; CPU seconds {serve_cpu:.2f} / {floor_cpu:.2f} = {serve_cpu / floor_cpu:.2f}x"
        "  targets: <= 1.5x, peak RSS <= 450 MiB"
    )
    stack_s, stack_cpu = _median(stacks, "seconds"), _median(stacks, "cpu")
    print(
        f"stack floor {stack_s:.2f}s, {stack_cpu:.2f} CPU s ({stack_s / floor_s:.2f}x the floor "
        f"before the mirror reads anything); serve/stack floor: {serve_s / stack_s:.2f}x wall, "
        f"{serve_cpu / stack_cpu:.2f}x CPU"
    )
    print(
        f"serve's start (medians): first LIST at {_median(serves, 'first_list'):.2f}s "
        f"({_median(serves, 'first_list_cpu'):.2f} CPU s), app started at "
        f"{_median(serves, 'http'):.2f}s ({_median(serves, 'http_cpu'):.2f} CPU s) of "
        f"{serve_s:.2f}s ({serve_cpu:.2f} CPU s) to synced"
    )


if __name__ == "__main__":
    main()
