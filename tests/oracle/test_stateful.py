"""The mirror beside the oracle over random real-world event sequences (tests.oracle.machine).

Bounded in the suite; a long run (docs/testing.md):

    DRA_MIRROR_ORACLE_EXAMPLES=500 DRA_MIRROR_ORACLE_STEPS=60 scripts/test tests/oracle
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis.stateful import run_state_machine_as_test

from dra_mirror.service.history.runtime import History
from dra_mirror.service.history.writer import WriterOptions
from tests.oracle.machine import MirrorMachine

EXAMPLES = int(os.environ.get("DRA_MIRROR_ORACLE_EXAMPLES", "10"))
STEPS = int(os.environ.get("DRA_MIRROR_ORACLE_STEPS", "25"))
# The suite replays the same bounded sequences each run (a failure there is never a fluke);
# a long run asked for by the variables explores new ones each time.
LONG = "DRA_MIRROR_ORACLE_EXAMPLES" in os.environ or "DRA_MIRROR_ORACLE_STEPS" in os.environ


def test_the_mirror_agrees_with_the_oracle(redis_url: str, tmp_path: Path) -> None:
    with asyncio.Runner() as runner:
        history = runner.run(
            History.open(f"sqlite+aiosqlite:///{tmp_path / 'history.db'}",
                         options=WriterOptions(linger=0.0, retry_initial=0.05, retry_max=0.2))
        )  # fmt: skip
        MirrorMachine.runner, MirrorMachine.redis_url, MirrorMachine.history = (
            runner,
            redis_url,
            history,
        )
        MirrorMachine.seen = {}
        try:
            run_state_machine_as_test(
                MirrorMachine,
                settings=settings(
                    max_examples=EXAMPLES, stateful_step_count=STEPS, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
                    database=None, derandomize=not LONG, print_blob=LONG,
                ),
            )  # fmt: skip
        finally:
            runner.run(history.close())
    print("known defects seen:", MirrorMachine.seen)
