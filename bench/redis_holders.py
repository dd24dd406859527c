"""Benchmark: `whoHolds` by uuid against Redis, one script against three dependent lookups.

    .venv/bin/python bench/redis_holders.py [--scenario scale-500] [--uuids 500] [--rounds 3]
        (DRA_MIRROR_TEST_REDIS_URL or --url: a redis-server, e.g. `tests.infra.stack up DIR`)

The scenario's recorded pages (bench/page_server.py) are written through `RedisStore.apply`
under a fresh prefix (left on the server: use a scratch one); then, for each of `--uuids` device uuids, in turn and interleaved:
`RedisStore.holders_by_uuid` (one script per cluster: devices, holds, claims) and the floor of
the same answer from the store's own reads (`composed_holders`: the `UUID_DEVICES` lookup,
the `DEVICE_ALLOCATIONS` lookup, the claims' `get`). Printed: p50 and p99 of each.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from bench.index_sync import KINDS, _records  # noqa: E402


def _p(values: list[float], q: float) -> float:
    return sorted(values)[min(len(values) - 1, int(q * len(values)))] * 1e3


async def run(args: argparse.Namespace, cluster: str, records: dict[str, list]) -> None:
    from dra_mirror.service.stores.protocols import composed_holders
    from dra_mirror.service.stores.redis import RedisStore

    url = args.url or os.environ["DRA_MIRROR_TEST_REDIS_URL"]
    store = RedisStore.from_url(url, prefix=f"bench-{uuid.uuid4().hex[:8]}")
    try:
        index = store.open_index(cluster)
        for kind in KINDS.values():
            await store.apply(index.resync(kind, records[kind], at="2026-12-04T00:00:00Z"))
        devices = await store.list_devices(cluster=cluster)
        uuids = [d.device.uuid for d in devices if d.device.uuid][: args.uuids]
        script: list[float] = []
        lookups: list[float] = []
        for _ in range(args.rounds):
            for name in uuids:
                began = time.perf_counter()
                await store.holders_by_uuid(name)
                script.append(time.perf_counter() - began)
                began = time.perf_counter()
                await composed_holders(store, name)
                lookups.append(time.perf_counter() - began)
    finally:
        await store.close()
    print(f"{args.scenario}: {len(uuids)} uuids x {args.rounds}, load {os.getloadavg()[0]:.1f}")
    print(f"  holders_by_uuid (one script)  p50 {statistics.median(script) * 1e3:.3f} ms  "
          f"p99 {_p(script, 0.99):.3f} ms")  # fmt: skip
    print(f"  three lookups (floor)         p50 {statistics.median(lookups) * 1e3:.3f} ms  "
          f"p99 {_p(lookups, 0.99):.3f} ms")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", default="scale-500")
    parser.add_argument("--url")
    parser.add_argument("--uuids", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    cluster, records = _records(args.scenario, 500)
    asyncio.run(run(args, cluster, records))


if __name__ == "__main__":
    main()
