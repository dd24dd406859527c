"""`serve` says where it listens only once it does: the announced URL answers at once, and
with `--port 0` it names the port the system chose."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

DRA_MIRROR = str(Path(sys.executable).with_name("dra-mirror"))
PATIENCE = 60.0  # seconds before a hung process fails the test (not a speed check)


def test_the_announced_url_answers(redis_url: str, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DRA_MIRROR_")}
    args = ["serve", "--no-watch", "--redis-url", redis_url, "--port", "0", "--insecure-no-auth"]
    with subprocess.Popen(
        [DRA_MIRROR, *args], cwd=tmp_path, env=env, stderr=subprocess.PIPE, text=True
    ) as process:
        announce_and_answer(process)


def announce_and_answer(process: subprocess.Popen[str]) -> None:
    try:
        assert process.stderr is not None
        deadline = time.monotonic() + PATIENCE
        seen = []
        while time.monotonic() < deadline:
            line = process.stderr.readline()
            assert line, "".join(seen)
            seen.append(line)
            if announced := re.search(r"GraphQL at (http://127\.0\.0\.1:(\d+))/graphql", line):
                break
        else:
            raise AssertionError("".join(seen))
        assert announced[2] != "0"
        assert httpx.get(f"{announced[1]}/healthz", timeout=5).status_code == 200
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=PATIENCE)
