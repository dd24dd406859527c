"""The probes of bench/abuse.py: each door of the API tried from outside, held or not.

Each probe is `async def probe(stack) -> Outcome` and talks to the running API over real
sockets (httpx, aiohttp's WebSocket client, urllib, raw TCP), or runs `dra-mirror serve` with
a bad configuration. `Outcome(held, detail)`: `held` is the verdict the probe's docstring
states; the caller times it and reads the API's memory around it. Not a benchmark.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import secrets
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

import aiohttp
import httpx

from bench.abuse_stack import NOFILE, ROOT, AbuseStack

VIEWER = "{ viewer { name } }"


@dataclass
class Outcome:
    held: bool
    detail: str


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def persisted_get(stack: AbuseStack) -> Outcome:
    """A persisted query by GET, asking for `text/html, application/json`, without a token:
    held when it is refused (401), as every other request without one."""
    query = "{ devices(first: 5) { totalCount } }"
    digest = hashlib.sha256(query.encode()).hexdigest()
    extensions = {"persistedQuery": {"version": 1, "sha256Hash": digest}}
    async with httpx.AsyncClient(base_url=stack.url, timeout=30) as http:
        await http.post("/graphql", json={"query": query, "extensions": extensions},
                        headers=_bearer(stack.admin_token))  # fmt: skip
        statuses = []
        for _ in range(50):
            answer = await http.get("/graphql", params={"extensions": json.dumps(extensions)},
                                    headers={"Accept": "text/html, application/json"})  # fmt: skip
            statuses.append(answer.status_code)
    executed = statuses.count(200)
    return Outcome(
        executed == 0, f"{executed}/50 executed without a token ({sorted(set(statuses))})"
    )


async def _ws(stack: AbuseStack, session: aiohttp.ClientSession, token: str) -> Any:
    ws = await session.ws_connect(f"{stack.url}/graphql", protocols=["graphql-transport-ws"])
    await ws.send_json({"type": "connection_init", "payload": {"Authorization": f"Bearer {token}"}})
    ack = await asyncio.wait_for(ws.receive_json(), 10)
    if ack.get("type") != "connection_ack":
        raise RuntimeError(f"no connection_ack: {ack}")
    return ws


async def ws_rate(stack: AbuseStack) -> Outcome:
    """300 queries over one WebSocket right after `connection_init`, at most 10 in flight:
    held when no more are answered within 2 s than the subject's rate limit allows (burst 60,
    then 20/s)."""
    async with aiohttp.ClientSession() as session:
        ws = await _ws(stack, session, stack.admin_token)
        started = time.monotonic()
        sent = answered = refused = 0
        in_flight: set[str] = set()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(2.0):
                while answered + refused < 300:
                    while sent < 300 and len(in_flight) < 10:
                        await ws.send_json({"id": str(sent), "type": "subscribe",
                                            "payload": {"query": VIEWER}})  # fmt: skip
                        in_flight.add(str(sent))
                        sent += 1
                    message = await ws.receive_json()
                    if message.get("type") == "next":
                        answered += 1
                    elif message.get("type") == "error":
                        refused += 1
                    if message.get("type") in ("complete", "error"):
                        in_flight.discard(message.get("id"))
        elapsed = time.monotonic() - started
        await ws.close()
    allowed = 60 + 20 * elapsed + 5
    return Outcome(answered <= allowed, f"{answered} answered, {refused} refused in "
                   f"{elapsed:.1f} s (limit ~{allowed:.0f})")  # fmt: skip


async def ws_expiry(stack: AbuseStack) -> Outcome:
    """A subscription whose OIDC token expires 3 s after it starts: held when the server ends
    it within 3 s of the expiry."""
    token = stack.oidc_token(3)
    expires = time.time() + 3
    async with aiohttp.ClientSession() as session:
        ws = await _ws(stack, session, token)
        await ws.send_json({"id": "1", "type": "subscribe",
                            "payload": {"query": 'subscription { claimEvents(cluster: "east") { type } }'}})  # fmt: skip
        ended = None
        with contextlib.suppress(TimeoutError):
            while True:
                left = max(0.1, expires + 20 - time.time())
                message = await asyncio.wait_for(ws.receive(), left)
                if message.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED,
                                    aiohttp.WSMsgType.CLOSING):  # fmt: skip
                    ended = f"closed {ws.close_code}"
                    break
                data = json.loads(message.data) if message.type == aiohttp.WSMsgType.TEXT else {}
                if data.get("type") in ("error", "complete"):
                    ended = data["type"]
                    break
        after = time.time() - expires
        await ws.close()
    if ended is None:
        return Outcome(False, f"still streaming {after:.0f} s after the token expired")
    return Outcome(after <= 3.0, f"{ended} {after:.1f} s after the token expired")


def _aliases(count: int) -> str:
    fields = " ".join(f"a{i}: devices(first: 1000) {{ nodes {{ name uuid status }} }}"
                      for i in range(count))  # fmt: skip
    return "{ " + fields + " }"


async def batch(stack: AbuseStack) -> Outcome:
    """10 operations of 29 aliased `devices(first: 1000)` in one batch: held when the request
    as a whole stays within one operation's limits (refused, or answered within the execution
    budget), /healthz keeps answering within 1 s meanwhile, and memory grows < 300 MB."""
    before = stack.rss_mb()
    worst = 0.0
    stop = asyncio.Event()

    async def probe_health() -> None:
        nonlocal worst
        async with httpx.AsyncClient(base_url=stack.url, timeout=60) as http:
            while not stop.is_set():
                started = time.monotonic()
                await http.get("/healthz")
                worst = max(worst, time.monotonic() - started)
                await asyncio.sleep(0.1)

    health = asyncio.create_task(probe_health())
    peak = before
    async with httpx.AsyncClient(base_url=stack.url, timeout=120) as http:
        started = time.monotonic()
        batch_body = [{"query": _aliases(29)} for _ in range(10)]
        sending = http.post("/graphql", json=batch_body, headers=_bearer(stack.admin_token))
        request: asyncio.Task[httpx.Response] = asyncio.ensure_future(sending)
        while not request.done():
            peak = max(peak, stack.rss_mb())
            await asyncio.sleep(0.1)
        answer = await request
        took = time.monotonic() - started
    stop.set()
    await health
    grown = peak - before
    held = took <= 12.0 and worst < 1.0 and grown < 300
    return Outcome(held, f"{answer.status_code} after {took:.1f} s; /healthz worst "
                   f"{worst:.1f} s; RSS +{grown:.0f} MB at peak")  # fmt: skip


async def silent_connections(stack: AbuseStack) -> Outcome:
    """More silent connections than the API has file descriptors (it runs with NOFILE): held
    when /healthz still answers within 2 s and the server closes the silent ones."""
    count = NOFILE + 1000
    socks: list[socket.socket] = []
    for _ in range(count):
        sock = socket.socket()
        sock.setblocking(False)
        with contextlib.suppress(BlockingIOError):
            sock.connect(("127.0.0.1", stack.port))
        socks.append(sock)
    await asyncio.sleep(2)
    ok = 0
    async with httpx.AsyncClient(base_url=stack.url, timeout=2) as http:
        for _ in range(5):
            with contextlib.suppress(httpx.HTTPError):
                ok += (await http.get("/healthz")).status_code == 200
            await asyncio.sleep(0.5)
    await asyncio.sleep(15)
    closed = 0
    for sock in socks:
        try:
            closed += sock.recv(1) == b""
        except BlockingIOError:
            pass
        except OSError:
            closed += 1
        sock.close()
    held = ok == 5 and closed >= count * 0.9
    return Outcome(held, f"/healthz {ok}/5 with {count} silent connections open; "
                   f"{closed} closed by the server within 17 s")  # fmt: skip


async def slow_posts(stack: AbuseStack) -> Outcome:
    """600 anonymous POSTs that send 999,000 of their 999,999 bytes and stop: held when the
    API's memory grows by < 100 MB (no body is buffered before authentication)."""
    before = stack.rss_mb()
    head = (b"POST /graphql HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: 999999\r\n\r\n")  # fmt: skip
    body = b" " * 999_000
    writers = []
    for _ in range(600):
        with contextlib.suppress(OSError):
            _, writer = await asyncio.open_connection("127.0.0.1", stack.port)
            writer.write(head + body)
            writers.append(writer)
    await asyncio.sleep(3)
    grown = stack.rss_mb() - before
    for writer in writers:
        writer.transport.abort()
    await asyncio.sleep(2)
    kept = stack.rss_mb() - before
    return Outcome(grown < 100, f"RSS +{grown:.0f} MB while open, +{kept:.0f} MB after closing")


