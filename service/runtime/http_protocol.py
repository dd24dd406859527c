"""uvicorn's HTTP protocol (httptools) with each response's writes joined into one.

uvicorn writes a response as two socket writes: the status line and headers when the app
sends `http.response.start`, then the body when it sends `http.response.body`. On a
keep-alive connection that is two sends, two TCP segments and two wake-ups of the client for
every small answer — on loopback about as much CPU as a GraphQL query's own work.

`CoalescingHttpProtocol` (the `http=` of `uvicorn.Config`) hands uvicorn a transport that
holds what is written during one turn of the event loop and writes it as one buffer at the
end of that turn (`loop.call_soon`). A response whose start and body are sent back to back —
every Starlette `Response`, the GraphQL view's answers — goes out in one write; a streamed
response (server-sent events, a CSV export) still goes out as the app sends it, each chunk at
most one turn of the loop later. Nothing is held across an `await` that suspends: closing,
ending the stream (`write_eof`) and handing the connection to another protocol (a WebSocket
upgrade) write what is held first; `abort` drops it, as the transport's own buffer is dropped.

The same protocol bounds the connections (`service.runtime.connection_limits`: a deadline for
each request's head, a cap on open connections). Without httptools (uvicorn's pure-Python h11
protocol), `protocol_class()` is uvicorn's default, unchanged.
"""

from __future__ import annotations

import asyncio
import functools
from typing import Any


class CoalescingTransport:
    """A transport whose writes within one turn of the event loop become one write."""

    __slots__ = ("_held", "_loop", "_transport")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._held: list[bytes] | None = None

    def write(self, data: bytes | bytearray | memoryview) -> None:
        held = self._held
        if held is None:
            self._held = [bytes(data)]
            self._loop.call_soon(self.flush)
        else:
            held.append(bytes(data))

    def writelines(self, chunks: Any) -> None:
        for chunk in chunks:
            self.write(chunk)

    def flush(self) -> None:
        held, self._held = self._held, None
        if held and not self._transport.is_closing():
            self._transport.write(held[0] if len(held) == 1 else b"".join(held))

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def write_eof(self) -> None:
        self.flush()
        self._transport.write_eof()

    def abort(self) -> None:
        self._held = None
        self._transport.abort()

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        self.flush()
        self._transport.set_protocol(protocol)

    def get_write_buffer_size(self) -> int:
        held = sum(len(chunk) for chunk in self._held or ())
        return held + self._transport.get_write_buffer_size()

    def is_closing(self) -> bool:
        return self._transport.is_closing()

    def pause_reading(self) -> None:
        self._transport.pause_reading()

    def resume_reading(self) -> None:
        self._transport.resume_reading()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self._transport.get_extra_info(name, default)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


@functools.cache
def protocol_class(
    header_timeout: float = 10.0, max_connections: int = 0
) -> type[asyncio.Protocol] | str:
    """The `http=` to give `uvicorn.Config`: the coalescing protocol when httptools is
    installed — with the head deadline and the connection cap of `connection_limits`
    (`http.header_timeout`, `http.max_connections`) — else uvicorn's own choice ("auto")."""
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
    except ImportError:  # no httptools: uvicorn's h11 protocol, as "auto" picks it
        return "auto"

    from dra_mirror.service.runtime.connection_limits import ConnectionLimits

    class CoalescingHttpProtocol(ConnectionLimits, HttpToolsProtocol):
        """uvicorn's httptools protocol writing through a `CoalescingTransport`."""

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            wrapped: Any = CoalescingTransport(transport, self.loop)
            super().connection_made(wrapped)

    CoalescingHttpProtocol.header_timeout = header_timeout
    CoalescingHttpProtocol.max_connections = max_connections
    return CoalescingHttpProtocol
