"""Benchmark: initial sync of the 5,000-node scenario into Redis, against a floor.

    .venv/bin/python bench/redis_sync.py [--scenario scale-5000] [--runs 2]

The scenario's objects are built in-process and normalized once (not timed); each run uses a
fresh redis-server on loopback (no persistence) started by this script.

* floor: encode every record (msgpack, as the store does) and SET it under its own key, in
  pipelines of 1,000 — the same bytes, without indexes;
* sync:  what the watcher does after its lists: the reactor's `ClusterIndex.resync` per kind
  (timed separately: it is the model, not the store) and `RedisStore.apply` of each Changes
  (records, and the reverse maps, devices, statuses and idle marks the Changes carries, written
  as they are — the store keeps no index; one MULTI/EXEC per batch).

Both run with the garbage collector's threshold raised as the watchers raise it during an
initial sync (service.reactor.heap.SyncGc). Prints seconds and objects/s of each, the ratio
store/floor (target ≤ 3x) and Redis `used_memory` after the sync (target ≤ 1 GiB).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.redis_common import LIST_ORDER, redis_server, scenario_records


async def floor(url: str, cluster: str, records: dict) -> float:
    import redis.asyncio as aioredis

    from dra_mirror.service.model.records import key_of
    from dra_mirror.service.stores.redis_keys import encode, object_field

    client = aioredis.Redis.from_url(url)
    started = time.perf_counter()
    for kind in LIST_ORDER:
        batch = records[kind]
        for start in range(0, len(batch), 1000):
            async with client.pipeline(transaction=False) as pipe:
                for record in batch[start : start + 1000]:
                    key = key_of(record)
                    pipe.set(f"floor:{{{cluster}}}:{kind}:{object_field(key)}", encode(record))
                await pipe.execute()
    elapsed = time.perf_counter() - started
    await client.flushall()
    await client.aclose()
    return elapsed


async def sync(url: str, cluster: str, records: dict) -> tuple[float, float, int]:
    from dra_mirror.service.stores.redis import RedisStore

    store = RedisStore.from_url(url)
    index = store.open_index(cluster)
    model = 0.0
    writes = 0.0
    for kind in LIST_ORDER:
        started = time.perf_counter()
        changes = index.resync(kind, records[kind], at="2026-11-30T00:00:00Z")
        model += time.perf_counter() - started
        started = time.perf_counter()
        await store.apply(changes)
        writes += time.perf_counter() - started
    info = await store.redis.info("memory")
    await store.close()
    return model, writes, int(info["used_memory"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", default="scale-5000")
    parser.add_argument("--runs", type=int, default=2)
    args = parser.parse_args()
    started = time.perf_counter()
    cluster, records = scenario_records(args.scenario)
    count = sum(len(v) for v in records.values())
    print(f"scenario {args.scenario}: {count:,} objects built and normalized in "
          f"{time.perf_counter() - started:.1f}s")  # fmt: skip
    floors, stores, models, memory = [], [], [], []
    # As the watchers run an initial sync (service.reactor.heap.SyncGc): a raised threshold.
    gc.set_threshold(100_000, *gc.get_threshold()[1:])
    for _ in range(args.runs):
        with redis_server() as url:
            floors.append(asyncio.run(floor(url, cluster, records)))
            model, writes, used = asyncio.run(sync(url, cluster, records))
            models.append(model)
            stores.append(writes)
            memory.append(used)
    f, s, m = statistics.median(floors), statistics.median(stores), statistics.median(models)
    print(f"floor (msgpack + pipelined SET): {f:6.2f}s  {count / f:9,.0f} objects/s")
    print(f"RedisStore.apply (all kinds):    {s:6.2f}s  {count / s:9,.0f} objects/s")
    print(f"reactor index (model, not store): {m:5.2f}s")
    print(f"ratio store/floor: {s / f:.2f}x (target <= 3x)")
    print(
        f"redis used_memory after sync: {statistics.median(memory) / 2**20:,.0f} MiB (target <= 1024)"
    )


if __name__ == "__main__":
    main()
