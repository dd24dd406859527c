"""The outbox writer: duplicates harmless, restarts resume, outages lose nothing, gaps, retention."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import func, select

from dra_mirror.service.history.db import open_engine
from dra_mirror.service.history.migrate import migrate
from dra_mirror.service.history.models import (
    AllocationInterval,
    ConsumerInterval,
    DeviceInterval,
    IdleInterval,
    ObjectVersion,
    WaitInterval,
)
from dra_mirror.service.history.outbox import MemoryOutbox
from dra_mirror.service.history.partitions import maintain
from dra_mirror.service.history.queries import HistoryQueries
from dra_mirror.service.history.times import to_us
from dra_mirror.service.history.writer import WriterOptions
from dra_mirror.service.model import changes as ch
from dra_mirror.service.model.changes import Changes
from dra_mirror.service.stores.protocols import StoreUnavailable
from tests.history.conftest import Pipeline, eventually, fresh_database
from tests.history.script import CLUSTER, END, at, batches, claim_record, transitions
from tests.history.test_audit import FROM, TO, _as_dicts
from tests.history.truth import expected_contention

TABLES = (AllocationInterval, ConsumerInterval, WaitInterval, IdleInterval, DeviceInterval,
          ObjectVersion)  # fmt: skip


async def _counts(engine) -> dict[str, int]:
    async with engine.connect() as conn:
        return {t.__tablename__: await conn.scalar(select(func.count()).select_from(t))
                for t in TABLES}  # fmt: skip


async def _matches_truth(engine) -> None:
    queries = HistoryQueries(engine)
    for group_by in ("CLASS", "NAMESPACE"):
        rows = await queries.contention(FROM, TO, group_by=group_by, bucket_us=3_600_000_000)
        assert _as_dicts(rows) == expected_contention(group_by, 60)


async def _load(pipeline: Pipeline) -> None:
    for changes in batches():
        await pipeline.sink(changes)
    await pipeline.drained()


async def test_every_entry_twice_writes_every_fact_once(engine, pipeline):
    await _load(pipeline)
    once = await _counts(engine)
    assert once == {"allocations": 4, "consumers": 4, "waits": 5, "idle_holds": 3,
                    "device_inventory": 5, "object_versions": 5}  # fmt: skip
    await _load(pipeline)  # new outbox ids: only the SQL rules make this harmless
    for changes in batches()[::-1]:  # even replayed backwards
        await pipeline.sink(changes)
    await pipeline.drained()
    assert await _counts(engine) == once
    await _matches_truth(engine)


async def test_a_relist_reannouncing_a_holder_keeps_the_first_start(engine, pipeline, queries):
    await _load(pipeline)
    d_allocated = next(t for m, t in transitions() if m == 100 and t.type == "allocated")
    again = Changes(CLUSTER, at(170), transitions=[d_allocated.__class__(
        **{**{f: getattr(d_allocated, f) for f in d_allocated.__struct_fields__}, "at": at(170)})])  # fmt: skip
    await pipeline.sink(again)
    await pipeline.drained()
    (held,) = await queries.who_held("GPU-A", to_us(at(175)))
    assert (held.claim, held.start_us) == ("D", to_us(at(100)))


class AckLosingOutbox(MemoryOutbox):
    """An outbox whose acknowledgements never arrive: the writer 'crashed' after each commit."""

    async def ack(self, ids) -> None:
        return None


async def test_a_restarted_writer_resumes_and_skips_what_was_committed(engine):
    outbox = AckLosingOutbox()
    first = Pipeline(engine, outbox).start()
    entries = batches()
    for changes in entries:
        await first.sink(changes)
    await eventually(lambda: first.writer.stats.entries == len(entries), "all entries written")
    await first.stop()
    committed = await _counts(engine)
    assert await outbox.backlog() == len(entries)  # nothing acknowledged

    second = Pipeline(engine, outbox)
    second.outbox.ack = MemoryOutbox.ack.__get__(outbox)  # acknowledgements work again
    second.start()
    await second.drained()
    await second.stop()
    assert second.writer.stats.replayed == len(entries)
    assert second.writer.stats.entries == 0
    assert await _counts(engine) == committed
    await _matches_truth(engine)


async def test_a_writer_stopped_mid_stream_is_continued_by_the_next(engine):
    outbox = MemoryOutbox()
    entries = batches()
    first = Pipeline(engine, outbox, WriterOptions(batch_entries=3, linger=0.01)).start()
    for changes in entries[:10]:
        await first.sink(changes)
    await first.drained()
    await first.stop()
    second = Pipeline(engine, outbox).start()
    for changes in entries[10:]:
        await second.sink(changes)
    await second.drained()
    await second.stop()
    assert first.writer.stats.batches >= 4  # batches of at most three entries
    await _matches_truth(engine)


def _again(minute: float, kind: str, *, at_minute: float, **match: str):
    """The transition of `kind` the script made at `minute`, re-announced at `at_minute`."""
    found = next(
        t for m, t in transitions()
        if m == minute and t.type == kind and all(getattr(t, f) == v for f, v in match.items())
    )  # fmt: skip
    fields = {f: getattr(found, f) for f in found.__struct_fields__}
    return found.__class__(**{**fields, "at": at(at_minute)})


async def _intervals(engine, table) -> list[tuple]:
    async with engine.connect() as conn:
        rows = await conn.execute(select(table.device, table.start_us, table.end_us,
                                         table.end_reason).order_by(table.id))  # fmt: skip
        return [tuple(row) for row in rows]


async def test_a_watch_started_with_an_empty_index_records_the_gap(engine, pipeline, queries):
    await _load(pipeline)
    await pipeline.sink.cluster_started(CLUSTER, at(200))
    await pipeline.sink.record_gap("west", at(10), at(20))
    await pipeline.drained()
    last_seen = to_us(at(160))  # the newest Changes written for the cluster
    gaps = await queries.gaps(FROM, to_us(at(300)))
    assert [(g.cluster, g.start_us, g.end_us) for g in gaps] == [
        ("east", last_seen, to_us(at(200))), ("west", to_us(at(10)), to_us(at(20)))]  # fmt: skip
    assert pipeline.writer.stats.gaps == 2  # dra_mirror_history_gaps_total
    # starting again later with nothing new is idempotent: no second gap from the same mark
    await pipeline.sink.cluster_started(CLUSTER, at(200))
    await pipeline.drained()
    assert len(await queries.gaps(FROM, to_us(at(300)), cluster=CLUSTER)) == 1
    assert pipeline.writer.stats.gaps == 2


async def test_a_takeover_of_a_quiet_cluster_keeps_what_it_kept_and_ends_what_it_lost(
    engine, pipeline, queries
):
    await _load(pipeline)  # the last change at minute 160; then a quiet cluster, watched
    await pipeline.sink.cluster_watched(CLUSTER, at(190))  # the first watcher's clean stop
    await pipeline.sink.cluster_started(CLUSTER, at(200))  # the second one starts
    await pipeline.drained()
    gaps = await queries.gaps(FROM, to_us(at(300)), cluster=CLUSTER)
    assert [(g.start_us, g.end_us) for g in gaps] == [(to_us(at(190)), to_us(at(200)))]
    # until the new index has listed, what was held is held still
    (held,) = await queries.who_held("GPU-A", to_us(at(195)))
    assert (held.claim, held.start_us, held.end_us) == ("D", to_us(at(100)), None)
    # its first LIST of claims re-announces D's holding, and nothing else
    await pipeline.sink(Changes(CLUSTER, at(201), announced=(ch.CLAIM_FACTS,), transitions=[
        _again(100, "allocated", at_minute=201)]))  # fmt: skip
    # its first LIST of slices: gpu-0 as it was; gpu-5 is gone
    await pipeline.sink(Changes(CLUSTER, at(202), announced=(ch.DEVICE_FACTS,), transitions=[
        _again(0, "device_appeared", at_minute=202, device="gpu-0", pool="n1")]))  # fmt: skip
    # pods listed too: D is no longer idle (its idle hold is not re-announced)
    await pipeline.sink(Changes(CLUSTER, at(203), announced=(ch.IDLE_FACTS,)))
    await pipeline.drained()
    (d,) = await queries.claim_history(CLUSTER, "team-b", "D")
    assert [(a.start_us, a.end_us, a.end_reason) for a in d.allocations] == [
        (to_us(at(100)), None, None)]  # fmt: skip
    (held,) = await queries.who_held("GPU-A", to_us(at(250)))
    assert (held.claim, held.start_us) == ("D", to_us(at(100)))
    devices = [i for i in await _intervals(engine, DeviceInterval) if i[2] is None or i[2] > to_us(at(160))]  # fmt: skip
    assert devices == [("gpu-0", to_us(at(0)), None, None),
                       ("gpu-5", to_us(at(70)), to_us(at(202)), "unwatched")]  # fmt: skip
    async with engine.connect() as conn:
        idle = (await conn.execute(select(IdleInterval.claim, IdleInterval.end_us,
                IdleInterval.end_reason).where(IdleInterval.claim == "D"))).all()  # fmt: skip
    assert [tuple(r) for r in idle] == [("D", to_us(at(203)), "unwatched")]


async def test_a_device_changed_while_nobody_watched_opens_a_new_interval(engine, pipeline):
    await _load(pipeline)
    await pipeline.sink.cluster_started(CLUSTER, at(200))
    changed = _again(0, "device_appeared", at_minute=201, device="gpu-0", pool="n1")
    changed = changed.__class__(**{**{f: getattr(changed, f) for f in changed.__struct_fields__},
                                   "data": {"model": "H200", "driver": "590"}})  # fmt: skip
    await pipeline.sink(Changes(CLUSTER, at(201), announced=(ch.DEVICE_FACTS,), transitions=[changed]))  # fmt: skip
    await pipeline.drained()
    gpu0 = [i for i in await _intervals(engine, DeviceInterval) if i[0] == "gpu-0" and i[1] <= to_us(at(201)) and (i[2] is None or i[2] > to_us(at(160)))]  # fmt: skip
    assert [(i[1], i[2], i[3]) for i in gpu0] == [
        (to_us(at(0)), to_us(at(201)), "changed"), (to_us(at(201)), None, None)]  # fmt: skip


async def test_retention_prunes_object_versions_and_keeps_intervals(engine, pipeline):
    await _load(pipeline)
    before = await _counts(engine)
    eleven = to_us(at(11)) / 1e6  # the cutoff falls inside the script's month (March 2026)
    done = await maintain(engine, now=eleven + 86400, versions_days=1.0)
    if engine.dialect.name == "postgresql":  # only whole months are dropped: March is kept
        assert (done.rows, done.dropped) == (0, [])
    else:  # SQLite deletes rows: claim A's versions at 0 and 10
        assert done.rows == 2
    after = await _counts(engine)
    assert after == {**before, "object_versions": before["object_versions"] - done.rows}
    may = to_us("2026-05-01T00:00:00Z") / 1e6  # March is over by more than 30 days
    done = await maintain(engine, now=may, versions_days=30.0)
    assert (await _counts(engine)) == {**before, "object_versions": 0}  # intervals kept
    if engine.dialect.name == "postgresql":
        assert done.dropped == ["object_versions_y2026m03"]


async def test_the_writer_prunes_on_its_own_schedule(engine):
    now = to_us(at(END)) / 1e6 + 86400 * 60  # two months after the script
    options = WriterOptions(linger=0.01, retention_days=9.99, prune_every=0.0)
    running = Pipeline(engine, options=options)
    running.writer.clock = lambda: now
    running.start()
    await _load(running)
    await eventually(lambda: running.writer.stats.pruned == 5, "every version pruned")
    await running.stop()
    assert (await _counts(engine))["object_versions"] == 0


@pytest.fixture
async def postgres_history(request, tmp_path, postgres_server):
    async with fresh_database("postgres", request, tmp_path) as url:
        await migrate(url)
        engine = open_engine(url)
        yield engine
        await engine.dispose()


async def test_a_postgres_outage_loses_nothing(postgres_history, postgres_server):
    engine = postgres_history
    running = Pipeline(engine).start()
    entries = batches()
    for changes in entries[:5]:
        await running.sink(changes)
    await running.drained()
    await asyncio.to_thread(postgres_server.stop)
    try:
        for changes in entries[5:]:
            await running.sink(changes)
        # the backlog waits, retried with backoff
        await eventually(lambda: running.writer.stats.retries >= 3, "three failed attempts")
        assert await running.outbox.backlog() > 0
    finally:
        await asyncio.to_thread(postgres_server.start)
    await running.drained()
    await running.stop()
    assert running.writer.stats.last_error is not None
    await _matches_truth(engine)
    assert (await _counts(engine))["allocations"] == 4


async def test_an_entry_postgres_refuses_is_skipped_alone(postgres_history):
    engine = postgres_history
    options = WriterOptions(linger=0.05, retry_initial=0.01, reject_after=2)
    running = Pipeline(engine, options=options).start()
    bad = claim_record("A", 0, 0)
    bad = bad.__class__(meta=bad.meta.__class__(cluster=CLUSTER, name="A", uid="u" * 100))
    await running.sink(Changes(CLUSTER, at(0), upserts=[bad]))  # uid longer than the column
    await _load(running)
    await running.stop()
    assert running.writer.stats.rejected == 1
    await _matches_truth(engine)


async def test_the_postgres_copy_path_writes_the_same_facts(postgres_history, monkeypatch):
    from dra_mirror.service.history import pgcopy

    monkeypatch.setattr(pgcopy, "MIN_ROWS", 1)  # every insert and close through COPY
    engine = postgres_history
    running = Pipeline(engine).start()
    await _load(running)
    once = await _counts(engine)
    await _load(running)  # every row again: COPY hits the unique keys, the staging path runs
    await running.stop()
    assert await _counts(engine) == once
    assert once["allocations"] == 4 and once["object_versions"] == 5
    await _matches_truth(engine)


async def test_the_history_runtime_migrates_writes_reads_and_drains_on_close(history_url):
    from dra_mirror.service.history.runtime import History

    history = await History.open(history_url)  # a fresh database: migrated on open
    try:
        for changes in batches():
            await history.sink(changes)
    finally:
        await history.close()  # drains the outbox before it stops
    reopened = await History.open(history_url)
    try:
        rows = await reopened.contention(FROM, TO, group_by="NAMESPACE", bucket_us=3_600_000_000)
        assert _as_dicts(rows) == expected_contention("NAMESPACE", 60)
        (held,) = await reopened.who_held("GPU-A", to_us(at(50)))
        assert held.claim == "A"
    finally:
        await reopened.close()


async def test_an_entry_that_cannot_be_decoded_is_counted_and_skipped(engine, pipeline):
    await pipeline.outbox.append(b"\xc1 not msgpack")  # e.g. written by a newer version
    await _load(pipeline)
    assert pipeline.writer.stats.rejected == 1
    assert await pipeline.outbox.backlog() == 0
    await _matches_truth(engine)


class RedeliveringOutbox(MemoryOutbox):
    """Every read hands out the previous read's entries again (before acknowledgement), as a
    Redis takeover may while the writer's previous batch is still committing."""

    def __init__(self) -> None:
        super().__init__()
        self.previous: list[tuple[str, bytes]] = []

    async def read(self, count: int, block: float) -> list[tuple[str, bytes]]:
        fresh = await super().read(count, block)
        again, self.previous = self.previous, fresh
        return again + fresh


