"""A Kubernetes API that costs nothing: a scenario's LIST pages, encoded once, served from memory.

    .venv/bin/python bench/page_server.py --scenario scale-5000 --kubeconfig-out PATH
    .venv/bin/python bench/page_server.py --nodes 10000 --kubeconfig-out PATH

The floor of the sync benchmarks (`bench/serve_sync.py`, `bench/sync_5000.py`): a sync
measured against the simulator measures the simulator too (it assembles every page per
request, ~37 MB/s), so the mirror's own cost hides behind it. Here every page the simulator
would serve is fetched ONCE, in this process, through the simulator's own ASGI app
(`service.sim.server.build_app`, so the bytes are exactly the simulator's: same objects, same
continue tokens), kept in memory, and then answered by a plain asyncio HTTP/1.1 server with
`Content-Length` and keep-alive: a page costs one dictionary lookup and one socket write.

What it answers (one cluster; the scale scenarios have one):

* the recorded GETs: discovery (`/api`, `/api/v1`, `/apis`, `/apis/resource.k8s.io[/v1]`,
  `/version`) and every page of every collection at `limit=--limit` (500, the mirror's page
  size), keyed by path and `continue` token;
* `watch=true` on any collection: an idle chunked stream that ends after `timeoutSeconds`
  (or when the client closes), as an API server with nothing to report would — except, with
  `--churn`, the first watch of resourceclaims: `GET /churn?rate=R&seconds=S` starts claim
  churn on it (`bench/churn_stream.py`) and answers `{"t0": …, "events": …, "base": …}`;
* anything else: 404 with a Kubernetes `Status` body.

`--delay-ms N` holds every answer N ms before it is written (an API server tens of ms away, as
a real one is: the network time the mirror's start can overlap); `--request-log PATH` appends
`<time.time()> <target>` for each first page of a collection (no `continue` token): when a
client's first LIST arrived.

Recordings are cached under `--cache` (default `$TMPDIR/dra-mirror-pages`) by scenario and
page size, so repeated benchmark runs skip the ~5-15 s of generating and recording.
Prints `ready <port>` on stdout once it accepts connections and the kubeconfig is written.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl, urlsplit

import msgspec
import orjson

if TYPE_CHECKING:
    from churn_stream import ClaimChurn

REPO = Path(__file__).resolve().parents[1]
COLLECTIONS = (
    "/apis/resource.k8s.io/v1/deviceclasses",
    "/apis/resource.k8s.io/v1/resourceslices",
    "/apis/resource.k8s.io/v1/resourceclaims",
    "/apis/resource.k8s.io/v1/resourceclaimtemplates",
    "/api/v1/pods",
    "/api/v1/nodes",
)
DISCOVERY = (
    "/version",
    "/api",
    "/api/v1",
    "/apis",
    "/apis/resource.k8s.io",
    "/apis/resource.k8s.io/v1",
)
_NOT_FOUND = (
    b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",'
    b'"message":"the server could not find the requested resource","reason":"NotFound",'
    b'"code":404}'
)


class Recording(msgspec.Struct):
    """Every answer of the recorded cluster: `"path?continue"` -> body."""

    cluster: str
    bodies: dict[str, bytes]
    objects: int
    pages: int


class _Envelope(msgspec.Struct):
    metadata: dict
    items: list[msgspec.Raw] = []


def scale_scenario(nodes: int) -> str:
    """A scenario file shaped as scale-5000 (8 GPUs and 8 pods a node, 5% pending)."""
    return (
        f"name: scale-{nodes}\nseed: {nodes}\nclusters:\n  - name: scale\n    versions: [v1]\n"
        f"    generate:\n      nodes: {nodes}\n      gpusPerNode: 8\n      pods: {nodes * 8}\n"
        "      pending: 0.05\n      namespaces: 20\n      profile: nvidia-h100-80gb-hbm3\n"
    )


async def _record(scenario: str, limit: int) -> Recording:
    import httpx

    from dra_mirror.service.sim.scenario import build_world, load_scenario
    from dra_mirror.service.sim.served import ServedCluster
    from dra_mirror.service.sim.server import build_app

    world = build_world(load_scenario(scenario))
    [spec] = world.specs
    app = build_app(ServedCluster(spec.store, tuple(spec.versions)))
    bodies: dict[str, bytes] = {}
    objects = pages = 0
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://sim") as client:
        for path in DISCOVERY:
            response = await client.get(path)
            response.raise_for_status()
            bodies[path] = response.content
        for path in COLLECTIONS:
            token = ""
            while True:
                params = {"limit": str(limit), **({"continue": token} if token else {})}
                response = await client.get(path, params=params)
                response.raise_for_status()
                bodies[f"{path}?{token}"] = response.content
                page = msgspec.json.decode(response.content, type=_Envelope)
                objects += len(page.items)
                pages += 1
                token = page.metadata.get("continue") or ""
                if not token:
                    break
    return Recording(spec.store.name, bodies, objects, pages)


def load_recording(scenario: str, limit: int, cache: Path) -> Recording:
    """The recording of `scenario` at page size `limit`, from the cache or made now."""
    text = Path(scenario).read_bytes() if Path(scenario).exists() else scenario.encode()
    digest = hashlib.sha256(text + f"/{limit}".encode()).hexdigest()[:16]
    path = cache / f"{Path(scenario).stem}-{limit}-{digest}.msgpack"
    if path.exists():
        return msgspec.msgpack.decode(path.read_bytes(), type=Recording)
    recording = asyncio.run(_record(scenario, limit))
    cache.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_bytes(msgspec.msgpack.encode(recording))
    os.replace(tmp, path)
    return recording


class PageServer:
    """Answers GETs from a `Recording` over HTTP/1.1 keep-alive connections."""

    def __init__(
        self,
        recording: Recording,
        churn: ClaimChurn | None = None,
        *,
        delay: float = 0.0,
        request_log: Path | None = None,
    ) -> None:
        self.bodies = recording.bodies
        self.delay = delay
        self.request_log = request_log
        self.requests = 0
        self.churn = churn
        self.churn_watch = asyncio.get_running_loop().create_future()  # the claims watch's writer
        self.churn_taken = False

    def answer(self, target: str) -> tuple[bytes, bytes] | None:
        """(status line, body) for a plain GET, or None for a watch."""
        split = urlsplit(target)
        query = dict(parse_qsl(split.query))
        if query.get("watch") in ("true", "1"):
            return None
        key = split.path if split.path in DISCOVERY else f"{split.path}?{query.get('continue', '')}"
        body = self.bodies.get(key)
        if body is None:
            return b"404 Not Found", _NOT_FOUND
        return b"200 OK", body

    async def connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                request_line, _, headers = head.decode("latin-1").partition("\r\n")
                _method, target, _version = request_line.split(" ", 2)
                self.requests += 1
                if target.startswith("/churn?"):
                    await self._start_churn(writer, target)
                    continue
                answer = self.answer(target)
                if answer is None:
                    await self._idle_watch(reader, writer, target)
                    return
                self._note(target)
                if self.delay:
                    await asyncio.sleep(self.delay)
                status, body = answer
                writer.write(
                    b"HTTP/1.1 " + status + b"\r\nContent-Type: application/json\r\n"
                    b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n"
                )
                writer.write(body)
                await writer.drain()
                if "connection: close" in headers.lower():
                    return
        finally:
            writer.close()

    def _note(self, target: str) -> None:
        """Log the arrival of a collection's first page (`--request-log`)."""
        if self.request_log is None or "continue=" in target:
            return
        if urlsplit(target).path not in COLLECTIONS:
            return
        with self.request_log.open("a") as log:
            log.write(f"{time.time():.6f} {target}\n")

    async def _start_churn(self, writer: asyncio.StreamWriter, target: str) -> None:
        from churn_stream import BASE_VERSION

        query = dict(parse_qsl(urlsplit(target).query))
        rate, seconds = float(query["rate"]), float(query["seconds"])
        async with asyncio.timeout(30):
            watch = await self.churn_watch  # the claims watch's (writer, started future)
        stream_writer, started = watch
        t0: asyncio.Future[float] = asyncio.get_running_loop().create_future()

        async def write(data: bytes) -> None:
            stream_writer.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            await stream_writer.drain()

        assert self.churn is not None
        task = asyncio.create_task(
            self.churn.stream(write, rate=rate, seconds=seconds, started=t0.set_result)
        )
        started.set_result(task)
        body = orjson.dumps({"t0": await t0, "events": int(rate * seconds), "base": BASE_VERSION})
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
            + str(len(body)).encode()
            + b"\r\n\r\n"
            + body
        )
        await writer.drain()

    async def _idle_watch(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, target: str
    ) -> None:
        query = dict(parse_qsl(urlsplit(target).query))
        timeout = float(query.get("timeoutSeconds") or 1800)
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n"
        )
        await writer.drain()
        if (
            self.churn is not None
            and not self.churn_taken
            and target.split("?")[0].endswith("/resourceclaims")
        ):
            self.churn_taken = True
            started: asyncio.Future[asyncio.Task[None]] = asyncio.get_running_loop().create_future()
            self.churn_watch.set_result((writer, started))
            with contextlib.suppress(ConnectionError):
                await (await started)  # the churn streams on this watch, then it ends
                writer.write(b"0\r\n\r\n")
                await writer.drain()
            return
        try:
            async with asyncio.timeout(timeout):
                await reader.read()  # returns at EOF: the client went away
        except TimeoutError:
            pass
        except ConnectionError:
            return
        if not writer.is_closing():
            writer.write(b"0\r\n\r\n")
            with contextlib.suppress(ConnectionError):
                await writer.drain()


