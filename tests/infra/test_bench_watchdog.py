"""The benches' watchdog: a child process that exits while a bench waits fails the bench at
once, with its exit status and the end of its log, instead of a wait running to its timeout."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench.watchdog import ProcessExited, Watchdog, run_watched


def _spawn(tmp_path: Path, name: str, code: str) -> subprocess.Popen:
    with (tmp_path / f"{name}.log").open("ab") as log:
        return subprocess.Popen([sys.executable, "-c", code], stdout=log, stderr=subprocess.STDOUT)


async def test_a_process_that_exits_fails_the_wait_with_its_status_and_log(tmp_path):
    began = time.monotonic()
    process = _spawn(tmp_path, "watcher", "print('cannot bind'); exit(7)")
    with pytest.raises(ProcessExited) as raised:
        async with Watchdog(tmp_path, interval=0.05) as dog:
            dog.watch("watcher", process)
            await asyncio.sleep(60)  # a bench's long wait
    process.wait()
    assert time.monotonic() - began < 30
    assert raised.value.name == "watcher" and raised.value.status == 7
    assert "cannot bind" in raised.value.tail and "exit status 7" in str(raised.value)


async def test_a_process_killed_on_purpose_is_no_failure(tmp_path):
    process = _spawn(tmp_path, "api", "import time; time.sleep(60)")
    async with Watchdog(tmp_path, interval=0.05) as dog:
        dog.watch("api", process)
        dog.expect_exit("api")
        process.kill()
        process.wait()
        await asyncio.sleep(0.3)
    killed = ProcessExited("api", process.returncode, None)
    assert killed.status == 137 and "SIGKILL" in str(killed)


def test_a_bench_run_watched_exits_with_the_dead_process_status(capsys):
    async def main() -> None:
        raise ProcessExited("watcher", 7, None)

    with pytest.raises(SystemExit) as exited:
        run_watched(main, "soak")
    assert exited.value.code == 7
    assert capsys.readouterr().err.startswith("soak stopped: watcher exited (exit status 7)")
