"""Every door has a budget: what a client can make the API do before (or without) showing who
it is, and how much one request, one WebSocket or one connection may cost.

Through the real app (in process, and under uvicorn on loopback where the socket matters):
a persisted query by GET needs a token; request fields of the wrong type and subscriptions
over HTTP are a 400; a batch is limited as a whole; no body is read before authentication,
an oversized one is drained and answered 413, a stalled one 408; a WebSocket's operations take
the rate limit and a connection ends with its token; silent connections are closed and capped;
an open mirror answers only its own host names; unknown tokens are rate-limited per client
before a review; `GET /mcp` is 405 at once; a selector over CEL's budget is BAD_SELECTOR."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import socket
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import orjson
import pytest
import uvicorn
import websockets
from asgi_lifespan import LifespanManager

from dra_mirror.service.access.config import AccessConfig
from dra_mirror.service.access.control import AccessControl
from dra_mirror.service.access.errors import Throttled, Unauthenticated
from dra_mirror.service.access.oidc import JwksFile, OidcSettings, OidcTokens
from dra_mirror.service.access.scope import AccessScope
from dra_mirror.service.access.static import StaticTokens, token_hash
from dra_mirror.service.access.subjects import Subject
from dra_mirror.service.runtime.compose import compose_app
from dra_mirror.service.runtime.http_protocol import protocol_class
from dra_mirror.service.runtime.lifespan import opened
from dra_mirror.service.settings import GraphQLSettings, HttpSettings, Settings
from dra_mirror.service.stores.memory import MemoryStore

from ..access.keys import AUDIENCE, ISSUER, SigningKey, jwks
from ..schema.conftest import load_world

ADMIN = {"authorization": "Bearer admin-token"}
VIEWER = {"query": "{ viewer { name } }"}


@pytest.fixture
async def store() -> MemoryStore:
    found = MemoryStore()
    await load_world(found)
    return found


def control(tmp_path, *, rate: float = 0.0, burst: int = 60, oidc: OidcTokens | None = None):
    tokens = tmp_path / "tokens.yaml"
    tokens.write_text(
        f"tokens:\n  - {{name: admin, sha256: {token_hash('admin-token')}, scope: {{admin: true}}}}\n"
    )
    config = AccessConfig(static_tokens=str(tokens), rate_limit=rate, rate_burst=burst)
    found: list[Any] = [StaticTokens.from_file(tokens)]
    if oidc is not None:
        found.append(oidc)
    return AccessControl(config, authenticators=found)


@contextlib.asynccontextmanager
async def app_client(store, access=None, *, http: HttpSettings | None = None, **limits):
    settings = Settings(graphql=GraphQLSettings(**limits), http=http or HttpSettings())
    app = compose_app(settings, store=store, access=opened(access) if access else None)
    async with LifespanManager(app) as manager:
        transport = httpx.ASGITransport(app=manager.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://m") as client:
            yield client, manager.app


@contextlib.asynccontextmanager
async def served(app: Any, **config: Any) -> AsyncIterator[int]:
    """`app` under uvicorn on a free loopback port (with `config`); yields the port."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_config=None, access_log=False, **config))
    serving = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        while not server.started:
            assert not serving.done(), "uvicorn stopped"
            await asyncio.sleep(0.01)
        yield sock.getsockname()[1]
    finally:
        server.should_exit = True
        await asyncio.wait_for(serving, 30)
        sock.close()


# --- requests that execute without a token, or as a 500 ---------------------------------------


