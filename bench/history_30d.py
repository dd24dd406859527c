"""Benchmark: audits over thirty days of a 500-node cluster, on PostgreSQL.

    .venv/bin/python bench/history_30d.py [--nodes 500] [--days 30] [--versions 10000000]
    .venv/bin/python bench/history_30d.py --quick      # 50 nodes, 200k versions: a minute
    .venv/bin/python bench/history_30d.py --keep bench30d   # load once, keep; later runs reuse it

Generates the history directly (no watch events; on a partitioned PostgreSQL the months are
created first, and `device_classes` is filled from the allocations, as the writer would): 8 GPUs per node (half the nodes h200, half
a100), each device's timeline a sequence of claims — a wait (mostly minutes, 5 % hours), an
allocation of ~3 h (exponential), a consumer pod, and for 30 % of the claims an idle tail (the
pod finished, the claim kept the device) — plus object versions (compact JSON bodies) up to
`--versions`. Everything is COPYed into a freshly migrated database, then ANALYZEd. Prints the
load figures and the wall time of:

* `contention` over the whole window grouped by NAMESPACE (target <= 2 s), one bucket and
  daily buckets, and grouped by CLASS daily — cold (first run of a grouping: hourly peaks
  computed and cached) and warm;
* `whoHeld` by uuid and by node/device at random instants (target <= 50 ms), p50 and max;
* `idleHolders` and `chargeback` over the window;

and at the end the warm audit by NAMESPACE again (target <= 1 s) beside its floor measured in
the same run: plain scans of the rows its answer needs, concurrently (`floor`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import statistics
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
from sqlalchemy import text
from sqlalchemy.engine import make_url

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.history_common import asyncpg_dsn, scratch_database, server_url
from dra_mirror.service.history import partitions
from dra_mirror.service.history.contention import warm_peaks
from dra_mirror.service.history.db import open_engine
from dra_mirror.service.history.migrate import migrate
from dra_mirror.service.history.models import PARTITIONED
from dra_mirror.service.history.queries import HistoryQueries
from dra_mirror.service.history.times import US_PER_HOUR, US_PER_SECOND, to_us

T0 = to_us("2026-10-01T00:00:00Z")
MINUTE = 60 * US_PER_SECOND
CLUSTER = "prod"
DRIVER = "gpu.nvidia.com"
FLUSH = 100_000

COLUMNS = {
    "allocations": ["cluster", "driver", "pool", "device", "uuid", "node", "namespace", "claim",
                    "claim_uid", "request", "share_id", "consumed_capacity", "class_name",
                    "start_us", "end_us", "end_reason", "equivalents", "device_type"],
    "waits": ["cluster", "namespace", "claim", "claim_uid", "class_name", "class_names",
              "start_us", "end_us", "end_reason"],
    "consumers": ["cluster", "namespace", "claim", "claim_uid", "pod", "pod_uid", "start_us",
                  "end_us", "end_reason"],
    "idle_holds": ["cluster", "namespace", "claim", "claim_uid", "start_us", "end_us",
                   "end_reason"],
    "device_inventory": ["cluster", "driver", "pool", "device", "uuid", "node", "data",
                         "start_us", "end_us", "end_reason", "equivalents", "device_type"],
    "object_versions": ["cluster", "kind", "namespace", "name", "uid", "resource_version",
                        "observed_us", "deleted", "body"],
}  # fmt: skip


class Loader:
    def __init__(self, conn: asyncpg.Connection) -> None:
        self.conn = conn
        self.pending: dict[str, list[tuple]] = {t: [] for t in COLUMNS}
        self.rows: dict[str, int] = dict.fromkeys(COLUMNS, 0)

    async def add(self, table: str, row: tuple) -> None:
        rows = self.pending[table]
        rows.append(row)
        if len(rows) >= FLUSH:
            await self.flush(table)

    async def flush(self, table: str | None = None) -> None:
        for name in [table] if table else list(self.pending):
            rows = self.pending[name]
            if rows:
                await self.conn.copy_records_to_table(name, records=rows, columns=COLUMNS[name])
                self.rows[name] += len(rows)
                self.pending[name] = []


def _body(kind: str, ns: str, name: str, uid: str, rv: int, state: str) -> str:
    return (
        f'{{"type":"{kind}","meta":{{"cluster":"{CLUSTER}","name":"{name}","namespace":"{ns}",'
        f'"uid":"{uid}","resource_version":"{rv}"}},"state":"{state}",'
        f'"requests":[{{"name":"gpu","device_class_name":"gpu.nvidia.com"}}]}}'
    )


async def generate(loader: Loader, *, nodes: int, days: int, versions: int, seed: int) -> dict:
    rng = random.Random(seed)
    end = T0 + days * 24 * US_PER_HOUR
    claims: list[tuple[str, str, str, int, int]] = []  # ns, name, uid, start, end
    devices = []
    for n in range(nodes):
        node = f"node-{n:04d}"
        klass = "h200" if n % 2 == 0 else "a100"
        for g in range(8):
            uuid = f"GPU-{n:04d}{g:02d}-{rng.getrandbits(48):012x}"
            devices.append((node, f"gpu-{g}", uuid, klass))
            data = f'{{"model":"{klass}","index":{g}}}'
            if rng.random() < 0.1:  # a driver upgrade half-way: the device changes once
                mid = T0 + (end - T0) // 2
                await loader.add("device_inventory", (CLUSTER, DRIVER, node, f"gpu-{g}", uuid,
                                 node, data, T0, mid, "changed", 1.0, "gpu"))  # fmt: skip
                await loader.add("device_inventory", (CLUSTER, DRIVER, node, f"gpu-{g}", uuid,
                                 node, data, mid, None, None, 1.0, "gpu"))  # fmt: skip
            else:
                await loader.add("device_inventory", (CLUSTER, DRIVER, node, f"gpu-{g}", uuid,
                                 node, data, T0, None, None, 1.0, "gpu"))  # fmt: skip
    serial = 0
    for node, device, uuid, klass in devices:
        t = T0 + int(rng.expovariate(1 / 20) * MINUTE)
        while t < end:
            serial += 1
            ns = f"team-{rng.randrange(40):02d}"
            name = f"job-{serial}-gpu"
            uid = f"c{serial:09d}"
            long_wait = rng.random() < 0.05
            wait = int(rng.expovariate(1 / (120 if long_wait else 5)) * MINUTE) + US_PER_SECOND
            hold = max(5 * MINUTE, int(rng.expovariate(1 / 180) * MINUTE))
            start, release = t, t + hold
            pod_start = start + 10 * US_PER_SECOND
            idle_tail = int(hold * rng.uniform(0.1, 0.5)) if rng.random() < 0.3 else 0
            pod_end = release - idle_tail
            open_end = release >= end
            await loader.add("waits", (CLUSTER, ns, name, uid, klass, klass, start - wait, start,
                                       "allocated"))  # fmt: skip
            await loader.add("allocations", (
                CLUSTER, DRIVER, node, device, uuid, node, ns, name, uid, "gpu", "", "{}", klass,
                start, None if open_end else release, None if open_end else "released",
                1.0, "gpu"))  # fmt: skip
            await loader.add("consumers", (CLUSTER, ns, name, uid, f"job-{serial}",
                             f"p{serial:09d}", pod_start, min(pod_end, end) if pod_end < end
                             else None, "removed" if pod_end < end else None))  # fmt: skip
            if idle_tail and pod_end < end:
                await loader.add("idle_holds", (CLUSTER, ns, name, uid, pod_end,
                                 None if open_end else release, None if open_end else "ended"))  # fmt: skip
            claims.append((ns, name, uid, start - wait, release))
            t = release + int(rng.expovariate(1 / 20) * MINUTE)
    per_claim = max(1, versions // max(1, len(claims)))
    written = 0
    for ns, name, uid, start, release in claims:
        for v in range(per_claim):
            if written >= versions:
                break
            observed = start + (release - start) * v // per_claim
            kind = "ResourceClaim" if v % 2 == 0 else "Pod"
            await loader.add("object_versions", (CLUSTER, kind, ns, name, uid if kind ==
                             "ResourceClaim" else "p" + uid, str(written), observed,
                             v == per_claim - 1, _body(kind, ns, name, uid, written, "allocated")))  # fmt: skip
            written += 1
    await loader.flush()
    return {"devices": len(devices), "claims": len(claims), "uuids": [d[2] for d in devices],
            "names": [f"{d[0]}/{d[1]}" for d in devices], "end": end}  # fmt: skip


async def timed(label: str, coro_factory, runs: int = 3) -> tuple[float, float]:
    """Prints the first run (cold: the peak-pending cache of `service.history.peaks` is empty
    for a new grouping) and the median of `runs` more (warm); returns both."""
    started = time.perf_counter()
    result = await coro_factory()
    cold = time.perf_counter() - started
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        result = await coro_factory()
        times.append(time.perf_counter() - started)
    median = statistics.median(times)
    print(f"{label}: cold {cold * 1000:.0f} ms, warm median {median * 1000:.0f} ms, best "
          f"{min(times) * 1000:.0f} ms ({len(result)} rows)")  # fmt: skip
    return cold, median


async def load(conn, args, url: str) -> dict:
    # the months of the window (and the day before it: the first claims' waits begin before
    # T0), as the writer's batches would
    engine = open_engine(url)
    end = T0 + args.days * 24 * US_PER_HOUR
    await partitions.create(
        engine, dict.fromkeys(PARTITIONED, partitions.months_between(T0 - 24 * US_PER_HOUR, end))
    )
    await engine.dispose()
    loader = Loader(conn)
    started = time.perf_counter()
    world = await generate(loader, nodes=args.nodes, days=args.days, versions=args.versions,
                           seed=args.seed)  # fmt: skip
    await conn.execute(
        "INSERT INTO device_classes SELECT DISTINCT cluster, COALESCE(uuid, driver || '/' || "
        "pool || '/' || device), class_name FROM allocations WHERE class_name <> '' "
        "ON CONFLICT DO NOTHING"
    )
    await conn.execute("ANALYZE")
    load_s = time.perf_counter() - started
    size = await conn.fetchval("SELECT pg_size_pretty(pg_database_size(current_database()))")
    total = sum(loader.rows.values())
    print(f"{args.nodes} nodes, {world['devices']} devices, {args.days} days: "
          f"{world['claims']:,} claims; loaded {total:,} rows in {load_s:.0f}s "
          f"({total / load_s:,.0f} rows/s), database {size}")  # fmt: skip
    print("rows: " + ", ".join(f"{t} {n:,}" for t, n in loader.rows.items()))
    return world


async def reuse(conn, days: int) -> dict:
    """The world of a kept database, its peak cache emptied (so the first audit is cold)."""
    await conn.execute("DELETE FROM pending_peaks; DELETE FROM pending_peak_hours; ANALYZE")
    devices = await conn.fetch("SELECT DISTINCT uuid, node, device FROM device_inventory")
    claims = await conn.fetchval("SELECT count(*) FROM waits")
    print(f"reusing {len(devices)} devices, {claims:,} claims")
    return {"devices": len(devices), "claims": claims, "uuids": [d[0] for d in devices],
            "names": [f"{d[1]}/{d[2]}" for d in devices],
            "end": T0 + days * 24 * US_PER_HOUR}  # fmt: skip


FLOOR_SCANS = (
    "SELECT count(*) FROM allocations WHERE start_us < $2 AND (end_us IS NULL OR end_us > $1)",
    "SELECT count(*) FROM idle_holds WHERE start_us < $2 AND (end_us IS NULL OR end_us > $1)",
    "SELECT count(*) FROM waits WHERE start_us >= $1 AND start_us < $2",
)


async def floor(url: str, start: int, end: int, runs: int = 3) -> float:
    """The floor of an audit by NAMESPACE over [start, end): the plainest scan of the rows its
    answer needs (the allocations and idle holds overlapping the window, the waits started in
    it; the peak cache's few rows left out), one statement per table on its own connection,
    concurrently, as the audit runs its statements. Median of `runs`, after one to warm."""
    conns = [await asyncpg.connect(asyncpg_dsn(url)) for _ in FLOOR_SCANS]
    for conn in conns:
        await conn.execute("SET jit = off; SET max_parallel_workers_per_gather = 0")
    times = []
    for _ in range(runs + 1):
        began = time.perf_counter()
        await asyncio.gather(
            *(c.fetchval(q, start, end) for c, q in zip(conns, FLOOR_SCANS, strict=True))
        )
        times.append(time.perf_counter() - began)
    for conn in conns:
        await conn.close()
    return statistics.median(times[1:])


@contextlib.asynccontextmanager
async def fresh_database(url: str) -> AsyncIterator[tuple[str, bool]]:
    async with scratch_database(url, "bench_30d") as scratch:
        yield scratch, True


@contextlib.asynccontextmanager
async def kept_database(url: str, name: str) -> AsyncIterator[tuple[str, bool]]:
    admin = await asyncpg.connect(asyncpg_dsn(make_url(url).set(database="postgres")
                                              .render_as_string(False)))  # fmt: skip
    exists = await admin.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", name)
    if not exists:
        await admin.execute(f'CREATE DATABASE "{name}"')
    await admin.close()
    yield make_url(url).set(database=name).render_as_string(hide_password=False), not exists


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--versions", type=int, default=10_000_000)
    parser.add_argument("--quick", action="store_true", help="50 nodes, 200k object versions")
    parser.add_argument("--seed", type=int, default=30)
    parser.add_argument("--url", default=None)
    parser.add_argument("--keep", metavar="DATABASE", default=None,
                        help="load into DATABASE and keep it; if it exists, reuse its rows "
                        "(upgraded to the head revision, the peak cache emptied)")  # fmt: skip
    args = parser.parse_args()
    if args.quick:
        args.nodes, args.versions = 50, 200_000
    database = (
        kept_database(server_url(args.url), args.keep)
        if args.keep
        else fresh_database(server_url(args.url))
    )
    async with database as (url, fresh):
        began = time.perf_counter()
        await migrate(url)
        print(f"migrate to the newest revision: {time.perf_counter() - began:.1f}s")
        conn = await asyncpg.connect(asyncpg_dsn(url))
        if fresh:
            world = await load(conn, args, url)
        else:
            world = await reuse(conn, args.days)
        await conn.close()

        engine = open_engine(url)
        history = HistoryQueries(engine)
        start, end = T0, world["end"]
        day = 24 * US_PER_HOUR
        figures = {}
        _, figures["ns"] = await timed(
            "contention 30d by NAMESPACE, one bucket",
            lambda: history.contention(start, end, group_by="NAMESPACE"),
        )
        _, figures["ns_daily"] = await timed(
            "contention 30d by NAMESPACE, daily",
            lambda: history.contention(start, end, group_by="NAMESPACE", bucket_us=day),
        )
        await timed(
            "contention 30d by CLASS, daily",
            lambda: history.contention(start, end, group_by="CLASS", bucket_us=day),
        )
        await timed("idleHolders 30d (top 100)", lambda: history.idle_holders(start, end))
        await timed("chargeback 30d by namespace", lambda: history.chargeback(start, end))
        # what the writer does in the background (WriterOptions.warm_days): fill the peak cache
        # of every grouping over the window, then the first audit of a grouping reads it
        async with engine.begin() as sql:
            await sql.execute(text("DELETE FROM pending_peaks"))
            await sql.execute(text("DELETE FROM pending_peak_hours"))
        began = time.perf_counter()
        hours = await warm_peaks(engine, start_us=start, end_us=end, now_us=end + US_PER_HOUR)
        print(f"peak cache filled in the background for 4 groupings x {hours // 4} hours: "
              f"{time.perf_counter() - began:.2f}s")  # fmt: skip
        figures["first_ns"], _ = await timed(
            "contention 30d by NAMESPACE, one bucket, after the background fill",
            lambda: history.contention(start, end, group_by="NAMESPACE"),
        )
        rng = random.Random(1)
        for label, names in (("uuid", world["uuids"]), ("node/device", world["names"])):
            samples = []
            for _ in range(50):
                name, at = rng.choice(names), rng.randrange(start, end)
                began = time.perf_counter()
                await history.who_held(name, at)
                samples.append(time.perf_counter() - began)
            samples.sort()
            print(f"whoHeld by {label}: p50 {statistics.median(samples) * 1000:.1f} ms, "
                  f"max {samples[-1] * 1000:.1f} ms (50 random devices and instants)")  # fmt: skip
        _, figures["ns"] = await timed(
            "contention 30d by NAMESPACE, one bucket, again beside its floor",
            lambda: history.contention(start, end, group_by="NAMESPACE"),
        )
        await engine.dispose()
        scan = await floor(url, start, end)
        verdict = "ok" if figures["ns"] <= 1.0 else "OVER the 1 s target"
        print(f"contention by namespace over {args.days} days (warm): {figures['ns']:.2f}s "
              f"({verdict}); floor (plain scans of its rows) {scan:.2f}s, "
              f"{figures['ns'] / scan:.1f}x; load average {os.getloadavg()[0]:.1f} on "
              f"{os.cpu_count()} cores")  # fmt: skip
        first = figures["first_ns"]
        verdict = "ok" if first <= 2.0 else "OVER the 2 s target"
        print(f"first audit by namespace after the background fill: {first:.2f}s ({verdict})")


if __name__ == "__main__":
    asyncio.run(main())
