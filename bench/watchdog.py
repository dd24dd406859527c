"""Fail a bench fast when one of the processes it started exits on its own.

    async with Watchdog(run_dir) as dog:
        dog.watch("watcher", watcher_process)      # logs in run_dir / "watcher.log"
        ...                                         # any await: sleeps, polls, HTTP
        dog.expect_exit("watcher")                  # about to kill it on purpose

While the block runs, the watched processes are polled every `interval` seconds; the first
that has exited without being expected to cancels the block's task, and the block raises
`ProcessExited` instead (its name, its exit status, the tail of its log) — so a mirror that
died does not leave the bench polling a dead port until some distant timeout. A bench's main
runs through `run_watched(main, "name")`, which turns that into its own exit status
(`ProcessExited.status`) and one line on stderr. Not a benchmark.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
from collections import deque
from collections.abc import Callable, Coroutine
from pathlib import Path
from types import TracebackType
from typing import Any

TAIL_LINES = 30


class ProcessExited(RuntimeError):
    """A watched process exited while the bench still needed it."""

    def __init__(self, name: str, returncode: int, log: Path | None) -> None:
        self.name, self.returncode, self.log = name, returncode, log
        self.tail = _tail(log) if log is not None else ""
        how = (
            f"killed by {signal.Signals(-returncode).name}"
            if returncode < 0 and -returncode in signal.valid_signals()
            else f"exit status {returncode}"
        )
        where = f"; last lines of {log}:\n{self.tail}" if self.tail else ""
        super().__init__(f"{name} exited ({how}) while the bench needed it{where}")

    @property
    def status(self) -> int:
        """The process's exit status as a shell reports it (128 + signal when killed); 1 for
        a process that exited 0 too early."""
        if self.returncode < 0:
            return 128 - self.returncode
        return self.returncode or 1


def _tail(log: Path, lines: int = TAIL_LINES) -> str:
    try:
        with log.open("rb") as handle:
            kept = deque(handle, maxlen=lines)
    except OSError:
        return ""
    return b"".join(kept).decode("utf-8", "replace").rstrip()


class Watchdog:
    """Watches child processes for the length of an `async with` block (module docstring)."""

    def __init__(self, log_dir: Path | None = None, *, interval: float = 0.25) -> None:
        self.log_dir = log_dir
        self.interval = interval
        self.processes: dict[str, subprocess.Popen] = {}
        self.expected: set[str] = set()
        self.exited: ProcessExited | None = None
        self._task: asyncio.Task | None = None
        self._poller: asyncio.Task | None = None

    def watch(self, name: str, process: subprocess.Popen) -> None:
        """Watch `process` from now on (replacing a previous one of that name)."""
        self.processes[name] = process
        self.expected.discard(name)

    def expect_exit(self, name: str) -> None:
        """`name` is about to be stopped or killed on purpose: its exit is no failure."""
        self.expected.add(name)

    def check(self) -> None:
        """Raise `ProcessExited` now if a watched process has exited unexpectedly."""
        for name, process in self.processes.items():
            if name not in self.expected and process.poll() is not None:
                log = self.log_dir / f"{name}.log" if self.log_dir is not None else None
                raise ProcessExited(name, process.returncode, log)

    async def _poll(self) -> None:
        while True:
            try:
                self.check()
            except ProcessExited as exited:
                self.exited = exited
                assert self._task is not None
                self._task.cancel()
                return
            await asyncio.sleep(self.interval)

    async def __aenter__(self) -> Watchdog:
        self._task = asyncio.current_task()
        self._poller = asyncio.create_task(self._poll(), name="watchdog")
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        assert self._poller is not None and self._task is not None
        if not self._poller.done():
            self._poller.cancel()
            await asyncio.gather(self._poller, return_exceptions=True)
        if self.exited is not None:
            self._task.uncancel()  # the cancellation was ours: turn it into the real reason
            raise self.exited from None


def run_watched(main: Callable[[], Coroutine[Any, Any, None]], name: str) -> None:
    """`asyncio.run(main())`; a watched process that died ends the bench with its exit status
    and says which, with the tail of its log."""
    try:
        asyncio.run(main())
    except ProcessExited as exited:
        print(f"{name} stopped: {exited}", file=sys.stderr)
        sys.exit(exited.status)