def _urllib_posts(url: str, size: int, token: str, times: int) -> dict[str, int]:
    seen: dict[str, int] = {}
    for _ in range(times):
        request = urllib.request.Request(f"{url}/graphql", data=b" " * size, method="POST",
                                         headers={"Content-Type": "application/json",
                                                  **_bearer(token)})  # fmt: skip
        try:
            with urllib.request.urlopen(request, timeout=30) as answer:
                key = str(answer.status)
        except urllib.error.HTTPError as error:
            key = str(error.code)
        except (urllib.error.URLError, ConnectionError) as error:
            key = type(getattr(error, "reason", error)).__name__
        seen[key] = seen.get(key, 0) + 1
    return seen


async def body_413(stack: AbuseStack) -> Outcome:
    """Bodies over the limit (1.5 MB and 10 MB) sent whole by urllib, 10 of each: held when
    every one is answered 413 (not a connection reset)."""
    small = await asyncio.to_thread(_urllib_posts, stack.url, 1_500_000, stack.admin_token, 10)
    large = await asyncio.to_thread(_urllib_posts, stack.url, 10_000_000, stack.admin_token, 10)
    return Outcome(small == {"413": 10} and large == {"413": 10},
                   f"1.5 MB: {small}; 10 MB: {large}")  # fmt: skip


