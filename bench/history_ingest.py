"""Benchmark: history rows per second through the outbox into PostgreSQL, next to COPY.

    .venv/bin/python bench/history_ingest.py [--claims 5000] [--outbox memory|redis]
        [--url postgresql+asyncpg://…] [--redis-url redis://…]

Generates claim lifecycles (`bench/history_common.churn`: one Changes per watch event, 8
object versions and 5 intervals per claim), appends them all to an outbox — the in-process one
of embedded defaults, or with `--outbox redis` the production Redis stream (a fresh stream on
`--redis-url`, else DRA_MIRROR_BENCH_REDIS_URL or DRA_MIRROR_TEST_REDIS_URL) — then times the
`HistoryWriter` draining it into a freshly migrated PostgreSQL database (batches of up to 2000
entries, one transaction each, intervals opened and closed by the idempotent rules). The
floor, in the same run: COPY of exactly the rows the writer left in the tables into copies of
those tables (same indexes). Prints rows/s of both and their ratio for each of `--repeat`
runs (a fresh database each) and the median ratio (target: within 3x of COPY).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import statistics
import sys
import time
import uuid
from pathlib import Path

import asyncpg

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.history_common import asyncpg_dsn, churn, scratch_database, server_url
from dra_mirror.service.history.db import open_engine
from dra_mirror.service.history.migrate import migrate
from dra_mirror.service.history.models import INTERVAL_TABLES, ObjectVersion
from dra_mirror.service.history.outbox import MemoryOutbox, Outbox
from dra_mirror.service.history.redis_outbox import RedisStreamOutbox
from dra_mirror.service.history.writer import HistorySink, HistoryWriter, WriterOptions

TABLES = [ObjectVersion.__tablename__, *(t.__tablename__ for t in INTERVAL_TABLES)]


def redis_outbox(flag: str | None) -> RedisStreamOutbox:
    url = flag or os.environ.get("DRA_MIRROR_BENCH_REDIS_URL")
    url = url or os.environ.get("DRA_MIRROR_TEST_REDIS_URL")
    if not url:
        raise SystemExit("give --redis-url redis://127.0.0.1:PORT/0 for --outbox redis")
    return RedisStreamOutbox.from_url(url, prefix=f"bench-{uuid.uuid4().hex[:8]}", consumer="b")


async def writer_run(
    url: str, claims: int, options: WriterOptions, outbox: Outbox
) -> tuple[float, int, int]:
    engine = open_engine(url)
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
    drained = asyncio.create_task(writer.drained())
    await asyncio.wait({task, drained}, return_when=asyncio.FIRST_COMPLETED)
    if task.done():  # the writer failed: show why instead of waiting forever
        drained.cancel()
        task.result()
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


async def one_run(args: argparse.Namespace) -> float:
    """One fresh database, one outbox, the writer draining it, the floor; returns the ratio."""
    outbox: Outbox = MemoryOutbox() if args.outbox == "memory" else redis_outbox(args.redis_url)
    async with scratch_database(server_url(args.url), "bench_ingest") as url:
        await migrate(url)
        options = WriterOptions(
            batch_rows=args.batch_rows, batch_entries=args.batch_entries, linger=0.05
        )
        try:
            elapsed, batch_count, touched = await writer_run(url, args.claims, options, outbox)
        finally:
            if isinstance(outbox, RedisStreamOutbox):
                await outbox.redis.delete(outbox.name, outbox.lease_key)
                await outbox.close()
        conn = await asyncpg.connect(asyncpg_dsn(url))
        counts = {t: await conn.fetchval(f"SELECT count(*) FROM {t}") for t in TABLES}
        await conn.close()
        rows = sum(counts.values())
        floor_elapsed, floor_rows = await copy_floor(url)
    assert floor_rows == rows
    print("rows written: " + ", ".join(f"{t} {n}" for t, n in counts.items()))
    print(f"writer ({args.outbox} outbox): {rows} rows in {elapsed:.2f}s = "
          f"{rows / elapsed:,.0f} rows/s ({batch_count} transactions, {touched} rows inserted "
          "or updated)")  # fmt: skip
    print(f"COPY floor: {floor_rows} rows in {floor_elapsed:.2f}s = "
          f"{floor_rows / floor_elapsed:,.0f} rows/s")  # fmt: skip
    ratio = elapsed / floor_elapsed
    print(f"ratio: writer is {ratio:.2f}x slower than COPY")
    return ratio


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--claims", type=int, default=5000)
    parser.add_argument("--url", default=None)
    parser.add_argument("--batch-rows", type=int, default=200)
    parser.add_argument("--batch-entries", type=int, default=2000)
    parser.add_argument("--outbox", choices=("memory", "redis"), default="memory")
    parser.add_argument("--redis-url", default=None)
    parser.add_argument("--repeat", type=int, default=3, help="runs; the median ratio counts")
    args = parser.parse_args()
    ratios = [await one_run(args) for _ in range(args.repeat)]
    print(f"ratios: {', '.join(f'{r:.2f}' for r in ratios)}; median "
          f"{statistics.median(ratios):.2f}x (target <= 3x)")  # fmt: skip


if __name__ == "__main__":
    asyncio.run(main())