async def test_a_persisted_query_by_get_needs_a_token_whatever_its_accept(store, tmp_path):
    query = "{ clusters { name } }"
    digest = hashlib.sha256(query.encode()).hexdigest()
    extensions = {"persistedQuery": {"version": 1, "sha256Hash": digest}}
    async with app_client(store, control(tmp_path)) as (http, _app):
        registered = await http.post(
            "/graphql", json={"query": query, "extensions": extensions}, headers=ADMIN
        )
        assert registered.status_code == 200, registered.text
        browser = {"accept": "text/html, application/json"}
        by_hash = await http.get(
            "/graphql", params={"extensions": json.dumps(extensions)}, headers=browser
        )
        assert by_hash.status_code == 401, by_hash.text
        by_name = await http.get("/graphql", params={"operationName": "x"}, headers=browser)
        assert by_name.status_code == 401
        page = await http.get("/graphql", headers={"accept": "text/html"})
        assert page.status_code == 200 and "<html" in page.text.lower()  # GraphiQL: no data


@pytest.mark.parametrize(
    "body",
    [
        {"query": "{ clusters { name } }", "operationName": 5},
        {"query": "{ clusters { name } }", "variables": [1]},
        {"query": 7},
        [{"query": "{ clusters { name } }", "extensions": "x"}],
    ],
)
async def test_request_fields_of_the_wrong_type_are_400(store, body):
    async with app_client(store) as (http, _app):
        answer = await http.post("/graphql", json=body)
    assert answer.status_code == 400 and "must be" in answer.text, answer.text


async def test_a_subscription_over_http_is_400_naming_the_websocket(store):
    query = 'subscription { claimEvents(cluster: "east") { type } }'
    async with app_client(store) as (http, _app):
        answer = await http.post("/graphql", json={"query": query})
    assert answer.status_code == 400 and "WebSocket" in answer.text, answer.text


async def test_a_batch_is_limited_as_a_whole(store):
    one = {"query": "{ a: devices(first: 10) { nodes { name } } }"}
    async with app_client(store, max_cost=25, max_batch=10) as (http, _app):
        assert (await http.post("/graphql", json=one)).status_code == 200
        answer = await http.post("/graphql", json=[one] * 3)  # each alone within max_cost
        assert answer.status_code == 400 and "batch as a whole" in answer.text, answer.text


async def test_a_batch_shares_one_execution_budget(store):
    """Six operations, each within `max_resolved_fields` alone, over it together."""
    one = {"query": "{ clusters { name } }"}
    async with app_client(store, max_resolved_fields=10, max_batch=10) as (http, _app):
        single = (await http.post("/graphql", json=one)).json()
        assert "errors" not in single and single["data"]["clusters"], single
        results = (await http.post("/graphql", json=[one] * 6)).json()
    codes = [e["extensions"]["code"] for r in results for e in r.get("errors") or []]
    assert "BUDGET_EXCEEDED" in codes, results


# --- bodies: nothing before authentication, drained refusals, stalls -------------------------


async def test_no_body_is_read_before_authentication(store, tmp_path):
    """An anonymous POST announcing 1 MB and sending 64 KB: refused 401 as soon as its head
    arrived — the body is not read first — then the rest it sends is read and dropped."""
    sent: list[dict] = []
    parts = [b"x" * 65536] * 15

    async def receive() -> dict:
        if parts:
            part = parts.pop(0)
            return {"type": "http.request", "body": part, "more_body": bool(parts)}
        await asyncio.sleep(3600)
        raise AssertionError("unreachable")

    async def send(message: dict) -> None:
        sent.append({**message, "parts_left": len(parts)})

    scope = {"type": "http", "method": "POST", "path": "/graphql", "query_string": b"",
             "headers": [(b"content-type", b"application/json"),
                         (b"content-length", str(1_000_000).encode())],
             "client": ("127.0.0.1", 4), "server": ("127.0.0.1", 80)}  # fmt: skip
    http = HttpSettings(body_timeout=0.3)
    async with app_client(store, control(tmp_path), http=http) as (_http, app):
        await asyncio.wait_for(app(scope, receive, send), 10)
    assert sent[0]["status"] == 401
    assert sent[0]["parts_left"] == 15  # answered before the body was touched
    assert (b"connection", b"close") in sent[0]["headers"]
    assert not parts  # what the client sent was read and dropped: it reads the answer


