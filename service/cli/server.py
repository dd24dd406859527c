"""The uvicorn server that `serve`, `watch` and `demo` run: uvicorn's own, whose stop signals
(SIGTERM, SIGINT) also arm the shutdown deadline (`service.cli.deadline`).

uvicorn installs its signal handlers for as long as it serves, in place of the program's; this
is where the first signal is seen. Imported only by the commands that serve (uvicorn is not
loaded for the others).
"""

from __future__ import annotations

from types import FrameType

import uvicorn

from dra_mirror.service.cli.deadline import ShutdownDeadline


class DeadlineServer(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, *, deadline: ShutdownDeadline) -> None:
        super().__init__(config)
        self.deadline = deadline

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        self.deadline.arm()
        super().handle_exit(sig, frame)
