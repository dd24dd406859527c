"""Live subscriptions end to end: a real `websockets` client speaking graphql-transport-ws to
the app under a real uvicorn on loopback, the app reading a RedisStore (pub/sub) or the
embedded MemoryStore (in-process bus), and batches folded into the index the store opens and
applied to it (as the watchers do) arriving as claimEvents / deviceEvents with their change
type and old and new state."""

from __future__ import annotations

import asyncio
import socket
import uuid

import orjson
import pytest
import uvicorn
import websockets

from dra_mirror.service.model.index import Event
from dra_mirror.service.runtime.compose import compose_app
from dra_mirror.service.settings import Settings
from dra_mirror.service.stores.memory import MemoryStore
from dra_mirror.service.stores.protocols import ClusterStatus
from dra_mirror.service.stores.redis import RedisStore
from tests.model.builders import claim, device, node, pod, slice_

CLAIMS = """subscription { claimEvents(cluster: "east", namespace: "ns") {
  type cluster namespace name old { state } new { state allocation { devices { device { name } } } } } }"""
DEVICES = """subscription { deviceEvents(cluster: "east", node: "n1") {
  type node old { status device { name } } new { status device { name uuid } } } }"""


def free_socket() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


async def subscribe(url: str, query: str):
    ws = await websockets.connect(url, subprotocols=["graphql-transport-ws"])
    await ws.send(orjson.dumps({"type": "connection_init"}).decode())
    assert orjson.loads(await ws.recv())["type"] == "connection_ack"
    await ws.send(
        orjson.dumps({"id": "1", "type": "subscribe", "payload": {"query": query}}).decode()
    )
    return ws


async def next_payload(ws) -> dict:
    message = orjson.loads(await asyncio.wait_for(ws.recv(), 10))
    assert message["type"] == "next", message
    return message["payload"]


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.redis)])
def live_store(request: pytest.FixtureRequest):
    if request.param == "memory":
        return MemoryStore()
    url = request.getfixturevalue("redis_url")
    return RedisStore.from_url(url, prefix=f"test-live-{uuid.uuid4().hex[:8]}")


async def test_claim_and_device_events_over_websocket(live_store) -> None:
    store = live_store
    sock = free_socket()
    server = uvicorn.Server(uvicorn.Config(compose_app(Settings(), store=store), log_config=None))
    serving = asyncio.create_task(server.serve(sockets=[sock]))
    index = store.open_index("east")
    await store.set_status(ClusterStatus(name="east"))  # as its reactor does when it starts
    try:
        for _ in range(200):
            if server.started:
                break
            await asyncio.sleep(0.02)
        url = f"ws://127.0.0.1:{sock.getsockname()[1]}/graphql"
        claims = await subscribe(url, CLAIMS)
        devices = await subscribe(url, DEVICES)
        await asyncio.sleep(0.3)  # both subscriptions are listening on the Redis channel
        gpu = slice_("n1-gpu", pool="n1", node="n1", devices=(device("gpu-0", uuid="GPU-A"),))
        await store.apply(index.apply([Event("ADDED", gpu), Event("ADDED", node("n1"))], at="t1"))
        await store.apply(index.apply([Event("ADDED", claim("c"))], at="t2"))
        held = claim("c", devices=(("n1", "gpu-0"),), node="n1", rv="2")
        await store.apply(index.apply([Event("MODIFIED", held)], at="t3"))
        await store.apply(index.apply([Event("DELETED", held)], at="t4"))

        events = [(await next_payload(claims))["data"]["claimEvents"] for _ in range(3)]
        assert [(e["type"], e["name"]) for e in events] == [
            ("ADDED", "c"),
            ("MODIFIED", "c"),
            ("DELETED", "c"),
        ]
        assert events[0]["old"] is None and events[0]["new"]["state"] == "PENDING"
        assert events[1]["old"]["state"] == "PENDING" and events[1]["new"] == {
            "state": "ALLOCATED",
            "allocation": {"devices": [{"device": {"name": "gpu-0"}}]},
        }
        assert events[2]["old"]["state"] == "ALLOCATED" and events[2]["new"] is None

        events = [(await next_payload(devices))["data"]["deviceEvents"] for _ in range(3)]
        assert events[0] == {
            "type": "ADDED",
            "node": "n1",
            "old": None,
            "new": {"status": "FREE", "device": {"name": "gpu-0", "uuid": "GPU-A"}},
        }
        assert [(e["type"], e["old"]["status"], e["new"]["status"]) for e in events[1:]] == [
            ("MODIFIED", "FREE", "HELD"),
            ("MODIFIED", "HELD", "FREE"),
        ]
        for ws in (claims, devices):
            await ws.close()
    finally:
        server.should_exit = True
        await serving
        await store.close()


MOMENTS = """subscription { claimEvents(cluster: "east", namespace: "ns") {
  type name old { idle idleSince consumers { name phase } }
  new { idle idleSince consumers { name phase } } } }"""


async def test_claim_events_carry_the_idle_mark_and_consumers_of_their_moment(live_store) -> None:
    # A consumer pod changing phase changes no claim object, only what is derived from it:
    # subscribers hear of it, each event answered from its own moment (old and new side).
    store = live_store
    sock = free_socket()
    server = uvicorn.Server(uvicorn.Config(compose_app(Settings(), store=store), log_config=None))
    serving = asyncio.create_task(server.serve(sockets=[sock]))
    index = store.open_index("east")
    try:
        for _ in range(200):
            if server.started:
                break
            await asyncio.sleep(0.02)
        for kind in ("ResourceSlice", "ResourceClaim", "Pod"):  # listed: pods are known
            await store.apply(index.resync(kind, [], at="t0"))
        url = f"ws://127.0.0.1:{sock.getsockname()[1]}/graphql"
        ws = await subscribe(url, MOMENTS)
        await asyncio.sleep(0.3)
        held = claim(
            "c", devices=(("n1", "gpu-0"),), consumers=(("p1", "uid-p1"), ("p2", "uid-p2"))
        )
        at = "2026-05-01T00:00:0{}Z".format
        pods = [pod("p1", phase="Running"), pod("p2", phase="Pending")]
        await store.apply(index.apply([Event("ADDED", r) for r in (held, *pods)], at=at(1)))
        await store.apply(index.apply([Event("MODIFIED", pod("p2", rv="2"))], at=at(2)))
        done = [pod(p, phase="Succeeded", rv="3") for p in ("p1", "p2")]
        await store.apply(index.apply([Event("MODIFIED", p) for p in done], at=at(3)))
        events = [(await next_payload(ws))["data"]["claimEvents"] for _ in range(3)]
        await ws.close()
    finally:
        server.should_exit = True
        await serving
        await store.close()

    def side(e: dict, which: str) -> tuple:
        s = e[which]
        return s and (s["idle"], s["idleSince"], [(p["name"], p["phase"]) for p in s["consumers"]])

    assert [(e["type"], side(e, "old"), side(e, "new")) for e in events] == [
        ("ADDED", None, (False, None, [("p1", "Running"), ("p2", "Pending")])),
        ("MODIFIED", (False, None, [("p1", "Running"), ("p2", "Pending")]),
         (False, None, [("p1", "Running"), ("p2", "Running")])),
        ("MODIFIED", (False, None, [("p1", "Running"), ("p2", "Running")]),
         (True, "2026-05-01T00:00:03Z", [("p1", "Succeeded"), ("p2", "Succeeded")])),
    ]  # fmt: skip
