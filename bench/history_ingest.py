"""Benchmark: history rows per second through the outbox into PostgreSQL, next to COPY.

    .venv/bin/python bench/history_ingest.py [--claims 5000] [--url postgresql+asyncpg://…]

Generates claim lifecycles (`bench/history_common.churn`: one Changes per watch event, 8
object versions and 5 intervals per claim), appends them all to an in-process outbox, then
times the `HistoryWriter` draining it into a freshly migrated PostgreSQL database (batches of
~200 rows, one transaction each, intervals opened and closed by the idempotent rules). The
floor, in the same run: COPY of exactly the rows the writer left in the tables into copies of
those tables (same indexes). Prints rows/s of both and the ratio (target: within 3x of COPY).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import sys
import time
from pathlib import Path

import asyncpg

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.history_common import asyncpg_dsn, churn, scratch_database, server_url
from service.history.db import open_engine
from service.history.migrate import migrate
from service.history.models import INTERVAL_TABLES, ObjectVersion
from service.history.outbox import MemoryOutbox
from service.history.writer import HistorySink, HistoryWriter, WriterOptions

TABLES = [ObjectVersion.__tablename__, *(t.__tablename__ for t in INTERVAL_TABLES)]


async def writer_run(url: str, claims: int, options: WriterOptions) -> tuple[float, int, int]:
    engine = open_engine(url)
    outbox = MemoryOutbox()
    sink = HistorySink(outbox)
    batches = churn(claims)
    print(f"workload: {claims} claim lifecycles, {len(batches)} Changes")
    for changes in batches:
        await sink(changes)
    # the generated objects would otherwise stay on the heap for the collector to walk
    del batches
    gc.collect()
    writer = HistoryWriter(engine, outbox, options=options)
    started = time.perf_counter()
    task = asyncio.create_task(writer.run())
    await writer.drained()
    elapsed = time.perf_counter() - started
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    await engine.dispose()
    return elapsed, writer.stats.batches, writer.stats.rows


async def copy_floor(url: str) -> tuple[float, int]:
    conn = await asyncpg.connect(asyncpg_dsn(url))
    try:
        loaded = {}
        for table in TABLES:
            records = await conn.fetch(f"SELECT * FROM {table}")
            loaded[table] = ([k for k in records[0].keys() if k != "id"] if records else [],
                             [tuple(r[k] for k in r.keys() if k != "id") for r in records])  # fmt: skip
            await conn.execute(f"CREATE TABLE {table}_floor (LIKE {table} INCLUDING ALL)")
        rows = sum(len(records) for _, records in loaded.values())
        started = time.perf_counter()
        for table, (columns, records) in loaded.items():
            if records:
                await conn.copy_records_to_table(f"{table}_floor", records=records,
                                                 columns=columns)  # fmt: skip
        return time.perf_counter() - started, rows
    finally:
        await conn.close()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--claims", type=int, default=5000)
    parser.add_argument("--url", default=None)
    parser.add_argument("--batch-rows", type=int, default=200)
    parser.add_argument("--batch-entries", type=int, default=2000)
    args = parser.parse_args()
    async with scratch_database(server_url(args.url), "bench_ingest") as url:
        await migrate(url)
        options = WriterOptions(
            batch_rows=args.batch_rows, batch_entries=args.batch_entries, linger=0.05
        )
        elapsed, batch_count, touched = await writer_run(url, args.claims, options)
        conn = await asyncpg.connect(asyncpg_dsn(url))
        counts = {t: await conn.fetchval(f"SELECT count(*) FROM {t}") for t in TABLES}
        await conn.close()
        rows = sum(counts.values())
        floor_elapsed, floor_rows = await copy_floor(url)
    assert floor_rows == rows
    print("rows written: " + ", ".join(f"{t} {n}" for t, n in counts.items()))
    print(f"writer: {rows} rows in {elapsed:.2f}s = {rows / elapsed:,.0f} rows/s "
          f"({batch_count} transactions, {touched} rows inserted or updated)")  # fmt: skip
    print(f"COPY floor: {floor_rows} rows in {floor_elapsed:.2f}s = "
          f"{floor_rows / floor_elapsed:,.0f} rows/s")  # fmt: skip
    ratio = (rows / floor_elapsed) / (rows / elapsed)
    print(f"ratio: writer is {ratio:.2f}x slower than COPY (target <= 3x)")


if __name__ == "__main__":
    asyncio.run(main())
