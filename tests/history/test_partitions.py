"""Monthly partitions on PostgreSQL: created ahead and on demand, dropped whole by retention,
read only where an audit's window reaches (EXPLAIN says which partitions each statement
scans); SQLite, unpartitioned, keeps the same answers."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import AsyncIterator, Iterator

import pytest
from sqlalchemy import event, func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from dra_mirror.service.history import partitions
from dra_mirror.service.history.contention import GROUPS
from dra_mirror.service.history.db import open_engine
from dra_mirror.service.history.migrate import migrate
from dra_mirror.service.history.models import (
    PARTITIONED,
    AllocationInterval,
    ConsumerInterval,
    IdleInterval,
    ObjectVersion,
    WaitInterval,
)
from dra_mirror.service.history.partitions import Month, listed, maintain
from dra_mirror.service.history.queries import HistoryQueries
from dra_mirror.service.history.times import US_PER_HOUR, US_PER_SECOND
from dra_mirror.service.model.changes import FACT_GROUPS, Changes
from tests.history.conftest import Pipeline, fresh_database
from tests.history.script import CLUSTER, END, at, batches, claim_record, moved

DAY_US = 24 * US_PER_HOUR
# the script starts on 2026-03-02: a copy of it on the 2nd of each month, one cluster each
MONTHS = {"jan": -59, "feb": -28, "mar": 0, "apr": 31}
MARCH = (Month(2026, 3).start_us, Month(2026, 4).start_us)
INTERVALS = (AllocationInterval, ConsumerInterval, WaitInterval, IdleInterval)


async def _names(engine: AsyncEngine) -> set[str]:
    async with engine.connect() as conn:
        return {p.name for p in await listed(conn)}


async def _count(engine: AsyncEngine, table) -> int:
    async with engine.connect() as conn:
        return int(await conn.scalar(select(func.count()).select_from(table)))


async def _load(pipeline: Pipeline, months: dict[str, float], *, closed: bool = True) -> None:
    """A copy of the script per month; `closed`: then the cluster's watch starts again at the
    end of its copy and its new index lists everything complete without what the copy left
    open (D's allocation and idle spell), which closes it."""
    for cluster, days in months.items():
        for changes in moved(batches(), cluster=cluster, days=days):
            await pipeline.sink(changes)
        if closed:
            end = moved([Changes(cluster, at(END))], cluster=cluster, days=days)[0].at
            await pipeline.sink.cluster_started(cluster, end)
            await pipeline.sink(Changes(cluster, end, announced=FACT_GROUPS))
    await pipeline.drained()


@pytest.fixture
async def pg_engine(request, tmp_path, postgres_url) -> AsyncIterator[AsyncEngine]:
    """A migrated PostgreSQL database (partitions exist there only)."""
    async with fresh_database("postgres", request, tmp_path) as url:
        await migrate(url)
        engine = open_engine(url)
        yield engine
        await engine.dispose()


@pytest.fixture
async def pg_pipeline(pg_engine: AsyncEngine) -> AsyncIterator[Pipeline]:
    running = Pipeline(pg_engine).start()
    yield running
    await running.stop()


async def test_a_fresh_database_has_this_month_and_the_next_two(pg_engine):
    now = Month.of(int(time.time() * US_PER_SECOND))
    expected = {now.next(i).name(table) for table in PARTITIONED for i in range(3)}
    assert expected <= await _names(pg_engine)


async def test_maintenance_keeps_the_coming_months_created(pg_engine):
    later = Month(2031, 11)
    done = await maintain(pg_engine, now=later.start_us / US_PER_SECOND + 3600)
    wanted = {m.name(t) for t in PARTITIONED for m in (later, later.next(), later.next(2))}
    assert set(done.created) == wanted  # December and January cross the year
    assert wanted <= await _names(pg_engine)
    again = await maintain(pg_engine, now=later.start_us / US_PER_SECOND + 7200)
    assert again.created == [] and again.dropped == []


async def test_a_batch_for_a_month_without_a_partition_creates_it(pg_engine, pg_pipeline):
    await _load(pg_pipeline, {"old": -(365 * 6 + 60)})  # January 2020: never created ahead
    assert {f"{t}_y2020m01" for t in PARTITIONED} <= await _names(pg_engine)
    assert await _count(pg_engine, AllocationInterval) == 4
    assert await _count(pg_engine, ObjectVersion) == 5


async def test_a_version_seen_again_later_is_stored_once(engine, pipeline):
    await _load(pipeline, {CLUSTER: 0}, closed=False)
    assert await _count(engine, ObjectVersion) == 5
    again = claim_record("A", 170, 1)  # version 1001 of claim A again
    # the same day, as a view the index re-emits (a claim's template filled in)
    await pipeline.sink(Changes(CLUSTER, at(170), upserts=[again]))
    # in May, in the LIST of a new watch (which re-announces every object)
    listed = Changes(CLUSTER, at(60 * 24 * 70), upserts=[again], listed_kind="ResourceClaim")
    await pipeline.sink(listed)
    await pipeline.drained()
    assert await _count(engine, ObjectVersion) == 5


async def test_interval_retention_drops_months_that_hold_nothing_open(engine, pipeline):
    await _load(pipeline, {"jan": MONTHS["jan"]})
    await _load(pipeline, {"feb": MONTHS["feb"]}, closed=False)  # D's allocation stays open
    june = Month(2026, 6).start_us / US_PER_SECOND
    done = await maintain(engine, now=june, intervals_days=30)
    counts = {t.__tablename__: await _count(engine, t) for t in INTERVALS}
    # January is gone; of February only what is open is kept (with its month, on PostgreSQL)
    if engine.dialect.name == "postgresql":
        assert {name for name in done.dropped if name.endswith("y2026m01")} == {
            f"{t.__tablename__}_y2026m01" for t in INTERVALS
        }
        assert {name for name in done.dropped if name.endswith("y2026m02")} == {
            "consumers_y2026m02", "waits_y2026m02"}  # fmt: skip
        assert counts == {"allocations": 4, "consumers": 0, "waits": 0, "idle_holds": 3}
    else:
        assert counts == {"allocations": 1, "consumers": 0, "waits": 0, "idle_holds": 1}
    (d,) = await HistoryQueries(engine).claim_history("feb", "team-b", "D")
    assert [a.end_us for a in d.allocations] == [None]


# --- which partitions the audits read ---------------------------------------------------------


@contextlib.contextmanager
def _statements(engine: AsyncEngine) -> Iterator[list[tuple[str, object]]]:
    seen: list[tuple[str, object]] = []

    def before(conn, cursor, statement, parameters, context, executemany):
        if statement.lstrip().upper().startswith(("SELECT", "WITH")):
            seen.append((statement, parameters))

    event.listen(engine.sync_engine, "before_cursor_execute", before)
    try:
        yield seen
    finally:
        event.remove(engine.sync_engine, "before_cursor_execute", before)


def _relations(plan) -> set[str]:
    found: set[str] = set()
    if isinstance(plan, dict):
        if "Relation Name" in plan:
            found.add(plan["Relation Name"])
        for value in plan.values():
            found |= _relations(value)
    elif isinstance(plan, list):
        for value in plan:
            found |= _relations(value)
    return found


async def _scanned(engine: AsyncEngine, audits) -> dict[str, set[str]]:
    """Run the audits, then EXPLAIN every statement they ran: the partitions each statement
    scans (the floors' own look-up, which probes older partitions' end_us index, aside)."""
    with _statements(engine) as seen:
        for audit in audits:
            await audit()
    scanned: dict[str, set[str]] = {}
    async with engine.connect() as conn:
        for statement, parameters in seen:
            if "MIN(start_us)" in statement or "pg_inherits" in statement:
                continue
            explained = await conn.exec_driver_sql("EXPLAIN (FORMAT JSON) " + statement, parameters)
            plan = explained.scalar_one()
            plan = json.loads(plan) if isinstance(plan, str) else plan
            scanned[statement] = {
                name for name in _relations(plan) if partitions.is_partition(name)
            }
    return scanned


def _march_audits(queries: HistoryQueries, *, device_history: bool = True):
    audits = [
        lambda g=g, b=b: queries.contention(*MARCH, group_by=g, bucket_us=b)
        for g in GROUPS
        for b in (None, DAY_US)
    ]
    audits.append(lambda: queries.contention(MARCH[0] + 1, MARCH[1], group_by="CLASS"))  # live
    audits.append(lambda: queries.idle_holders(*MARCH))
    if device_history:  # its pods: of the whole allocation, which an open one leaves unbounded
        audits.append(lambda: queries.device_history("GPU-A", *MARCH))
    return audits


async def test_audits_read_only_the_partitions_of_their_window(pg_engine, pg_pipeline):
    await _load(pg_pipeline, MONTHS)
    queries = HistoryQueries(pg_engine)
    scanned = await _scanned(pg_engine, _march_audits(queries))
    read = set().union(*scanned.values())
    assert {"allocations_y2026m03", "idle_holds_y2026m03", "waits_y2026m03"} <= read
    assert all(name.endswith("_y2026m03") for name in read), sorted(read)
    rows = await queries.contention(*MARCH, group_by="CLUSTER")
    assert {r.cluster for r in rows} == {"mar"}


async def test_an_interval_open_since_an_earlier_month_is_read_from_its_month(
    pg_engine, pg_pipeline
):
    await _load(pg_pipeline, {k: v for k, v in MONTHS.items() if k != "feb"})
    await _load(pg_pipeline, {"feb": MONTHS["feb"]}, closed=False)  # D holds GPU-A since February
    queries = HistoryQueries(pg_engine)
    scanned = await _scanned(pg_engine, _march_audits(queries, device_history=False))
    read = set().union(*scanned.values())
    assert {"allocations_y2026m02", "idle_holds_y2026m02"} <= read  # where D's spells started
    assert not any(name.endswith(("_y2026m01", "_y2026m04")) for name in read), sorted(read)
    assert "waits_y2026m02" not in read  # every wait of February ended in February
    (held,) = [
        r for r in await queries.contention(*MARCH, group_by="CLUSTER") if r.cluster == "feb"
    ]
    assert held.device_hours_allocated == pytest.approx((MARCH[1] - MARCH[0]) / US_PER_HOUR)
    assert held.device_hours_idle == pytest.approx((MARCH[1] - MARCH[0]) / US_PER_HOUR)