async def _post(stack: AbuseStack, body: Any, seconds: float = 30) -> httpx.Response:
    async with httpx.AsyncClient(base_url=stack.url, timeout=seconds) as http:
        return await http.post("/graphql", json=body, headers=_bearer(stack.admin_token))


async def operation_name(stack: AbuseStack) -> Outcome:
    """`operationName: 5`: held when it is a 400 with a sentence, not a 500."""
    answer = await _post(stack, {"query": VIEWER, "operationName": 5})
    return Outcome(answer.status_code == 400, f"{answer.status_code} {answer.text[:90]}")


async def subscription_post(stack: AbuseStack) -> Outcome:
    """A subscription sent over HTTP POST: held when it is a 4xx saying why, within 5 s."""
    query = 'subscription { claimEvents(cluster: "east") { type } }'
    try:
        answer = await _post(stack, {"query": query}, seconds=5)
    except httpx.TimeoutException:
        return Outcome(False, "no answer within 5 s")
    return Outcome(400 <= answer.status_code < 500, f"{answer.status_code} {answer.text[:90]}")


async def cel_budget(stack: AbuseStack) -> Outcome:
    """A findDevices selector far over CEL's cost budget: held when it is refused with a code
    of its own (not INTERNAL, not a 500), within 2 s, and memory grows < 50 MB."""
    items = ",".join(str(i) for i in range(60))
    selector = f"[{items}].all(a, [{items}].all(b, [{items}].all(c, a + b + c >= 0)))"
    query = "query($s: String!) { findDevices(selector: $s) { totalCount } }"
    before = stack.rss_mb()
    started = time.monotonic()
    try:
        answer = await _post(stack, {"query": query, "variables": {"s": selector}}, seconds=60)
    except httpx.TimeoutException:
        return Outcome(False, "no answer within 60 s")
    took = time.monotonic() - started
    grown = stack.rss_mb() - before
    codes = [(e.get("extensions") or {}).get("code") for e in answer.json().get("errors") or []]
    held = answer.status_code < 500 and bool(codes) and "INTERNAL" not in codes
    held = held and took < 2 and grown < 50
    return Outcome(held, f"{answer.status_code} {codes} after {took:.1f} s, RSS +{grown:.0f} MB")


async def mcp_get(stack: AbuseStack) -> Outcome:
    """`GET /mcp` with a valid token: held when it is answered (405) within 2 s."""
    async with httpx.AsyncClient(base_url=stack.url, timeout=40) as http:
        started = time.monotonic()
        answer = await http.get("/mcp", headers=_bearer(stack.admin_token))
        took = time.monotonic() - started
    return Outcome(took < 2 and 400 <= answer.status_code < 500,
                   f"{answer.status_code} after {took:.1f} s")  # fmt: skip


def _serve_fails(stack: AbuseStack, args: list[str], env: dict[str, str]) -> Outcome:
    try:
        done = _run_serve(args, env)
    except subprocess.TimeoutExpired:
        return Outcome(False, "accepted: serve started and kept running")
    output = done.stderr + done.stdout
    last = output.strip().splitlines()[-1] if output.strip() else ""
    traceback = " with a traceback" if "Traceback" in output else ""
    clear = done.returncode == 2 and not traceback
    return Outcome(clear, f"exit {done.returncode}{traceback}: {last[:100]}")


def _run_serve(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "dra_mirror.service.cli", "serve", "--port", "0", *args],
        cwd=ROOT, capture_output=True, text=True, timeout=30,
        env={**os.environ, **env},
    )  # fmt: skip


async def negative_body_limit(stack: AbuseStack) -> Outcome:
    """`DRA_MIRROR_GRAPHQL_MAX_BODY_BYTES=-1`: held when serve refuses it (exit 2, one line)."""
    return await asyncio.to_thread(_serve_fails, stack, ["--kubeconfig", str(stack.kubeconfig),
                                   "--insecure-no-auth"], {"DRA_MIRROR_GRAPHQL_MAX_BODY_BYTES": "-1"})  # fmt: skip


