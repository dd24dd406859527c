"""Benchmark: the history of an initial sync, drained into PostgreSQL by the writer.

    .venv/bin/python bench/history_sync.py [--scenario scale-5000] [--url postgresql+asyncpg://…]
        [--profile /tmp/history.prof]

The scenario's recorded pages (`bench/page_server.py`, cached) are decoded into records and
folded into a `ClusterIndex` as a watcher with history folds them (transitions and link deltas),
one `resync` per kind, each `Changes` handed to a `HistorySink` over the in-process outbox
(not timed). Then the `HistoryWriter` drains that outbox into a freshly migrated database (a
scratch database on `--url`, DRA_MIRROR_BENCH_POSTGRES_URL or DRA_MIRROR_TEST_POSTGRES_URL).

Printed: the rows written per table, the drain's wall seconds, the CPU seconds of this process
and of PostgreSQL's backends (`pg_stat_activity`'s pids, from /proc) during the drain, and
the entries' encoded bytes. The floor, in the same run: COPY of the same rows into copies of
the tables (as `bench/history_ingest.py`). `--profile` writes a cProfile of the drain.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import sys
import time
from pathlib import Path

import asyncpg

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from bench.history_common import asyncpg_dsn, scratch_database, server_url  # noqa: E402
from bench.history_ingest import TABLES, copy_floor  # noqa: E402
from bench.index_sync import KINDS, _records  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def _cpu(pids: list[int]) -> float:
    total = 0.0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / TICK
    return total


async def _backends(url: str) -> list[int]:
    conn = await asyncpg.connect(asyncpg_dsn(url))
    try:
        rows = await conn.fetch("SELECT pid FROM pg_stat_activity")
        return [row["pid"] for row in rows]
    finally:
        await conn.close()


async def run(args: argparse.Namespace, cluster: str, records: dict[str, list]) -> None:
    from dra_mirror.service.history.db import open_engine
    from dra_mirror.service.history.migrate import migrate
    from dra_mirror.service.history.outbox import MemoryOutbox
    from dra_mirror.service.history.writer import HistorySink, HistoryWriter
    from dra_mirror.service.model.index import ClusterIndex

    outbox = MemoryOutbox()
    sink = HistorySink(outbox)
    index = ClusterIndex(cluster, link_deltas=True, transitions=True)
    await sink.cluster_started(cluster, "2026-12-02T00:00:00Z")
    for kind in KINDS.values():
        await sink(index.resync(kind, records[kind], at="2026-12-02T00:00:00Z"))
    encoded = sum(len(payload) for payload in outbox._entries.values())
    entries = len(outbox._entries)
    records.clear()
    del index
    gc.collect()
    async with scratch_database(server_url(args.url), "bench_history_sync") as url:
        await migrate(url)
        engine = open_engine(url)
        writer = HistoryWriter(engine, outbox)
        profiler = None
        if args.profile:
            import cProfile

            profiler = cProfile.Profile()
        cpu0 = time.process_time()
        started = time.perf_counter()
        task = asyncio.create_task(writer.run())
        await asyncio.sleep(0.2)  # its connections are open: count their backends' CPU
        backends = await _backends(url)
        pg0 = _cpu(backends)
        if profiler is not None:
            profiler.enable()
        drained = asyncio.create_task(writer.drained())
        await asyncio.wait({task, drained}, return_when=asyncio.FIRST_COMPLETED)
        if task.done():
            drained.cancel()
            task.result()
        elapsed = time.perf_counter() - started
        cpu = time.process_time() - cpu0
        pg = _cpu(backends) - pg0
        if profiler is not None:
            profiler.disable()
            profiler.dump_stats(args.profile)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await engine.dispose()
        conn = await asyncpg.connect(asyncpg_dsn(url))
        counts = {t: await conn.fetchval(f"SELECT count(*) FROM {t}") for t in TABLES}
        await conn.close()
        floor, floor_rows = await copy_floor(url)
    print(f"{args.scenario}: {entries:,} outbox entries, {encoded / 2**20:.0f} MiB encoded; "
          f"load {os.getloadavg()[0]:.1f}")  # fmt: skip
    print("rows: " + ", ".join(f"{t} {n:,}" for t, n in counts.items() if n))
    print(f"drain: {elapsed:.2f} s wall, writer {cpu:.2f} CPU s, PostgreSQL {pg:.2f} CPU s "
          f"({writer.stats.batches} batches); COPY floor {floor:.2f} s for {floor_rows:,} rows; "
          f"{elapsed / floor:.2f}x")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", default="scale-5000")
    parser.add_argument("--url")
    parser.add_argument("--profile")
    args = parser.parse_args()
    cluster, records = _records(args.scenario, 500)  # recorded once, outside the loop
    asyncio.run(run(args, cluster, records))


if __name__ == "__main__":
    main()