async def test_a_body_over_the_limit_sent_whole_is_answered_413_not_reset(store):
    app = compose_app(Settings(), store=store)
    async with served(app, lifespan="on") as port:
        for size in (1_500_000, 6_000_000):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            head = (f"POST /graphql HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                    f"application/json\r\nContent-Length: {size}\r\n\r\n").encode()  # fmt: skip
            writer.write(head + b" " * size)  # the whole body, as urllib sends it
            await writer.drain()
            answer = await asyncio.wait_for(reader.read(), 30)
            writer.close()
            assert answer.startswith(b"HTTP/1.1 413"), answer[:100]
            assert b"BODY_TOO_LARGE" in answer


async def test_a_stalled_body_is_408(store):
    async def receive() -> dict:
        if not receive.sent:  # type: ignore[attr-defined]
            receive.sent = True  # type: ignore[attr-defined]
            return {"type": "http.request", "body": b'{"query": ', "more_body": True}
        await asyncio.sleep(3600)
        raise AssertionError("unreachable")

    receive.sent = False  # type: ignore[attr-defined]
    sent: list[dict] = []

    async def send(message: dict) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": "/graphql", "query_string": b"",
             "headers": [(b"content-type", b"application/json"), (b"content-length", b"100")],
             "client": ("127.0.0.1", 4), "server": ("127.0.0.1", 80)}  # fmt: skip
    async with app_client(store, http=HttpSettings(body_timeout=0.2)) as (_http, app):
        started = time.monotonic()
        await asyncio.wait_for(app(scope, receive, send), 10)
    assert sent[0]["status"] == 408 and time.monotonic() - started < 5


# --- connections ------------------------------------------------------------------------------


async def test_silent_connections_are_closed_and_capped(store):
    """40 connections that send nothing against a cap of 20 and a 0.5 s head deadline: the
    oldest are closed at once, the others by the deadline; /healthz is answered throughout."""
    app = compose_app(Settings(), store=store)
    http = protocol_class(header_timeout=0.5, max_connections=20)
    async with served(app, http=http, lifespan="on") as port:
        silent = [await asyncio.open_connection("127.0.0.1", port) for _ in range(40)]
        async with httpx.AsyncClient(timeout=5) as client:
            assert (await client.get(f"http://127.0.0.1:{port}/healthz")).status_code == 200
        closed = 0
        for reader, _writer in silent:
            with contextlib.suppress(TimeoutError, ConnectionError):
                closed += await asyncio.wait_for(reader.read(1), 3) == b""
        assert closed == 40
        for _reader, writer in silent:
            writer.close()


async def test_an_open_mirror_answers_only_its_own_host_names(store):
    async with app_client(store, http=HttpSettings(allowed_hosts=("dash.example",))) as (h, _a):
        rebound = await h.post("/graphql", json=VIEWER, headers={"host": "rebound.example"})
        assert rebound.status_code == 421 and "ALLOWED_HOSTS" in rebound.text
        for host in ("localhost:8000", "127.0.0.1", "[::1]:8000", "m", "dash.example."):
            answer = await h.post("/graphql", json=VIEWER, headers={"host": host})
            assert answer.status_code == 200, (host, answer.text)


class Reviewed:
    """A remote reviewer of tokens that counts its reviews (as Kubernetes TokenReview)."""

    method = "kubernetes"

    def __init__(self) -> None:
        self.reviews = 0
        self.cache: dict[str, Any] = {}

    def claims(self, token: str) -> bool:
        return True

    def known(self, token: str) -> bool:
        return token in self.cache

    async def authenticate(self, token: str) -> Subject:
        self.reviews += 1
        self.cache[token] = Unauthenticated("no")
        raise Unauthenticated("unknown token")

    async def close(self) -> None:
        pass