async def unknown_access_context(stack: AbuseStack) -> Outcome:
    """An access file naming a kubeconfig context that does not exist: held when serve says
    so (exit 2, no traceback)."""
    bad = stack.run_dir / "access-bad-context.yaml"
    bad.write_text(stack.access_file.read_text().replace("context: east", "context: nowhere"))
    return await asyncio.to_thread(_serve_fails, stack, ["--kubeconfig", str(stack.kubeconfig)],
                                   {"DRA_MIRROR_ACCESS_CONFIG": str(bad)})  # fmt: skip


async def unwritable_sqlite(stack: AbuseStack) -> Outcome:
    """A SQLite history path that cannot be written: held when serve says so (exit 2)."""
    return await asyncio.to_thread(_serve_fails, stack, [
        "--kubeconfig", str(stack.kubeconfig), "--insecure-no-auth",
        "--database-url", "sqlite+aiosqlite:////proc/no-such-dir/history.db"], {})  # fmt: skip


async def host_header(stack: AbuseStack) -> Outcome:
    """`--insecure-no-auth` asked with `Host: rebound.example` (DNS rebinding): held when it is
    refused while `Host: 127.0.0.1:PORT` is served."""
    url = await stack.start_open()
    async with httpx.AsyncClient(base_url=url, timeout=10) as http:
        foreign = await http.post("/graphql", json={"query": VIEWER},
                                  headers={"Host": "rebound.example"})  # fmt: skip
        own = await http.post("/graphql", json={"query": VIEWER})
    held = foreign.status_code >= 400 and own.status_code == 200
    return Outcome(held, f"rebound.example {foreign.status_code}, own host {own.status_code}")


async def garbage_tokens(stack: AbuseStack) -> Outcome:
    """1,000 distinct garbage bearer tokens, 50 at a time: held when the TokenReviews they
    cost the reviewing cluster stay within the rate limit's burst (60) plus 20/s."""
    before = await asyncio.to_thread(stack.sim_requests)
    started = time.monotonic()
    statuses: dict[int, int] = {}
    async with httpx.AsyncClient(base_url=stack.url, timeout=30) as http:
        for _ in range(20):
            answers = await asyncio.gather(*(
                http.post("/graphql", json={"query": VIEWER},
                          headers=_bearer(secrets.token_hex(24))) for _ in range(50)))  # fmt: skip
            for answer in answers:
                statuses[answer.status_code] = statuses.get(answer.status_code, 0) + 1
    elapsed = time.monotonic() - started
    reviews = await asyncio.to_thread(stack.sim_requests) - before - 1
    allowed = 60 + 20 * elapsed + 10
    return Outcome(reviews <= allowed, f"{reviews} TokenReviews in {elapsed:.1f} s "
                   f"(limit ~{allowed:.0f}); answers {dict(sorted(statuses.items()))}")  # fmt: skip


async def hostile_documents(stack: AbuseStack) -> Outcome:
    """bench/graphql_abuse.py's documents (size, tokens, aliases, depth, fragments, nesting,
    malformed) sent to the running API with a token: held when none is a 5xx and memory
    grows < 100 MB."""
    from bench.graphql_abuse import attacks

    before = stack.rss_mb()
    worst = 0
    async with httpx.AsyncClient(base_url=stack.url, timeout=60) as http:
        for _name, body in attacks():
            headers = {"content-type": "application/json", **_bearer(stack.admin_token)}
            content = body if isinstance(body, bytes) else json.dumps(body).encode()
            answer = await http.post("/graphql", content=content, headers=headers)
            worst = max(worst, answer.status_code)
    grown = stack.rss_mb() - before
    return Outcome(worst < 500 and grown < 100, f"worst status {worst}; RSS +{grown:.0f} MB")


PROBES = {
    "hostile-documents": hostile_documents,
    "persisted-get": persisted_get,
    "ws-rate": ws_rate,
    "ws-expiry": ws_expiry,
    "batch": batch,
    "silent-connections": silent_connections,
    "slow-posts": slow_posts,
    "body-413": body_413,
    "operation-name": operation_name,
    "subscription-post": subscription_post,
    "cel-budget": cel_budget,
    "mcp-get": mcp_get,
    "max-body-bytes=-1": negative_body_limit,
    "access-unknown-context": unknown_access_context,
    "sqlite-unwritable": unwritable_sqlite,
    "host-header": host_header,
    "garbage-tokens": garbage_tokens,
}
