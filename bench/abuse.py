"""Abuse probes against a running dra-mirror: every door tried from outside, held or failed.

    flock /work/.bench.lock prlimit --as=6000000000 .venv/bin/python bench/abuse.py [--only NAME ...]

Starts the simulator (the `access` scenario, east grown to 1,048 GPUs) and `dra-mirror serve`
with real credentials (static tokens, OIDC, Kubernetes TokenReview: bench/abuse_stack.py) as
child processes, its file descriptors capped, then runs each probe of bench/abuse_probes.py
in turn — a persisted query by GET without a token, a WebSocket flood and a subscription
outliving its token, a batch over every limit, silent connections, slow partial bodies,
oversized bodies sent whole, malformed requests, an expensive CEL selector, `GET /mcp`, bad
configurations, a foreign Host header on an open server, a flood of garbage tokens — and
prints one row per probe: HELD or FAILED, what was seen, the seconds it took, the API's RSS
before and after (MB). The API is restarted after a probe that killed it. Exit status 1 when
a probe failed.
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.abuse_probes import PROBES, Outcome
from bench.abuse_stack import AbuseStack


async def run(names: list[str], keep: bool) -> int:
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # the flood's own sockets
    run_dir = Path(tempfile.mkdtemp(prefix="dra-mirror-abuse-", dir="/tmp"))
    stack = AbuseStack(run_dir)
    failed = 0
    try:
        await stack.start()
        print(f"{'probe':24} {'verdict':7} {'s':>6} {'RSS MB':>13}  what was seen", flush=True)
        for name in names:
            if not stack.alive():
                await stack.restart_api()
            before = stack.rss_mb()
            started = time.monotonic()
            try:
                outcome = await PROBES[name](stack)
            except Exception as error:  # a probe that broke is a failure, with why
                outcome = Outcome(False, f"probe error: {type(error).__name__}: {error}")
            took = time.monotonic() - started
            after = stack.rss_mb() if stack.alive() else float("nan")
            if not stack.alive():
                outcome = Outcome(False, f"the API died; {outcome.detail}")
            failed += not outcome.held
            verdict = "HELD" if outcome.held else "FAILED"
            print(f"{name:24} {verdict:7} {took:6.1f} {before:6.0f}→{after:<6.0f}  "
                  f"{outcome.detail}", flush=True)  # fmt: skip
    finally:
        stack.stop()
        if keep:
            print(f"logs in {run_dir}")
        else:
            shutil.rmtree(run_dir, ignore_errors=True)
    return 1 if failed else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", choices=sorted(PROBES), default=None)
    parser.add_argument("--keep", action="store_true", help="keep the run directory (logs)")
    args = parser.parse_args()
    sys.exit(asyncio.run(run(args.only or list(PROBES), args.keep)))


if __name__ == "__main__":
    main()
