"""For random scopes, every subscription event: claims and devices of the test world change
(every claim deleted, then created again, one at a time), and what a scoped subscriber gets is
exactly what an admin subscriber gets, filtered by the scope — no namespace outside it, no
event missing. Over a real WebSocket, the token of connection_init decides the scope."""

from __future__ import annotations

import asyncio
import hashlib
from typing import Any

import orjson
import pytest
import websockets
from hypothesis import HealthCheck, given, settings

from dra_mirror.schema import build_schema
from dra_mirror.schema.context import make_context
from dra_mirror.service.access.config import AccessConfig
from dra_mirror.service.access.control import AccessControl
from dra_mirror.service.access.scope import AccessScope
from dra_mirror.service.access.static import StaticTokens
from dra_mirror.service.model.normalize import normalize
from dra_mirror.service.runtime.compose import compose_app
from dra_mirror.service.runtime.lifespan import opened
from dra_mirror.service.settings import Settings
from dra_mirror.service.stores.memory import MemoryStore
from tests.feeding import feed

from ..schema import world
from ..schema.conftest import load_world
from ..slack.conftest import served
from .test_scope_property import namespaces_in, scopes

CLAIM_EVENTS = """subscription($c: String!) { claimEvents(cluster: $c) {
  type cluster namespace name old { namespace consumers { namespace } } new { namespace } } }"""
DEVICE_EVENTS = """subscription($c: String!) { deviceEvents(cluster: $c) {
  type cluster node
  old { status device { name withheldAllocations allocations { claim { namespace } } } }
  new { status device { name withheldAllocations allocations { claim { namespace } } } } } }"""
SCHEMA = build_schema()


def world_claims() -> list[tuple[str, Any]]:
    return [
        (cluster, normalize("ResourceClaim", raw, cluster=cluster))
        for cluster, build in world.WORLD.items()
        for raw in build()["ResourceClaim"]
    ]


async def churn(store: MemoryStore) -> None:
    """Every claim deleted, then created again: one batch each (claim and device events)."""
    claims = world_claims()
    for minute, (cluster, record) in enumerate(claims):
        await feed(store, cluster, deletes=[record], at=f"2026-01-01T03:{minute:02d}:00Z")
    for minute, (cluster, record) in enumerate(claims):
        await feed(store, cluster, upserts=[record], at=f"2026-01-01T04:{minute:02d}:00Z")


async def collect(store: MemoryStore, scope: AccessScope, found: list[dict]) -> None:
    subscriptions = []
    for cluster in world.WORLD:
        for document in (CLAIM_EVENTS, DEVICE_EVENTS):
            context = make_context(store, scope=scope)
            subscriptions.append(
                await SCHEMA.subscribe(
                    document, variable_values={"c": cluster}, context_value=context
                )
            )

    async def drain(events: Any) -> None:
        async for result in events:
            assert not result.errors, result.errors
            found.append(result.data)

    await asyncio.gather(*(drain(s) for s in subscriptions))


def visible(event: dict, scope: AccessScope) -> dict | None:
    """What the scope should get of an admin's event (None: nothing)."""
    if "claimEvents" in event:
        e = event["claimEvents"]
        return event if scope.allows(e["cluster"], e["namespace"]) else None
    e = event["deviceEvents"]
    if not scope.allows(e["cluster"]):
        return None
    out = orjson.loads(orjson.dumps(event))
    for side in ("old", "new"):
        device = (out["deviceEvents"][side] or {}).get("device")
        if device:
            shown = [
                a
                for a in device["allocations"]
                if scope.allows(e["cluster"], a["claim"]["namespace"])
            ]
            device["withheldAllocations"] += len(device["allocations"]) - len(shown)
            device["allocations"] = shown
    return out


async def wait_for(check, seconds: float = 5) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while not check():
        assert loop.time() < deadline, "events did not arrive"
        await asyncio.sleep(0.01)


async def settled(store: MemoryStore, *received: list[dict]) -> None:
    """Every published batch taken from its queue and the subscribers idle for a while."""
    await wait_for(store.live.drained)
    counts: list[int] = []
    for _ in range(100):
        if counts == (counts := [len(r) for r in received]):
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the subscribers never settled")


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scope=scopes)
async def test_every_event_a_scope_gets_is_an_admins_event_filtered_by_it(scope) -> None:
    store = MemoryStore()
    await load_world(store)
    everything: list[dict] = []
    mine: list[dict] = []
    seen = [c for c in world.WORLD if scope.allows_cluster(c)]
    subscribers = 2 * len(world.WORLD) + 2 * len(seen)  # nothing outside the scope subscribes
    tasks = [
        asyncio.create_task(collect(store, AccessScope.admin(), everything)),
        asyncio.create_task(collect(store, scope, mine)),
    ]
    try:
        await wait_for(lambda: store.live.subscribers == subscribers)
        await churn(store)
        await settled(store, everything, mine)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    claim_events = [e for e in everything if "claimEvents" in e]
    assert len(claim_events) == 2 * len(world_claims())  # a deletion and a creation of each
    assert any("deviceEvents" in e for e in everything)
    expected = [v for e in everything if (v := visible(e, scope)) is not None]
    key = lambda e: orjson.dumps(e, option=orjson.OPT_SORT_KEYS)  # noqa: E731
    assert sorted(map(key, mine)) == sorted(map(key, expected))
    for event in mine:
        for cluster, namespace in namespaces_in(event):
            assert scope.allows(cluster or "", namespace), (cluster, namespace)


TOKEN = "events-token-0123456789abcdef0123456789abcdef"


@pytest.mark.parametrize("where", ["connection_init", "header"])
async def test_over_a_websocket_the_token_decides_what_is_sent(where: str) -> None:
    digest = hashlib.sha256(TOKEN.encode()).hexdigest()
    tokens = StaticTokens.from_document(
        {
            "tokens": [
                {"name": "team-a", "sha256": digest, "scope": {"namespaces": ["east/team-a"]}}
            ]
        },
        where="test",
    )
    control = AccessControl(AccessConfig(static_tokens="t", rate_limit=0), authenticators=[tokens])
    store = MemoryStore()
    await load_world(store)
    app = compose_app(Settings(), store=store, access=opened(control))
    async with served(app) as url:
        address = url.replace("http://", "ws://") + "graphql"
        headers = {"Authorization": f"Bearer {TOKEN}"} if where == "header" else {}
        payload = {"Authorization": f"Bearer {TOKEN}"} if where == "connection_init" else {}
        async with websockets.connect(
            address, subprotocols=["graphql-transport-ws"], additional_headers=headers
        ) as socket:
            await socket.send(
                orjson.dumps({"type": "connection_init", "payload": payload}).decode()
            )
            assert orjson.loads(await socket.recv())["type"] == "connection_ack"
            query = 'subscription { claimEvents(cluster: "east") { namespace name } }'
            await socket.send(
                orjson.dumps({"id": "1", "type": "subscribe", "payload": {"query": query}}).decode()
            )
            await asyncio.sleep(0.2)
            await churn(store)
            got = []
            while True:
                try:
                    frame = await asyncio.wait_for(socket.recv(), 2)
                except TimeoutError:
                    break
                got.append(orjson.loads(frame)["payload"]["data"]["claimEvents"])
        spaces = {e["namespace"] for e in got}
        assert spaces == {"team-a"}, got
        async with websockets.connect(address, subprotocols=["graphql-transport-ws"]) as socket:
            await socket.send(orjson.dumps({"type": "connection_init", "payload": {}}).decode())
            with pytest.raises(websockets.ConnectionClosed) as closed:
                await asyncio.wait_for(socket.recv(), 5)
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 4403
