"""A write waits for its master's replica in proportion to its size (service.stores.redis_wait):
a LIST of thousands of slices takes a replica seconds to take in, a claim's update well under
a millisecond. One redis-server has no replica, so WAIT answers 0 after its whole timeout:
what each WAIT asked for is read from MONITOR."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from redis import asyncio as aioredis

from dra_mirror.service.model.index import ClusterIndex, Event
from dra_mirror.service.stores.redis import RedisStore
from dra_mirror.service.stores.redis_connect import connect
from dra_mirror.service.stores.redis_wait import MIB, Wait
from tests.model.builders import node
from tests.stores.test_contract import EAST

pytestmark = pytest.mark.redis


def test_the_timeout_is_the_base_plus_a_share_per_mib() -> None:
    wait = Wait(1, 500, 100)
    assert wait.timeout_ms(0) == 500
    assert wait.timeout_ms(100 * MIB) == 500 + 10_000
    assert Wait(1, 0, 100).timeout_ms(10) == 1  # WAIT 1 0 would block forever
    assert wait.command(3 * MIB) == [b"WAIT", b"1", b"800"]


async def _waits(redis_url: str, write, count: int) -> list[int]:
    """The timeouts of the first `count` WAITs Redis ran while `write` ran."""
    watcher = aioredis.Redis.from_url(redis_url)
    timeouts: list[int] = []
    try:
        async with watcher.monitor() as monitor:
            await watcher.ping()  # MONITOR is on from here
            task = asyncio.create_task(write())
            while len(timeouts) < count:
                seen = await asyncio.wait_for(monitor.next_command(), 60)
                if seen["command"].upper().startswith("WAIT "):
                    timeouts.append(int(seen["command"].split()[2]))
            await task
    finally:
        await watcher.aclose()
    return timeouts


async def test_a_large_batch_waits_longer_for_the_replica_than_a_small_one(redis_url) -> None:
    store = RedisStore(
        connect(redis_url), prefix=f"test-{uuid.uuid4().hex[:12]}", wait_replicas=1,
        wait_timeout=0.001, wait_per_mib=0.01, wait_backoff=0.0,
    )  # fmt: skip
    index = ClusterIndex(EAST)
    nodes = [Event("ADDED", node("n" + str(i).rjust(120, "0"))) for i in range(8000)]

    async def write() -> None:
        await store.apply(index.apply(nodes, at="t1"))  # a LIST: megabytes
        await store.apply(index.apply([Event("ADDED", node("one"))], at="t2"))

    try:
        large, small = await _waits(redis_url, write, 2)
    finally:
        await store.close()
    assert small == 1  # the base: a batch of one node is a few hundred bytes
    assert large >= 1 + 10  # at least a MiB of commands: 10 ms more for each


async def test_a_large_history_entry_waits_longer_for_the_replica(redis_url) -> None:
    from dra_mirror.service.history.redis_outbox import RedisStreamOutbox, stream_key

    outbox = RedisStreamOutbox(
        connect(redis_url), stream_key=stream_key(f"test-{uuid.uuid4().hex[:12]}"),
        consumer="c", wait_replicas=1, wait_timeout=0.001, wait_per_mib=0.01, wait_backoff=0.0,
    )  # fmt: skip

    async def write() -> None:
        await outbox.append(b"x" * (3 * MIB))  # an initial sync's entry
        await outbox.append(b"x" * 100)

    try:
        large, small = await _waits(redis_url, write, 2)
    finally:
        await outbox.close()
    assert (large, small) == (1 + 30, 1)
