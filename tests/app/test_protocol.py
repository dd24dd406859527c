"""The serving HTTP protocol: a response's head and body leave in one write; streamed chunks
still leave as they are sent; closing or upgrading writes what is held first."""

from __future__ import annotations

import asyncio
import socket

import uvicorn
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse, StreamingResponse
from starlette.routing import Route

from dra_mirror.service.runtime.http_protocol import CoalescingTransport, protocol_class


class FakeTransport:
    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closed = False
        self.eof = False

    def write(self, data: bytes) -> None:
        self.writes.append(bytes(data))

    def write_eof(self) -> None:
        self.eof = True

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed

    def get_write_buffer_size(self) -> int:
        return 0


async def test_writes_within_one_turn_of_the_loop_leave_as_one():
    real = FakeTransport()
    transport = CoalescingTransport(real, asyncio.get_running_loop())  # type: ignore[arg-type]
    transport.write(b"HTTP/1.1 200 OK\r\n\r\n")
    transport.write(b"body")
    assert real.writes == [] and transport.get_write_buffer_size() == 23
    await asyncio.sleep(0)
    assert real.writes == [b"HTTP/1.1 200 OK\r\n\r\nbody"]
    transport.write(b"next")
    await asyncio.sleep(0)
    assert real.writes[-1] == b"next"


async def test_close_and_eof_write_what_is_held_and_abort_drops_it():
    real = FakeTransport()
    transport = CoalescingTransport(real, asyncio.get_running_loop())  # type: ignore[arg-type]
    transport.write(b"a")
    transport.write_eof()
    assert real.writes == [b"a"] and real.eof
    transport.write(b"b")
    transport.close()
    assert real.writes == [b"a", b"b"] and real.closed
    dropped = FakeTransport()
    transport = CoalescingTransport(dropped, asyncio.get_running_loop())  # type: ignore[arg-type]
    transport.write(b"c")
    transport.abort()
    await asyncio.sleep(0)
    assert dropped.writes == []


async def _request(port: int, path: str) -> list[bytes]:
    """The chunks the client receives for one keep-alive GET, until the response ends."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    chunks: list[bytes] = []
    try:
        while not b"".join(chunks).endswith((b"ok\n", b"0\r\n\r\n")):
            chunks.append(await asyncio.wait_for(reader.read(65536), 5))
    finally:
        writer.close()
    return chunks


async def test_a_response_arrives_whole_and_a_stream_chunk_by_chunk():
    async def plain(_request):
        return PlainTextResponse("ok\n")

    async def stream(_request):
        async def chunks():
            for part in (b"one", b"two"):
                yield part
                await asyncio.sleep(0.2)

        return StreamingResponse(chunks())

    app = Starlette(routes=[Route("/plain", plain), Route("/stream", stream)])
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, http=protocol_class(), lifespan="off", log_level="warning")
    server = uvicorn.Server(config)
    serving = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        for _ in range(500):
            if server.started:
                break
            await asyncio.sleep(0.01)
        whole = await _request(port, "/plain")
        assert (
            len(whole) == 1 and whole[0].startswith(b"HTTP/1.1 200") and whole[0].endswith(b"ok\n")
        )
        streamed = await _request(port, "/stream")
        assert len(streamed) >= 2 and b"one" in streamed[0] and b"two" not in streamed[0]
    finally:
        server.should_exit = True
        await serving
