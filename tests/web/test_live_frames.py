"""Live events reach browsers: graphql-transport-ws messages go out as text frames.

Browser clients (graphql-ws, which the screens and GraphiQL use) parse only text frames; a
binary frame fails with "Message is missing the 'type' property". Checked with a real
`websockets` client against the app under uvicorn on loopback."""

from __future__ import annotations

import asyncio
import socket

import orjson
import uvicorn
import websockets

from dra_mirror.service.runtime.compose import compose_app
from dra_mirror.service.settings import Settings
from dra_mirror.service.stores.memory import MemoryStore


async def test_subscription_messages_are_text_frames() -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    app = compose_app(Settings(), store=MemoryStore())
    server = uvicorn.Server(uvicorn.Config(app, log_config=None))
    serving = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        for _ in range(200):
            if server.started:
                break
            await asyncio.sleep(0.02)
        url = f"ws://127.0.0.1:{sock.getsockname()[1]}/graphql"
        async with websockets.connect(url, subprotocols=["graphql-transport-ws"]) as ws:
            await ws.send(orjson.dumps({"type": "connection_init"}).decode())
            ack = await asyncio.wait_for(ws.recv(), 10)
            assert isinstance(ack, str), f"binary frame: {ack!r}"
            assert orjson.loads(ack) == {"type": "connection_ack"}
            await ws.send(orjson.dumps({"id": "1", "type": "ping"}).decode())
            await ws.send(
                orjson.dumps(
                    {"id": "2", "type": "subscribe", "payload": {"query": "{ clusters { name } }"}}
                ).decode()
            )
            frames = [await asyncio.wait_for(ws.recv(), 10) for _ in range(3)]
            assert all(isinstance(f, str) for f in frames), frames
            types = [orjson.loads(f)["type"] for f in frames]
            assert types == ["pong", "next", "complete"], types
    finally:
        server.should_exit = True
        await asyncio.wait_for(serving, 10)
