"""The open intervals a batch touches are looked up as a set joined to them, never by testing
every open interval against the batch's whole list (PostgreSQL).

During an initial sync every interval is open and the tables' statistics are those of empty
tables: PostgreSQL's generic plan for `claim_uid = ANY($1)` scanned every open interval
through the `end_us` index and compared each with every element of the array — seconds a
batch at 40,000 intervals, most of a sync's history drain."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import asyncpg
import pytest
from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine

from dra_mirror.service.history.db import open_engine
from dra_mirror.service.history.migrate import migrate
from dra_mirror.service.history.recording import BatchRecorder
from dra_mirror.service.model.changes import Transition
from tests.history.conftest import fresh_database, plain_dsn

pytestmark = pytest.mark.postgres

OPEN = 5_000


@pytest.fixture
async def pg_url(request, tmp_path, postgres_url) -> AsyncIterator[str]:
    async with fresh_database("postgres", request, tmp_path) as url:
        await migrate(url)
        yield url


def _filters(plan: object) -> list[str]:
    """Every Filter of a plan (EXPLAIN FORMAT JSON), at any depth."""
    if isinstance(plan, dict):
        found = [plan["Filter"]] if "Filter" in plan else []
        return found + [f for value in plan.values() for f in _filters(value)]
    if isinstance(plan, list):
        return [f for value in plan for f in _filters(value)]
    return []


async def test_open_intervals_are_found_by_joining_the_batchs_claims(pg_url) -> None:
    raw = await asyncpg.connect(plain_dsn(pg_url))
    try:
        await raw.execute(
            "INSERT INTO allocations (cluster, namespace, claim, claim_uid, request, driver, "
            "pool, device, share_id, consumed_capacity, class_name, start_us) "
            "SELECT 'east', 'ns', 'c' || i, 'uid-' || i, 'gpu', 'd', 'p', 'dev' || i, '', '{}', "
            "'gpu', (extract(epoch from now()) * 1e6)::bigint FROM generate_series(1, $1) i",
            OPEN,
        )
    finally:
        await raw.close()
    engine: AsyncEngine = open_engine(pg_url)
    statements: list[str] = []

    def seen(conn, cursor, statement, parameters, context, executemany) -> None:
        if "FROM allocations" in statement:
            statements.append(statement)

    event.listen(engine.sync_engine, "before_cursor_execute", seen)
    moved = [
        Transition("allocated", "east", "2026-12-04T00:00:00Z", claim_uid=f"uid-{i}")
        for i in (1, 2, 3)
    ]
    try:
        async with engine.connect() as conn:
            opened = await BatchRecorder(conn)._open_intervals(moved)
    finally:
        await engine.dispose()
    assert len(next(iter(v for k, v in opened.items() if k.__tablename__ == "allocations"))) == 3
    (statement,) = statements
    raw = await asyncpg.connect(plain_dsn(pg_url))
    try:  # the plan a prepared statement settles on (no ANALYZE has run: empty statistics)
        await raw.execute("SET plan_cache_mode = force_generic_plan")
        await raw.execute(f"PREPARE open_intervals AS {statement}")
        plan = await raw.fetchval(
            "EXPLAIN (FORMAT JSON) EXECUTE open_intervals('{uid-1,uid-2,uid-3}')"
        )
    finally:
        await raw.close()
    filters = _filters(json.loads(plan) if isinstance(plan, str) else plan)
    assert not [f for f in filters if "ANY" in f], filters