async def test_unknown_tokens_are_rate_limited_per_client_before_their_review():
    reviewer = Reviewed()
    config = AccessConfig(rate_limit=1.0, rate_burst=5)
    access = AccessControl(config, authenticators=[reviewer])
    refused = {Unauthenticated: 0, Throttled: 0}
    for i in range(100):
        with contextlib.suppress(Unauthenticated, Throttled):
            try:
                await access.subject(f"Bearer garbage-{i}", client="192.0.2.1")
            except (Unauthenticated, Throttled) as error:
                refused[type(error)] += 1
                raise
    assert reviewer.reviews <= 6 and refused[Throttled] >= 94, (reviewer.reviews, refused)
    with pytest.raises(Unauthenticated):  # another client has its own budget
        await access.subject("Bearer garbage-new", client="192.0.2.2")


# --- WebSockets -------------------------------------------------------------------------------


async def test_websocket_operations_take_the_rate_limit_and_end_with_the_token(store, tmp_path):
    key = SigningKey("k1")
    (tmp_path / "jwks.json").write_text(json.dumps(jwks(key)))
    oidc = OidcTokens(
        OidcSettings(issuer=ISSUER, audience=AUDIENCE, clock_skew=0,
                     groups={"ml": AccessScope.admin()}),
        keys=JwksFile(tmp_path / "jwks.json"),
    )  # fmt: skip
    access = control(tmp_path, rate=1.0, burst=5, oidc=oidc)
    app = compose_app(Settings(), store=store, access=opened(access))
    async with served(app, lifespan="on") as port:
        url = f"ws://127.0.0.1:{port}/graphql"
        # long enough for the twenty operations below on a busy machine; the stream must
        # still end when the token does
        expires = int(time.time()) + 8
        token = key.token(exp=expires)
        async with websockets.connect(url, subprotocols=["graphql-transport-ws"]) as ws:
            init = {"type": "connection_init", "payload": {"Authorization": f"Bearer {token}"}}
            await ws.send(orjson.dumps(init).decode())
            assert orjson.loads(await asyncio.wait_for(ws.recv(), 10))["type"] == "connection_ack"
            kinds: list[str] = []
            for i in range(20):  # one at a time: each answered before the next
                await ws.send(orjson.dumps({"id": str(i), "type": "subscribe",
                                            "payload": VIEWER}).decode())  # fmt: skip
                while True:
                    message = orjson.loads(await asyncio.wait_for(ws.recv(), 10))
                    if message["type"] in ("complete", "error"):
                        kinds.append(message["type"])
                        break
            assert kinds.count("complete") <= 7 and kinds.count("error") >= 13, kinds
            subscribe = {"id": "live", "type": "subscribe", "payload": {
                "query": 'subscription { claimEvents(cluster: "east") { type } }'}}  # fmt: skip
            await asyncio.sleep(1.1)  # a token back in the bucket
            await ws.send(orjson.dumps(subscribe).decode())
            with pytest.raises(websockets.ConnectionClosed) as closed:
                async with asyncio.timeout(10):
                    while True:
                        await ws.recv()
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 4403
            assert time.time() - expires < 3  # ended with its token, not streaming on


# --- the rest ---------------------------------------------------------------------------------


async def test_get_mcp_is_405_at_once(store, tmp_path):
    async with app_client(store, control(tmp_path)) as (http, _app):
        started = time.monotonic()
        answer = await http.get("/mcp", headers=ADMIN)
    assert answer.status_code == 405 and time.monotonic() - started < 5


async def test_a_selector_over_cels_budget_is_refused_as_a_bad_selector(store):
    items = ",".join(str(i) for i in range(60))
    selector = f"[{items}].all(a, [{items}].all(b, [{items}].all(c, a + b + c >= 0)))"
    query = "query($s: String!) { findDevices(selector: $s) { totalCount } }"
    async with app_client(store) as (http, _app):
        answer = await http.post("/graphql", json={"query": query, "variables": {"s": selector}})
    codes = [e["extensions"]["code"] for e in answer.json()["errors"]]
    assert codes == ["BAD_SELECTOR"] and "budget" in answer.text, answer.text
