"""The Redis stream outbox between real Redis and real PostgreSQL: nothing lost, replays harmless.

Each test has its own stream (a fresh key prefix) on the suite's Redis and its own database on
the suite's PostgreSQL; the hand-written script of `tests.history.script` is the history.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import pytest
from redis import asyncio as aioredis

from dra_mirror.service.history.db import open_engine
from dra_mirror.service.history.migrate import migrate
from dra_mirror.service.history.outbox import WatchedEntry, decode_entry
from dra_mirror.service.history.redis_outbox import RedisStreamOutbox, stream_key
from dra_mirror.service.history.runtime import History
from dra_mirror.service.history.writer import HistorySink
from dra_mirror.service.stores.protocols import StoreUnavailable
from tests.history.conftest import FAST, eventually, fresh_database
from tests.history.script import batches
from tests.history.test_writer import _counts, _matches_truth

pytestmark = [pytest.mark.redis, pytest.mark.postgres]

EXPECTED = {"allocations": 4, "consumers": 4, "waits": 5, "idle_holds": 3,
            "device_inventory": 5, "object_versions": 5}  # fmt: skip


@pytest.fixture
async def engine(request, tmp_path, postgres_url) -> AsyncIterator:
    async with fresh_database("postgres", request, tmp_path) as url:
        await migrate(url)
        engine = open_engine(url)
        yield engine
        await engine.dispose()


@pytest.fixture
async def outboxes(redis_url) -> AsyncIterator:
    """`make(consumer, **options)`: outboxes on one fresh stream, closed at the end."""
    prefix = f"test-{uuid.uuid4().hex[:8]}"
    made: list[RedisStreamOutbox] = []

    def make(consumer: str, cls: type[RedisStreamOutbox] = RedisStreamOutbox, **options):
        client = aioredis.Redis.from_url(redis_url, socket_connect_timeout=1.0)
        outbox = cls(client, stream_key=stream_key(prefix), consumer=consumer, **options)
        made.append(outbox)
        return outbox

    yield make
    for outbox in made:
        await outbox.close()


class AckLosingOutbox(RedisStreamOutbox):
    """A writer that 'crashes' after every commit: its acknowledgements never reach Redis."""

    async def ack(self, ids) -> None:
        return None


async def _append_all(sink: HistorySink, entries) -> None:
    for changes in entries:
        await sink(changes)


async def test_appended_entries_are_written_to_postgres_and_leave_the_stream(engine, outboxes):
    outbox = outboxes("writer-1")
    history = History(engine, outbox=outbox, options=FAST)
    history.start()
    try:
        await _append_all(history.sink, batches())
        await asyncio.wait_for(history.writer.drained(), 30)
    finally:
        await history.close()
    assert await _counts(engine) == EXPECTED
    await _matches_truth(engine)
    assert history.writer.stats.entries == len(batches())
    assert await outbox.backlog() == 0  # acknowledged entries are deleted
    assert await outbox.pending_count() == 0


async def test_backlog_counts_appended_and_pending_counts_handed_out(outboxes):
    outbox = outboxes("writer-1")
    sink = HistorySink(outbox)
    await _append_all(sink, batches()[:6])
    assert await outbox.backlog() == 6
    first = await outbox.read(4, block=0.1)
    assert len(first) == 4 and await outbox.pending_count() == 4
    ids = [entry_id for entry_id, _ in first]
    assert ids == sorted(ids, key=lambda i: tuple(map(int, i.split("-"))))
    await outbox.ack(ids[:2])
    assert (await outbox.backlog(), await outbox.pending_count()) == (4, 2)


async def test_a_postgres_outage_loses_nothing(engine, outboxes, postgres_server):
    entries = batches()
    history = History(engine, outbox=outboxes("writer-1"), options=FAST)
    history.start()
    try:
        await _append_all(history.sink, entries[:5])
        await asyncio.wait_for(history.writer.drained(), 30)
        await asyncio.to_thread(postgres_server.stop)
        try:
            await _append_all(history.sink, entries[5:])  # appends never wait for SQL
            await eventually(lambda: history.writer.stats.retries >= 3, "three failed attempts")
            assert await history.outbox.backlog() == len(entries) - 5
        finally:
            await asyncio.to_thread(postgres_server.start)
        await asyncio.wait_for(history.writer.drained(), 30)
    finally:
        await history.close()
    assert history.writer.stats.last_error is not None
    assert await _counts(engine) == EXPECTED
    await _matches_truth(engine)


async def test_a_restarted_writer_resumes_after_the_last_acknowledged_entry(engine, outboxes):
    entries = batches()
    first = History(engine, outbox=outboxes("writer-1"), options=FAST)
    first.start()
    await _append_all(first.sink, entries[:10])
    await asyncio.wait_for(first.writer.drained(), 30)
    await first.close()
    # the same consumer again, now committing without acknowledging (a crash after commit)
    crashing = History(engine, outbox=outboxes("writer-1", AckLosingOutbox), options=FAST)
    crashing.start()
    await _append_all(crashing.sink, entries[10:])
    rest = len(entries) - 10
    await eventually(lambda: crashing.writer.stats.entries == rest, "the rest committed")
    await crashing.close()
    committed = await _counts(engine)
    assert committed == EXPECTED
    restarted_outbox = outboxes("writer-1")
    assert await restarted_outbox.backlog() == rest  # only the unacknowledged entries
    restarted = History(engine, outbox=restarted_outbox, options=FAST)
    restarted.start()
    try:
        await asyncio.wait_for(restarted.writer.drained(), 30)
    finally:
        await restarted.close()
    # handed out again (XREADGROUP 0), skipped as committed, acknowledged: rows exact
    assert restarted.writer.stats.replayed == rest
    assert restarted.writer.stats.entries == 0
    assert await _counts(engine) == committed
    assert await restarted_outbox.backlog() == 0
    await _matches_truth(engine)


async def test_a_second_consumer_takes_over_the_pending_entries_of_a_dead_one(engine, outboxes):
    dead = outboxes("writer-dead", lease_ttl=0.5)
    sink = HistorySink(dead)
    entries = batches()
    await _append_all(sink, entries)
    handed = await dead.read(7, block=0.1)  # then the process dies: never written, never acked
    assert len(handed) == 7 and await dead.pending_count() == 7
    survivor = outboxes("writer-alive", lease_ttl=0.5)
    history = History(engine, outbox=survivor, options=FAST)
    history.start()  # stands by until the dead consumer's drain lease expires
    try:
        await asyncio.wait_for(history.writer.drained(), 30)
    finally:
        await history.close()
    assert history.writer.stats.entries == len(entries)
    assert await _counts(engine) == EXPECTED
    await _matches_truth(engine)
    assert (await survivor.backlog(), await survivor.pending_count()) == (0, 0)


async def _consumers(outbox: RedisStreamOutbox) -> dict[str, int]:
    """XINFO CONSUMERS of the group: name -> pending entries."""
    infos = await outbox.redis.xinfo_consumers(outbox.name, outbox.group)
    return {_name(info["name"]): int(info["pending"]) for info in infos}


def _name(raw: bytes | str) -> str:
    return raw.decode() if isinstance(raw, bytes) else raw


async def test_a_takeover_removes_dead_consumers_without_pending_entries(outboxes):
    await _append_all(HistorySink(outboxes("appender")), batches()[:6])
    # an earlier pod that drained and acknowledged everything it was handed, then stopped
    emptied = outboxes("writer-emptied")
    done = await emptied.read(2, block=0.1)
    await emptied.ack([entry_id for entry_id, _ in done])
    await emptied.release()
    # a later pod that died holding four unacknowledged entries
    holding = outboxes("writer-holding")
    assert len(await holding.read(4, block=0.1)) == 4
    await holding.release()
    assert await _consumers(holding) == {"writer-emptied": 0, "writer-holding": 4}
    await asyncio.sleep(0.3)  # both idle longer than the survivor's claim_idle
    survivor = outboxes("writer-alive", claim_idle=0.2)
    first = await survivor.read(2, block=0.1)  # the takeover claims two of the four
    assert len(first) == 2
    # the emptied consumer is gone; the one still holding entries stays
    assert await _consumers(survivor) == {"writer-holding": 2, "writer-alive": 2}
    await survivor.ack([entry_id for entry_id, _ in first])
    rest = await survivor.read(2, block=0.1)  # the rest, idle longer than claim_idle
    assert len(rest) == 2
    assert await _consumers(survivor) == {"writer-alive": 2}
    await survivor.ack([entry_id for entry_id, _ in rest])
    assert (await survivor.backlog(), await survivor.pending_count()) == (0, 0)


async def test_a_redis_outage_fails_appends_loudly_and_the_writer_recovers(
    engine, outboxes, redis_server
):
    entries = batches()
    history = History(engine, outbox=outboxes("writer-1"), options=FAST)
    history.start()
    try:
        await asyncio.to_thread(redis_server.stop)
        try:
            # the reactor retries a sink raising StoreError with the same batch
            with pytest.raises(StoreUnavailable):
                await history.sink(entries[0])
            await eventually(
                lambda: (history.writer.stats.last_error or "").startswith("outbox"),
                "the writer saw the outage",
            )
        finally:
            await asyncio.to_thread(redis_server.start)  # back EMPTY: no stream, no group
        await _append_all(history.sink, entries)
        await eventually(
            lambda: history.writer.stats.entries == len(entries), "every entry written"
        )
        await asyncio.wait_for(history.writer.drained(), 30)
    finally:
        await history.close()
    assert await _counts(engine) == EXPECTED
    await _matches_truth(engine)


async def test_a_watching_mirror_over_redis_writes_history_through_the_stream(
    request, tmp_path, redis_url, postgres_url
):
    from sqlalchemy import func, select

    from dra_mirror.service.history.models import ObjectVersion, OutboxPosition
    from dra_mirror.service.runtime.mirror import mirror_app
    from dra_mirror.service.settings import (
        ClusterSettings,
        HistorySettings,
        Settings,
        StoreSettings,
    )
    from dra_mirror.service.sim.run import Simulator
    from dra_mirror.service.stores.redis import RedisStore
    from tests.clusters.world import small_world
    from tests.metrics.scrape import client

    kubeconfig = tmp_path / "kubeconfig"
    prefix = f"e2e-{uuid.uuid4().hex[:8]}"
    async with fresh_database("postgres", request, tmp_path) as url:
        settings = Settings(
            clusters=ClusterSettings(kubeconfig=str(kubeconfig)),
            store=StoreSettings(redis_url=redis_url, redis_prefix=prefix),
            history=HistorySettings(database_url=url, outbox_consumer="e2e-watcher"),
        )
        async with Simulator([small_world("east")], kubeconfig_path=kubeconfig):
            app = mirror_app(settings, store=RedisStore.from_url(redis_url, prefix=prefix))
            async with client(app):
                await app.state.mirror.reactors.wait_synced()
                history = app.state.mirror.history
                assert history.outbox.name == stream_key(prefix)
                await eventually(lambda: history.writer.stats.entries > 0, "entries written")
                await asyncio.wait_for(history.writer.drained(), 30)
        engine = open_engine(url)
        try:
            async with engine.connect() as conn:
                versions = await conn.scalar(select(func.count()).select_from(ObjectVersion))
                position = await conn.scalar(
                    select(OutboxPosition.position).where(
                        OutboxPosition.stream == stream_key(prefix)
                    )
                )
        finally:
            await engine.dispose()
    assert versions and versions > 0
    assert position is not None  # the writer committed positions of the Redis stream
    redis = aioredis.Redis.from_url(redis_url)
    try:
        # all written, acknowledged, deleted — but the watcher's clean stop, which comes
        # after the writer let go of the stream: the next writer takes it
        left = await redis.xrange(stream_key(prefix))
        assert [type(decode_entry(fields[b"e"])) for _, fields in left] == [WatchedEntry]
        for key in [k async for k in redis.scan_iter(match=f"{prefix}:*")]:
            await redis.delete(key)
    finally:
        await redis.aclose()


async def test_appends_are_fenced_by_the_holders_token(outboxes):
    """A watcher's appends of a cluster go in only while its lease's token is the cluster's
    fence in the outbox: a successor's token refuses them, and an outbox that lost its data (no
    fence at all: Redis came back empty) refuses them saying so."""
    from dra_mirror.service.history.redis_outbox import OutboxFenced
    from dra_mirror.service.stores.redis_writes import Fenced

    old, new = outboxes("old"), outboxes("new")
    await old.fence("east", "1:old")
    first = await old.append(b"x", cluster="east")
    assert await old.append(b"y", cluster="west")  # a cluster it holds no fence for: unfenced
    await new.fence("east", "2:new")
    with pytest.raises(OutboxFenced) as refused:
        await old.append(b"z", cluster="east")
    assert isinstance(refused.value, Fenced) and not refused.value.lost
    assert await new.append(b"w", cluster="east") > first
    new.unfence("east")  # the lease lost: what is still in flight is refused
    with pytest.raises(OutboxFenced):
        await new.append(b"v", cluster="east")
    await new.redis.delete(new.fences_key)  # as a Redis that came back empty
    await new.fence("west", "3:new")
    with pytest.raises(OutboxFenced) as refused:
        await old.append(b"u", cluster="east")
    assert refused.value.lost
    assert await new.backlog() == 3
