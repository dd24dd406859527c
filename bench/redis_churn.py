"""Benchmark: steady churn into Redis, end to end, with lag — against a floor.

    .venv/bin/python bench/redis_churn.py [--scenario scale-500] [--rate 5000] [--seconds 10]

A synced cluster (the scenario, written once through `RedisStore.apply`, not timed) then sees
claim updates — consumers leaving and coming back (`status.reservedFor`), so each update
changes the claim's state and idleness — offered at `--rate` events/s on a schedule. As the
reactor does, events are batched (up to 500, or 50 ms after the first), folded into the
reactor's `ClusterIndex` and applied to the store. A reader in the same process (one core in
all) subscribes to the cluster's live events: lag is the time from an event's scheduled
moment to its arrival at the reader, i.e. after the batch is visible in Redis.

* floor: the same updated records, msgpack-encoded and SET in one pipeline per batch, as fast
  as possible (no model, no indexes, no events);
* churn: events/s sustained (applied / elapsed) and lag p50 / p99 / max.

Targets (issue 4): ≥ 5,000 events/s on one core, lag p99 ≤ 1 s.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from msgspec.structs import replace

from bench.redis_common import (
    LIST_ORDER,
    percentile,
    redis_server,
    scenario_records,
)

BATCH_EVENTS = 500
BATCH_DELAY = 0.05


def updates(claims: list, count: int) -> list:
    """`count` claim records, each the next version of one reserved claim (round robin):
    its consumers leave, then come back."""
    out = []
    versions = {}
    for number in range(count):
        original = claims[number % len(claims)]
        version = versions.get(original.meta.name, 0) + 1
        versions[original.meta.name] = version
        meta = replace(
            original.meta, resource_version=f"{original.meta.resource_version}.{version}"
        )
        if version % 2:
            out.append(replace(original, meta=meta, reserved_for=(), state="allocated"))
        else:
            out.append(replace(original, meta=meta))
    return out


async def floor(url: str, cluster: str, stream: list) -> float:
    import redis.asyncio as aioredis

    from dra_mirror.service.model.records import key_of
    from dra_mirror.service.stores.redis_keys import encode, object_field

    client = aioredis.Redis.from_url(url)
    started = time.perf_counter()
    for start in range(0, len(stream), BATCH_EVENTS):
        async with client.pipeline(transaction=False) as pipe:
            for record in stream[start : start + BATCH_EVENTS]:
                pipe.set(f"floor:{{{cluster}}}:{object_field(key_of(record))}", encode(record))
            await pipe.execute()
    elapsed = time.perf_counter() - started
    await client.aclose()
    return elapsed


async def churn(url: str, cluster: str, records: dict, stream: list, rate: float) -> dict:
    from dra_mirror.service.model.index import Event
    from dra_mirror.service.stores.bus import ClaimEvent
    from dra_mirror.service.stores.redis import RedisStore

    store = RedisStore.from_url(url, prefix="churn")
    index = store.open_index(cluster)
    for kind in LIST_ORDER:
        await store.apply(index.resync(kind, records[kind], at="t0"))
    gc.freeze()  # as the app does once synced (service.runtime.mirror.freeze_heap)

    scheduled: dict[tuple[str, str], float] = {}
    lags: list[float] = []
    done = asyncio.Event()
    expected = len(stream)

    async def read() -> None:
        async for delivery in store.subscribe(cluster):
            event = delivery.event
            if isinstance(event, ClaimEvent) and event.new is not None:
                at = scheduled.pop((event.name, event.new.meta.resource_version), None)
                if at is not None:
                    lags.append(time.perf_counter() - at)
                    if len(lags) == expected:
                        done.set()

    reader = asyncio.create_task(read())
    await asyncio.sleep(0.3)
    loop_start = time.perf_counter()
    position = 0
    while position < len(stream):
        now = time.perf_counter()
        due = min(len(stream), int((now - loop_start) * rate) + 1)
        if due <= position:
            await asyncio.sleep(min(BATCH_DELAY, (position + 1) / rate - (now - loop_start)))
            continue
        # A batch: what is due (at most BATCH_EVENTS), as the reactor takes its queue.
        end = min(due, position + BATCH_EVENTS)
        batch = stream[position:end]
        for offset, record in enumerate(batch):
            scheduled[(record.meta.name, record.meta.resource_version)] = (
                loop_start + (position + offset) / rate
            )
        changes = index.apply([Event("MODIFIED", r) for r in batch], at=f"t{end}")
        await store.apply(changes)
        position = end
        await asyncio.sleep(0)  # let the reader run, as the reactor's loop would
    applied = time.perf_counter() - loop_start
    try:
        await asyncio.wait_for(done.wait(), 30)
    except TimeoutError:
        pass
    reader.cancel()
    gc.unfreeze()
    await store.close()
    return {"elapsed": applied, "lags": lags}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", default="scale-500")
    parser.add_argument("--rate", type=float, default=5000)
    parser.add_argument("--seconds", type=float, default=10)
    args = parser.parse_args()
    cluster, records = scenario_records(args.scenario)
    reserved = [c for c in records["ResourceClaim"] if c.reserved_for and c.allocation]
    stream = updates(reserved, int(args.rate * args.seconds))
    print(f"scenario {args.scenario}: {sum(map(len, records.values())):,} objects; "
          f"{len(reserved):,} reserved claims updated round robin; {len(stream):,} events")  # fmt: skip
    with redis_server() as url:
        floor_s = asyncio.run(floor(url, cluster, stream))
        result = asyncio.run(churn(url, cluster, records, stream, args.rate))
    lags = result["lags"]
    print(f"floor (msgpack + pipelined SET per batch): {len(stream) / floor_s:9,.0f} events/s")
    print(f"offered {args.rate:,.0f} events/s for {args.seconds:.0f}s: applied "
          f"{len(stream) / result['elapsed']:9,.0f} events/s "
          f"({len(stream) / result['elapsed'] / (len(stream) / floor_s):.2f}x of the floor's rate)")  # fmt: skip
    print(f"lag to a live reader: p50 {percentile(lags, 0.5) * 1000:.0f} ms, "
          f"p99 {percentile(lags, 0.99) * 1000:.0f} ms, max {max(lags) * 1000:.0f} ms "
          f"({len(lags):,} of {len(stream):,} seen) — targets >= 5,000/s, p99 <= 1 s")  # fmt: skip


if __name__ == "__main__":
    main()