async def test_entries_handed_out_again_while_their_batch_commits_are_written_once(
    engine, monkeypatch
):
    from dra_mirror.service.history import recording

    record = recording.BatchRecorder.record_prepared

    async def slow(self, prepared):  # the next batch is prepared before this one commits
        await asyncio.sleep(0.05)
        await record(self, prepared)

    monkeypatch.setattr(recording.BatchRecorder, "record_prepared", slow)
    pipeline = Pipeline(engine, RedeliveringOutbox(), WriterOptions(batch_entries=4, linger=0))
    entries = batches()
    for changes in entries:
        await pipeline.sink(changes)
    pipeline.start()
    await eventually(lambda: pipeline.writer.stats.entries == len(entries), "all written")
    await pipeline.stop()
    assert pipeline.writer.stats.replayed > 0  # the re-delivered entries were seen and skipped
    assert pipeline.writer.stats.batches > 2
    await _matches_truth(engine)


class FailingOutbox(MemoryOutbox):
    """Redis goes away after the first read."""

    reads = 0

    async def read(self, count: int, block: float) -> list[tuple[str, bytes]]:
        self.reads += 1
        if self.reads > 1:
            raise StoreUnavailable("redis outbox: Connection refused")
        return await super().read(count, block)


async def test_an_outbox_failing_under_the_read_ahead_stops_the_writer_with_its_error(engine):
    outbox = FailingOutbox()
    pipeline = Pipeline(engine, outbox, WriterOptions(batch_entries=5, linger=0))
    entries = batches()
    for changes in entries:
        await pipeline.sink(changes)
    task = asyncio.create_task(pipeline.writer.run())
    with pytest.raises(StoreUnavailable):
        async with asyncio.timeout(30):
            await task
    # what was read before the failure is written, the rest waits in the outbox
    assert pipeline.writer.stats.entries == 5
    assert await outbox.backlog() == len(entries) - 5
