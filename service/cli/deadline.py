"""The shutdown deadline: a process told to stop exits by then, whatever still runs.

The graceful shutdown (`service.cli.running`) stops accepting requests, gives open ones
`SHUTDOWN_GRACE` seconds (`service.runtime.server`), stops the watches, drains the history
outbox, releases the leases and closes the stores. Each step waits on something outside the
process, and some waits are not bounded by the shutdown: a frozen Redis answers nothing until
the client's 30 s socket timeout, once per call; a GraphQL execution that does not yield holds
the event loop (and with it the signal's handling) until its budget stops it. Kubernetes does
not wait: past the pod's `terminationGracePeriodSeconds` it kills the process, and nothing
says why.

`ShutdownDeadline(seconds)` is armed by the first stop signal (`arm()`, safe to call from a
signal handler and again). It runs a daemon timer thread, which needs neither the event loop
nor the main thread: when the deadline passes with the process still running, it writes one
line to the log (stderr), saying what is left undone, and ends the process with
`EXIT_DEADLINE` (3). `service.runtime.server.DeadlineServer` arms it under uvicorn; `disarm()`
cancels it once the shutdown finished. What is lost when the deadline fires: leases not yet
released expire after their TTL (another watcher takes over then), and what the in-process
outbox did not drain is recorded as a gap by the next start; a Redis outbox keeps its entries.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)

EXIT_DEADLINE = 3
"""Exit status of a process whose shutdown passed its deadline (docs/operations.md)."""


class ShutdownDeadline:
    def __init__(self, seconds: float, *, exit: Callable[[int], object] = os._exit) -> None:
        self.seconds = seconds
        self._exit = exit
        self._timer: threading.Timer | None = None
        self._lock = threading.Lock()

    @property
    def armed(self) -> bool:
        return self._timer is not None

    def arm(self) -> None:
        """Start the countdown (the first call only; later calls keep the first deadline)."""
        with self._lock:
            if self._timer is not None:
                return
            timer = threading.Timer(self.seconds, self._expire)
            timer.daemon = True
            timer.name = "shutdown deadline"
            self._timer = timer
            timer.start()

    def disarm(self) -> None:
        """The shutdown finished in time: cancel the countdown."""
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()

    def _expire(self) -> None:
        line = (
            f"shutdown did not finish within {self.seconds:g} s of the stop signal: exiting now"
            " (leases not yet released expire after their TTL; the next start records any"
            " history gap)"
        )
        try:
            log.critical("%s", line)
        finally:
            self._exit(EXIT_DEADLINE)