async def serve(
    recording: Recording,
    kubeconfig: Path,
    port: int,
    churn: bool,
    *,
    delay: float = 0.0,
    request_log: Path | None = None,
) -> None:
    from churn_stream import ClaimChurn

    from dra_mirror.service.sim.kubeconfig import write_kubeconfig

    pages = (body for key, body in recording.bodies.items() if "/resourceclaims?" in key)
    churning = ClaimChurn.from_pages(pages) if churn else None
    server = PageServer(recording, churning, delay=delay, request_log=request_log)
    listener = await asyncio.start_server(server.connection, "127.0.0.1", port, backlog=256)
    bound = listener.sockets[0].getsockname()[1]
    write_kubeconfig(kubeconfig, {recording.cluster: bound})
    print(f"ready {bound}", flush=True)
    async with listener:
        await listener.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    what = parser.add_mutually_exclusive_group()
    what.add_argument("--scenario", default="scale-5000", help="shipped scenario or YAML file")
    what.add_argument("--nodes", type=int, help="a scale scenario of this many nodes")
    parser.add_argument("--limit", type=int, default=500, help="LIST page size recorded")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--kubeconfig-out", required=True)
    parser.add_argument("--churn", action="store_true", help="serve claim churn on GET /churn")
    parser.add_argument("--delay-ms", type=float, default=0.0, help="hold every answer this long")
    parser.add_argument("--request-log", type=Path, help="log each collection's first page here")
    parser.add_argument(
        "--cache", type=Path, default=Path(tempfile.gettempdir()) / "dra-mirror-pages"
    )
    args = parser.parse_args()
    scenario = args.scenario
    if args.nodes:
        args.cache.mkdir(parents=True, exist_ok=True)
        path = args.cache / f"scale-{args.nodes}.yaml"
        path.write_text(scale_scenario(args.nodes))
        scenario = str(path)
    started = time.perf_counter()
    recording = load_recording(scenario, args.limit, args.cache)
    size = sum(len(b) for b in recording.bodies.values())
    print(
        f"recording: {recording.objects:,} objects in {recording.pages:,} pages, "
        f"{size / 1e6:.0f} MB, loaded in {time.perf_counter() - started:.1f}s",
        file=sys.stderr,
        flush=True,
    )
    import gc

    gc.freeze()
    try:
        asyncio.run(
            serve(
                recording,
                Path(args.kubeconfig_out),
                args.port,
                args.churn,
                delay=args.delay_ms / 1000,
                request_log=args.request_log,
            )
        )
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
