"""A real browser against a real mirror of the demo scenario, for the browser tests, the
screenshots (`scripts/screenshots`) and the first-paint benchmark.

* `serve_demo(workdir, settings=None, access=None)`: the `dra-mirror demo` wiring (simulator, watchers through the real
  Kubernetes client, in-memory state, SQLite history) under uvicorn on a free loopback port;
  yields a `Site` once every cluster synced (`/readyz` 200).
* `serve_app(app)`: any ASGI app the same way (the benchmark's scale-5000 mirror).
* `launch_browser(workdir)`: Debian's chromium driven by Playwright (its own browser download
  is not possible here): headless, no sandbox, no background networking, a fresh profile.
* `guard(context)`: every request to anything but 127.0.0.1 is aborted and recorded, with
  console errors, page errors and Content-Security-Policy refusals — a page that tries to
  reach the internet fails its test.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import socket
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import uvicorn

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
VIEWPORT = {"width": 1400, "height": 900}
LOCAL = ("http://127.0.0.1:", "ws://127.0.0.1:", "data:", "blob:", "about:")


def recent(days: float = 1) -> dict[str, str]:
    """`f` / `t` variables for a history window ending at the next whole hour (a window of
    whole hours is what the audits cache; a window of decades costs seconds)."""
    hour = 3600
    end = (int(time.time()) // hour + 1) * hour
    iso = lambda t: datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")  # noqa: E731
    return {"f": iso(end - int(days * 86400)), "t": iso(end)}


async def eventually(check, what: str, seconds: float = 30) -> Any:
    """Poll `check()` (async) until it returns something true; its value. The history writer
    drains behind the state store (batches, SQLite): seconds on a loaded machine."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while True:
        found = await check()
        if found:
            return found
        if loop.time() > deadline:
            raise AssertionError(f"not seen within {seconds:.0f} s: {what}")
        await asyncio.sleep(0.1)


@dataclass
class Site:
    url: str
    http: httpx.AsyncClient
    app: Any = None
    demo: Any = None  # the demo (its simulator) when served by serve_demo

    async def graphql(self, query: str, **variables: Any) -> dict:
        """The answer of /graphql itself: what the screens must show."""
        response = await self.http.post("/graphql", json={"query": query, "variables": variables})
        body = response.json()
        assert "errors" not in body, body
        return body["data"]


@contextlib.asynccontextmanager
async def serve_app(
    app: Any, *, ready_path: str = "/readyz", wait: float = 120
) -> AsyncIterator[Site]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    config = uvicorn.Config(
        app, log_config=None, access_log=False, lifespan="on", ws_ping_interval=None
    )
    server = uvicorn.Server(config)
    serving = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        async with httpx.AsyncClient(base_url=url, timeout=30) as http:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + wait
            while True:
                if serving.done():
                    await serving
                    raise RuntimeError("uvicorn stopped before the mirror was ready")
                if server.started and (await http.get(ready_path)).status_code == 200:
                    break
                if loop.time() > deadline:
                    raise RuntimeError(
                        f"not ready after {wait:.0f} s: {(await http.get(ready_path)).text}"
                    )
                await asyncio.sleep(0.05)
            yield Site(url=url, http=http, app=app)
    finally:
        server.should_exit = True
        await asyncio.wait_for(serving, 30)


@contextlib.asynccontextmanager
async def serve_demo(
    workdir: Path, *, settings: Any = None, access: Any = None
) -> AsyncIterator[Site]:
    from dra_mirror.service.runtime.demo import demo_app
    from dra_mirror.service.settings import Settings

    demo = demo_app(settings or Settings(), workdir=workdir, access=access)
    async with serve_app(demo.app) as site:
        site.demo = demo
        yield site


def chromium_missing() -> str | None:
    if Path(CHROMIUM).exists() or shutil.which("chromium"):
        return None
    return f"{CHROMIUM} is missing: scripts/test installs it (apt-get install -y chromium)"


@contextlib.asynccontextmanager
async def launch_browser(profile: Path) -> AsyncIterator[Any]:
    """A persistent Chromium context on a fresh profile directory (`profile` must be new)."""
    from playwright.async_api import async_playwright

    async with async_playwright() as playwright:
        context = await playwright.chromium.launch_persistent_context(
            str(profile),
            executable_path=CHROMIUM,
            headless=True,
            args=CHROMIUM_ARGS,
            viewport=VIEWPORT,
        )
        try:
            yield context
        finally:
            await context.close()


@dataclass
class Guard:
    """What a page did that it must not: reach beyond loopback, log errors, be refused."""

    foreign: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def problems(self) -> list[str]:
        return [f"request beyond 127.0.0.1: {u}" for u in self.foreign] + self.errors


async def guard(context: Any) -> Guard:
    found = Guard()

    async def route(route: Any) -> None:
        url = route.request.url
        if url.startswith(LOCAL):
            await route.continue_()
        else:
            found.foreign.append(url)
            await route.abort()

    await context.route("**/*", route)
    return found


def watch_page(page: Any, found: Guard) -> None:
    def console(message: Any) -> None:
        if message.type == "error":
            found.errors.append(f"console error: {message.text}")

    def websocket(socket: Any) -> None:
        if not socket.url.startswith(LOCAL):
            found.foreign.append(socket.url)

    page.on("console", console)
    page.on("pageerror", lambda error: found.errors.append(f"page error: {error}"))
    page.on("websocket", websocket)
