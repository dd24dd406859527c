"""Bounds on the connections uvicorn holds: a deadline for each request's head, and a cap.

uvicorn closes a keep-alive connection that stays idle after a response (`timeout_keep_alive`),
but it waits forever for the first bytes of a new connection and for the rest of a request's
head: 20,000 connections that sent nothing exhausted the process's file descriptors, and
`/healthz` itself could no longer be answered. `ConnectionLimits`, mixed into uvicorn's
httptools protocol (service.runtime.http_protocol), adds:

* a head deadline: a connection has `header_timeout` seconds, from when it opens and from
  the first byte of each request, to send the whole request head (method, path, headers);
  past it the connection is closed (nothing was read that could be answered);
* a cap: past `max_connections` open connections, each new one closes the connection that
  has waited longest without a request in progress (a silent one, or an idle keep-alive)
  — never one whose request head has arrived — so the newest callers (a probe, a person)
  are served and the descriptors are never all taken. `max_connections` 0: four fifths of
  the process's `RLIMIT_NOFILE`.

The idle connections are kept in open order in one map per server (`ServerState`), so the
cap costs O(1) per connection, not a scan of all of them.
"""

from __future__ import annotations

import logging
import resource
from collections import OrderedDict
from typing import Any

log = logging.getLogger(__name__)

_IDLE = "_dra_mirror_idle"  # the server state's map of idle connections, in open order


def default_cap() -> int:
    """Four fifths of the file descriptor limit (the rest: files, Redis, SQL, the clusters)."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return 100_000
    return max(64, soft * 4 // 5)


class ConnectionLimits:
    """A mixin for uvicorn's `HttpToolsProtocol` (see the module docstring). The attributes it
    reads (`loop`, `transport`, `server_state`, `cycle`) are the protocol's."""

    header_timeout: float = 10.0
    max_connections: int = 0
    loop: Any
    transport: Any
    server_state: Any
    cycle: Any

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)  # type: ignore[misc]
        self._head_timer: Any = None
        self._waiting_head()
        self._idle_now()
        self._cap()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_head_timer()
        self._busy()
        super().connection_lost(exc)  # type: ignore[misc]

    def on_message_begin(self) -> None:
        super().on_message_begin()  # type: ignore[misc]
        self._waiting_head()

    def on_headers_complete(self) -> None:
        self._stop_head_timer()
        self._busy()  # a request to answer: never closed by the cap
        super().on_headers_complete()  # type: ignore[misc]

    def on_response_complete(self) -> None:
        super().on_response_complete()  # type: ignore[misc]
        if not self.transport.is_closing():
            self._idle_now()

    # --- the head deadline ---------------------------------------------------------------

    def _waiting_head(self) -> None:
        self._stop_head_timer()
        self._head_timer = self.loop.call_later(self.header_timeout, self._head_late)

    def _stop_head_timer(self) -> None:
        timer = getattr(self, "_head_timer", None)
        if timer is not None:
            timer.cancel()
            self._head_timer = None

    def _head_late(self) -> None:
        self._head_timer = None
        if not self.transport.is_closing():
            self.transport.close()

    # --- the cap -------------------------------------------------------------------------

    def _idle(self) -> OrderedDict[int, ConnectionLimits]:
        idle = getattr(self.server_state, _IDLE, None)
        if idle is None:
            idle = OrderedDict()
            setattr(self.server_state, _IDLE, idle)
        return idle

    def _idle_now(self) -> None:
        idle = self._idle()
        idle.pop(id(self), None)
        idle[id(self)] = self

    def _busy(self) -> None:
        self._idle().pop(id(self), None)

    def _cap(self) -> None:
        cap = self.max_connections or default_cap()
        connections = self.server_state.connections
        idle = self._idle()
        closed = 0
        while len(connections) - closed > cap and idle:
            _key, oldest = idle.popitem(last=False)
            if oldest is self:
                idle[id(self)] = self  # the newest is served; close an older one
                if len(idle) == 1:
                    break
                continue
            if not oldest.transport.is_closing():
                oldest.transport.close()
                closed += 1
        if closed:
            log.info("%d connections open, over the cap of %d: closed the %d longest idle",
                     len(connections), cap, closed)  # fmt: skip
