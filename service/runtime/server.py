"""The HTTP server the mirror is served with: uvicorn's, built here for `serve`, `watch` and
`demo`.

`mirror_server(app, host=..., port=..., deadline=...)` is uvicorn's `Server` for the app:
the coalescing HTTP protocol (`service.runtime.http_protocol`: a response's head and body in
one write), uvicorn's logging left to ours, the lifespan on (the runtime's: nothing is
answered before it has started). `graceful` is how long open requests (and GraphQL
subscriptions) get after a stop signal before they are cancelled (None: uvicorn waits for
them); `access_log=False` leaves out uvicorn's line per request (the demo);
`header_timeout` and `max_connections` bound the connections (`http.header_timeout`,
`http.max_connections`: service.runtime.connection_limits).

`DeadlineServer` is uvicorn's server whose stop signals (SIGTERM, SIGINT) also arm the
shutdown deadline (`deadline.arm()`: the command line's `ShutdownDeadline`). uvicorn installs
its signal handlers for as long as it serves, in place of the program's; this is where the
first signal is seen. Imported only by the commands that serve (uvicorn is not loaded for the
others).
"""

from __future__ import annotations

from types import FrameType
from typing import Any, Protocol

import uvicorn

from dra_mirror.service.runtime.http_protocol import protocol_class

SHUTDOWN_GRACE = 5
"""Seconds open HTTP requests (and GraphQL subscriptions) get after SIGTERM before they are
cancelled; then the watches stop and history drains (Kubernetes waits 30 s by default)."""


class Deadline(Protocol):
    def arm(self) -> None:
        """Start the countdown to the process's exit (the first call; later ones keep it)."""
        ...


class DeadlineServer(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, *, deadline: Deadline) -> None:
        super().__init__(config)
        self.deadline = deadline

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        self.deadline.arm()
        super().handle_exit(sig, frame)


def mirror_server(
    app: Any,
    *,
    host: str,
    port: int,
    deadline: Deadline,
    graceful: int | None = SHUTDOWN_GRACE,
    access_log: bool = True,
    header_timeout: float = 10.0,
    max_connections: int = 0,
) -> DeadlineServer:
    """See the module docstring."""
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        # a response's head and body in one write; a head deadline, a cap on connections
        http=protocol_class(header_timeout, max_connections),
        log_config=None,
        access_log=access_log,
        lifespan="on",
        timeout_graceful_shutdown=graceful,
    )
    return DeadlineServer(config, deadline=deadline)
