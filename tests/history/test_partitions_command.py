"""`dra-mirror history partitions`: creates the coming months, applies retention by whole
months, lists what is there; refuses a database that was never migrated."""

from __future__ import annotations

import asyncio
import time

from click.testing import CliRunner

from dra_mirror.service.cli.main import main
from dra_mirror.service.history.db import open_engine
from dra_mirror.service.history.migrate import migrate
from dra_mirror.service.history.partitions import Month
from dra_mirror.service.history.times import US_PER_SECOND
from tests.history.conftest import Pipeline, fresh_database
from tests.history.script import batches


async def _invoke(*args: str):
    # the command runs its own event loop: off this one
    return await asyncio.to_thread(CliRunner().invoke, main, ["history", "partitions", *args])


async def test_partitions_are_created_listed_and_dropped_by_age(request, tmp_path, postgres_url):
    async with fresh_database("postgres", request, tmp_path) as url:
        never = await _invoke("--database-url", url)
        assert never.exit_code == 1 and "run `dra-mirror migrate` first" in never.output
        await migrate(url)
        engine = open_engine(url)
        running = Pipeline(engine).start()
        for changes in batches():  # March 2026: a month the writer creates on its own
            await running.sink(changes)
        await running.drained()
        await running.stop()
        await engine.dispose()

        listed = await _invoke("--database-url", url, "--list-only")
        assert listed.exit_code == 0, listed.output
        now = Month.of(int(time.time() * US_PER_SECOND))
        assert now.name("allocations") in listed.output
        assert "object_versions_y2026m03" in listed.output
        assert "created" not in listed.output  # --list-only changes nothing

        kept = await _invoke("--database-url", url, "--ahead", "4", "--analyze")
        assert kept.exit_code == 0, kept.output
        assert now.next(4).name("waits") in kept.output

        dropped = await _invoke("--database-url", url, "--retention-days", "30")
        assert dropped.exit_code == 0, dropped.output
        assert "dropped 1: object_versions_y2026m03 (5 rows)" in dropped.output
        assert "allocations_y2026m03" in dropped.output  # intervals are kept


async def test_on_sqlite_retention_deletes_rows(tmp_path):
    url = f"sqlite+aiosqlite:///{tmp_path / 'history.db'}"
    await migrate(url)
    engine = open_engine(url)
    running = Pipeline(engine).start()
    for changes in batches():
        await running.sink(changes)
    await running.drained()
    await running.stop()
    await engine.dispose()
    result = await _invoke("--database-url", url, "--retention-days", "30")
    assert result.exit_code == 0, result.output
    assert "(5 rows)" in result.output and "SQLite: not partitioned" in result.output
