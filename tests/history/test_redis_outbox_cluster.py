"""The history stream outbox on a real Redis Cluster (three masters, one replica each): its
keys hash to one slot, it drains into PostgreSQL, a takeover claims a dead consumer's entries,
an append returns once a replica holds the entry, and a master killed right after appends
loses none of them."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator

import pytest
from redis.asyncio.cluster import RedisCluster
from redis.cluster import key_slot

from dra_mirror.service.history.db import open_engine
from dra_mirror.service.history.migrate import migrate
from dra_mirror.service.history.redis_outbox import RedisStreamOutbox, connect, stream_key
from dra_mirror.service.history.runtime import History
from dra_mirror.service.history.writer import HistorySink
from tests.history.conftest import FAST, fresh_database
from tests.history.script import batches
from tests.history.test_writer import _counts, _matches_truth
from tests.infra.redis_cluster import RedisCluster as ClusterServers
from tests.infra.redis_cluster import command

EXPECTED = {"allocations": 4, "consumers": 4, "waits": 5, "idle_holds": 3,
            "device_inventory": 5, "object_versions": 5}  # fmt: skip


def test_the_stream_and_its_lease_hash_to_one_slot():
    for prefix in ("dra-mirror", "prod:eu", "", "a{b", "x}y"):
        outbox = RedisStreamOutbox(
            connect("redis://127.0.0.1:1/0"), stream_key=stream_key(prefix), consumer="c"
        )  # creating a client connects nowhere
        slots = {key_slot(key.encode()) for key in (outbox.name, outbox.lease_key)}
        assert len(slots) == 1, prefix
        if "{" not in prefix and "}" not in prefix:
            assert slots == {key_slot(b"{history}")}, prefix


def test_a_cluster_url_makes_a_cluster_client():
    assert isinstance(connect("redis+cluster://127.0.0.1:7000/0"), RedisCluster)
    assert not isinstance(connect("redis://127.0.0.1:7000/0"), RedisCluster)


@pytest.fixture
async def engine(request, tmp_path, postgres_url) -> AsyncIterator:
    async with fresh_database("postgres", request, tmp_path) as url:
        await migrate(url)
        engine = open_engine(url)
        yield engine
        await engine.dispose()


@pytest.fixture
async def outboxes(redis_cluster: ClusterServers) -> AsyncIterator:
    """`make(consumer, **options)`: outboxes on one fresh stream of the cluster."""
    prefix = f"test-{uuid.uuid4().hex[:8]}"
    made: list[RedisStreamOutbox] = []

    def make(consumer: str, **options) -> RedisStreamOutbox:
        outbox = RedisStreamOutbox.from_url(redis_cluster.url, prefix=prefix, consumer=consumer,
                                            **options)  # fmt: skip
        made.append(outbox)
        return outbox

    yield make
    for outbox in made:
        await outbox.close()


def _slot(outbox: RedisStreamOutbox) -> int:
    return key_slot(outbox.name.encode())


def _waits(port: int) -> int:
    """How many WAIT commands the node at `port` has run."""
    stats = command(port, "INFO", "commandstats")
    for line in stats.splitlines():
        if line.startswith("cmdstat_wait:"):
            return int(line.split("calls=", 1)[1].split(",", 1)[0])
    return 0


async def test_on_a_cluster_entries_drain_into_postgres(engine, outboxes, redis_cluster):
    outbox = outboxes("writer-1")
    history = History(engine, outbox=outbox, options=FAST)
    history.start()
    master = redis_cluster.master_of(_slot(outbox))
    waits = _waits(master.port)
    try:
        for changes in batches():
            await history.sink(changes)
        await asyncio.wait_for(history.writer.drained(), 30)
    finally:
        await history.close()
    assert await _counts(engine) == EXPECTED
    await _matches_truth(engine)
    assert (await outbox.backlog(), await outbox.pending_count()) == (0, 0)
    # every append waited for the stream's replica, on the stream's master
    assert _waits(master.port) - waits == len(batches())


async def test_on_a_cluster_a_takeover_claims_a_dead_consumers_entries(engine, outboxes):
    dead = outboxes("writer-dead", lease_ttl=0.5)
    entries = batches()
    sink = HistorySink(dead)
    for changes in entries:
        await sink(changes)
    assert len(await dead.read(7, block=0.1)) == 7  # then it dies holding them
    survivor = outboxes("writer-alive", lease_ttl=0.5)
    history = History(engine, outbox=survivor, options=FAST)
    history.start()
    try:
        await asyncio.wait_for(history.writer.drained(), 30)
    finally:
        await history.close()
    assert history.writer.stats.entries == len(entries)
    assert await _counts(engine) == EXPECTED
    await _matches_truth(engine)


async def test_a_master_killed_after_appends_loses_none_of_them(engine, outboxes, redis_cluster):
    entries = batches()
    appender = outboxes("appender")
    sink = HistorySink(appender)
    for changes in entries[:10]:
        await sink(changes)
    victim, promoted_after = await asyncio.to_thread(
        redis_cluster.kill_master, slot=_slot(appender)
    )
    assert promoted_after < 30
    began = time.monotonic()
    for changes in entries[10:]:  # the reactor retries an append that failed (StoreError)
        while True:
            try:
                await sink(changes)
                break
            except Exception:
                await asyncio.sleep(0.2)
                if time.monotonic() - began > 30:
                    raise
    drainer = outboxes("writer-1")
    assert await drainer.backlog() >= len(entries)  # a retried append may have landed twice
    history = History(engine, outbox=drainer, options=FAST)
    history.start()
    try:
        await asyncio.wait_for(history.writer.drained(), 30)
    finally:
        await history.close()
    assert await _counts(engine) == EXPECTED
    await _matches_truth(engine)
    assert victim.port not in redis_cluster.masters()


async def test_on_a_cluster_a_fenced_append_waits_for_the_replica(outboxes, redis_cluster):
    from dra_mirror.service.history.redis_outbox import OutboxFenced

    outbox, successor = outboxes("writer-1"), outboxes("writer-2")
    master = redis_cluster.master_of(_slot(outbox))
    waits = _waits(master.port)
    await outbox.fence("east", "1:writer-1")
    await outbox.append(b"x", cluster="east")
    assert _waits(master.port) - waits == 1
    await successor.fence("east", "2:writer-2")
    with pytest.raises(OutboxFenced):
        await outbox.append(b"y", cluster="east")
    assert await outbox.backlog() == 1
