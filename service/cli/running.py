"""How a command runs its coroutine: until done, Ctrl-C or SIGTERM, ending quietly (exit 0).

`run(coro)` is what every long-running command (serve, watch, demo, sim) calls. Under uvicorn
(serve, watch, demo) uvicorn takes both signals while it serves and shuts down gracefully: it
stops accepting, gives open requests `SHUTDOWN_GRACE` seconds (`service.runtime.server`), and
runs the app's lifespan shutdown — the watches stop and their last batches reach the state
store, history drains, leases are released, stores close. uvicorn then raises the signal
again with the previous handler, ours: for SIGTERM that cancels what is left of `coro` instead
of letting the default action kill the process with status 143. Elsewhere (sim) SIGTERM
cancels `coro` like Ctrl-C, so its cleanup runs.

The event loop is uvloop's when uvloop is installed (it comes with `uvicorn[standard]` on
Linux; ~15% less CPU per request and per watch event than asyncio's own loop), else asyncio's.

Promises: the previous SIGTERM handler is restored when `run` returns; a signal received before
the coroutine starts ends it without running it. With a `deadline` (`service.cli.deadline`),
the first SIGTERM or Ctrl-C arms it — uvicorn's servers arm it themselves
(`DeadlineServer`) — and it is disarmed once `run` returns: the process exits by the
deadline even when a step of its shutdown hangs.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Callable, Coroutine
from types import FrameType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dra_mirror.service.cli.deadline import ShutdownDeadline

EventLoopFactory = Callable[[], asyncio.AbstractEventLoop]


def run(coro: Coroutine[Any, Any, None], *, deadline: ShutdownDeadline | None = None) -> None:
    """Run until done, Ctrl-C or SIGTERM; either signal ends the program quietly, exit 0 (or
    by the `deadline`, exit 3)."""
    termination = Termination(deadline)
    # signal.signal, not loop.add_signal_handler: uvicorn installs its handlers with
    # signal.signal and restores ours afterwards; a loop handler would fire under uvicorn's too
    # and cut its graceful shutdown short. Ours stays installed until every task has ended
    # (asyncio.run waits for them): a uvicorn server ending late re-raises into it, never into
    # the default action.
    previous = signal.signal(signal.SIGTERM, termination.on_signal)
    try:
        with (
            contextlib.suppress(KeyboardInterrupt),
            asyncio.Runner(loop_factory=loop_factory()) as runner,
        ):
            runner.run(termination.run(coro))
    finally:
        signal.signal(signal.SIGTERM, previous)
        if deadline is not None:
            deadline.disarm()


def loop_factory() -> EventLoopFactory | None:
    """uvloop's event loop when it is installed; None (asyncio's own) otherwise."""
    try:
        import uvloop
    except ImportError:
        return None
    factory: EventLoopFactory = uvloop.new_event_loop
    return factory


class Termination:
    """SIGTERM cancels the main task (when it still runs); the cancellation then ends it
    quietly."""

    def __init__(self, deadline: ShutdownDeadline | None = None) -> None:
        self.deadline = deadline
        self.received = False
        self.task: asyncio.Task[Any] | None = None
        self.loop: asyncio.AbstractEventLoop | None = None

    def on_signal(self, _signum: int, _frame: FrameType | None) -> None:
        self.received = True
        if self.deadline is not None:
            self.deadline.arm()
        task, loop = self.task, self.loop
        if task is None or loop is None or task.done() or loop.is_closed():
            return
        loop.call_soon_threadsafe(task.cancel)

    async def run(self, coro: Coroutine[Any, Any, None]) -> None:
        self.loop = asyncio.get_running_loop()
        self.task = asyncio.current_task()
        if self.received:  # terminated before the program started
            coro.close()
            return
        try:
            await coro
        except asyncio.CancelledError:
            if not self.received:
                raise
            if self.task is not None:
                self.task.uncancel()
