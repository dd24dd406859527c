"""The schema tests' two-cluster world in a real MemoryStore, the real app over it with Slack
commands on, and requests signed by slack_sdk's own `SignatureVerifier.generate_signature`.

The world (`tests.schema.world`: raw Kubernetes objects and the truth computed from the dicts)
is fed to the store through the model's `normalize` and the index it serves, as the reactor does.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from urllib.parse import urlencode

import httpx
import pytest
import uvicorn
from asgi_lifespan import LifespanManager
from slack_sdk.signature import SignatureVerifier
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from dra_mirror.service.model.normalize import normalize
from dra_mirror.service.runtime.compose import compose_app
from dra_mirror.service.settings import Settings
from dra_mirror.service.slack import SigningSecret, SlackSettings
from dra_mirror.service.stores.memory import MemoryStore
from dra_mirror.service.stores.protocols import ClusterStatus
from tests.feeding import feed
from tests.schema import world

SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
LOADED_AT = "2026-01-01T02:00:00Z"
QUERIED_AT = datetime(2026, 1, 1, 3, 0, 0, tzinfo=UTC)
KIND_ORDER = (
    "Node",
    "DeviceClass",
    "ResourceSlice",
    "ResourceClaimTemplate",
    "ResourceClaim",
    "Pod",
)


async def load_world(store: MemoryStore) -> None:
    for cluster, build in world.WORLD.items():
        objects = build()
        upserts = [normalize(k, raw, cluster=cluster) for k in KIND_ORDER for raw in objects[k]]
        await feed(store, cluster, upserts=upserts, at=LOADED_AT)
        await store.set_status(ClusterStatus(name=cluster, connected=True, synced=True))


@pytest.fixture
async def slack_store() -> MemoryStore:
    """A store of its own for each test: an app's lifespan closes (empties) its store."""
    store = MemoryStore()
    await load_world(store)
    return store


def signed(
    text: str,
    *,
    secret: str = SECRET,
    timestamp: int | None = None,
    response_url: str = "https://hooks.slack.com/commands/T0/1/abc",
    **extra: str,
) -> tuple[bytes, dict[str, str]]:
    """A slash-command form body and the headers Slack would send with it."""
    form = {
        "token": "deprecated-verification-token",
        "team_id": "T0001",
        "channel_id": "C2147483705",
        "user_id": "U2147483697",
        "user_name": "oncall",
        "command": "/gpu",
        "text": text,
        "response_url": response_url,
        "trigger_id": "13345224609.738474920.8088930838d88f008e0",
        **extra,
    }
    body = urlencode(form).encode()
    ts = str(int(time.time()) if timestamp is None else timestamp)
    signature = SignatureVerifier(secret).generate_signature(timestamp=ts, body=body)
    assert signature is not None
    return body, {
        "content-type": "application/x-www-form-urlencoded",
        "x-slack-request-timestamp": ts,
        "x-slack-signature": signature,
    }


class Slack:
    """Posts slash commands to the app as Slack does."""

    def __init__(self, http: httpx.AsyncClient) -> None:
        self.http = http

    async def post(self, body: bytes, headers: dict[str, str]) -> httpx.Response:
        return await self.http.post("/slack/commands", content=body, headers=headers)

    async def command(self, text: str, **kw: str) -> dict:
        response = await self.post(*signed(text, **kw))
        assert response.status_code == 200, response.text
        return response.json()


def slack_settings(**kw: object) -> SlackSettings:
    return SlackSettings(signing_secret=SigningSecret(SECRET), **kw)  # type: ignore[arg-type]


@pytest.fixture(scope="session")
async def slack() -> AsyncIterator[Slack]:
    """The app with Slack commands on, over its own store, for the whole session."""
    store = MemoryStore()
    await load_world(store)
    app = compose_app(Settings(), store=store, now=lambda: QUERIED_AT, slack=slack_settings())
    async with LifespanManager(app) as manager:
        transport = httpx.ASGITransport(app=manager.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://mirror") as http:
            yield Slack(http)


class Receiver:
    """Stands in for Slack's response_url host: a real uvicorn on loopback recording posts."""

    def __init__(self) -> None:
        self.url = ""
        self.posts: list[tuple[str, dict]] = []

    async def hook(self, request: Request) -> PlainTextResponse:
        self.posts.append((request.url.path, await request.json()))
        return PlainTextResponse("ok")


@contextlib.asynccontextmanager
async def served(app: object) -> AsyncIterator[str]:
    """`app` served by uvicorn on a free loopback port; yields its base URL."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(
        uvicorn.Config(app, log_config=None, access_log=False, lifespan="on")  # type: ignore[arg-type]
    )
    try:
        serving = asyncio.create_task(server.serve(sockets=[sock]))
        try:
            while not server.started:
                assert not serving.done(), "uvicorn stopped"
                await asyncio.sleep(0.01)
            yield f"http://127.0.0.1:{port}/"
        finally:
            server.should_exit = True
            await asyncio.wait_for(serving, 30)
    finally:
        sock.close()


@pytest.fixture(scope="session")
async def receiver_server() -> AsyncIterator[Receiver]:
    receiver = Receiver()
    app = Starlette(routes=[Route("/{path:path}", receiver.hook, methods=["POST"])])
    async with served(app) as url:
        receiver.url = url
        yield receiver


@pytest.fixture
def receiver(receiver_server: Receiver) -> Receiver:
    receiver_server.posts.clear()
    return receiver_server
