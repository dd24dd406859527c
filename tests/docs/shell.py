"""One documented shell block run as a reader would paste it: one bash session, line by line.

`Session(workdir, env, ports)` drives a `bash` process: each command is written to it, its
output read up to a sentinel carrying `$?`, so shell variables set by one line serve the next.
A background command gets its own process group and log file and the next line runs at once,
as it does when the block is pasted into a terminal: a line that needs what a background
command has not done yet (its kubeconfig written, its port answering) fails, unless the block
waits for it. After the block's last line (`finish()`) every background command must have
come up (still running, its `--port` answering `/readyz` for dra-mirror or accepting
connections otherwise, its `--kubeconfig-out` written); all are stopped when the block ends
(SIGTERM, then SIGKILL).

Addresses are made private: every `127.0.0.1:PORT`, `localhost:PORT` and `--port PORT` in a
command is rewritten to a free loopback port, the same documented port to the same free port
within a session (`Ports`), the documented API port 8000 to the demo the test runs; so the
examples can run while other copies of the suite (or a real demo) hold the usual ports.

Promises: nothing outlives `close()`; a command running longer than `timeout` fails its
block (and the session is killed) rather than hanging the suite.
"""

from __future__ import annotations

import os
import queue
import re
import signal
import socket
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from tests.docs.blocks import Command

ADDRESS = re.compile(r"(?P<lead>(?:127\.0\.0\.1|localhost):|--port[ =])(?P<port>\d{2,5})\b")
SENTINEL = "__docs_test_rc__"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Ports:
    """Documented port -> the private port this run uses for it."""

    fixed: dict[int, int] = field(default_factory=dict)

    def rewrite(self, text: str) -> tuple[str, list[int]]:
        """`text` with private ports, and the private ports given as `--port`."""
        listened: list[int] = []

        def private(match: re.Match[str]) -> str:
            port = self.fixed.setdefault(int(match["port"]), free_port())
            if match["lead"].startswith("--port"):
                listened.append(port)
            return f"{match['lead']}{port}"

        return ADDRESS.sub(private, text), listened


class CommandFailed(AssertionError):
    pass


@dataclass
class Background:
    command: Command
    pid: int
    log: Path
    text: str  # as run (private ports)
    listened: list[int]


class Session:
    def __init__(self, workdir: Path, env: dict[str, str], ports: Ports, timeout: float = 90):
        self.workdir, self.ports, self.timeout = workdir, ports, timeout
        self.background: list[Background] = []
        self.bash = subprocess.Popen(
            ["bash", "--norc", "--noprofile"],
            cwd=workdir,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        self._send("set -m")  # background jobs get their own process group

    def _read(self) -> None:
        assert self.bash.stdout is not None
        for line in self.bash.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def _send(self, text: str) -> tuple[int, str]:
        assert self.bash.stdin is not None
        self.bash.stdin.write(f"{text}\n__rc=$?; printf '\\n{SENTINEL} %d\\n' $__rc\n")
        self.bash.stdin.flush()
        out: list[str] = []
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                line = self.lines.get(timeout=max(deadline - time.monotonic(), 0.01))
            except queue.Empty:
                raise CommandFailed(f"still running after {self.timeout:.0f} s") from None
            if line is None:
                raise CommandFailed("the shell ended:\n" + "".join(out))
            if line.startswith(SENTINEL):
                return int(line.split()[1]), "".join(out)
            out.append(line)

    def run(self, command: Command) -> str:
        """Run one command; its output (foreground), or nothing (background: started, and the
        next line runs at once, as pasted)."""
        text, listened = self.ports.rewrite(command.text)
        if not command.background:
            code, out = self._send(text)
            if code != command.expected_exit:
                raise CommandFailed(f"exit {code}, documented {command.expected_exit}:\n{out}")
            return out
        log = self.workdir / f"background-{len(self.background)}.log"
        _, out = self._send(f"{text} >{log} 2>&1 </dev/null &\necho $!")
        self.background.append(Background(command, int(out.split()[-1]), log, text, listened))
        return ""

    def finish(self) -> None:
        """After the block's last line: every background command came up and still runs."""
        for job in self.background:
            try:
                self._until_up(job)
            except CommandFailed as failure:
                raise CommandFailed(
                    f"line {job.command.line}: {job.command.text}\n{failure}"
                ) from None

    def _until_up(self, job: Background) -> None:
        text, listened = job.text, job.listened
        written = re.findall(r"--kubeconfig-out[ =](\S+)", text)
        deadline = time.monotonic() + self.timeout
        settle = time.monotonic() + 1.0
        while True:
            alive = _alive(job.pid)
            if not alive:
                raise CommandFailed(f"ended at once:\n{job.log.read_text()}")
            ready = all((self.workdir / path).exists() for path in written) and all(
                _answers(port, dra_mirror="dra-mirror" in text) for port in listened
            )
            if ready and time.monotonic() >= settle:
                return
            if time.monotonic() > deadline:
                raise CommandFailed(f"not up after {self.timeout:.0f} s:\n{job.log.read_text()}")
            time.sleep(0.2)

    def close(self) -> None:
        for job in reversed(self.background):
            _stop_group(job.pid)
        self.background.clear()
        if self.bash.poll() is None and self.bash.stdin is not None:
            try:
                self.bash.stdin.write("exit\n")
                self.bash.stdin.close()
            except BrokenPipeError:
                pass
            try:
                self.bash.wait(timeout=5)
            except subprocess.TimeoutExpired:
                _stop_group(self.bash.pid)
        self.bash.wait(timeout=10)
        self.reader.join(timeout=10)
        if self.bash.stdout is not None:
            self.bash.stdout.close()
        if self.bash.stdout is not None:
            self.bash.stdout.close()


def _alive(pid: int) -> bool:
    try:
        waited, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:  # the shell's child, not ours: ask the kernel
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return not Path(f"/proc/{pid}/stat").read_text().split(") ")[-1].startswith("Z")
    return waited == 0


def _answers(port: int, *, dra_mirror: bool) -> bool:
    if dra_mirror:
        try:
            return httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def _stop_group(pgid: int) -> None:
    for sig, wait in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            try:
                os.killpg(pgid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.1)
