"""The hourly peak-pending cache: filled by the first audit, read by the next, forgotten when a
wait touching its hours is written, and never filled with what a concurrent batch changed."""

from __future__ import annotations

import asyncio

from sqlalchemy import func, select

from dra_mirror.service.history import contention, peaks, pending
from dra_mirror.service.history.models import PendingPeakHour
from dra_mirror.service.history.outbox import MemoryOutbox
from dra_mirror.service.history.writer import HistorySink, HistoryWriter, WriterOptions
from dra_mirror.service.model.changes import Changes, Transition
from tests.history.conftest import eventually
from tests.history.script import CLUSTER, at, batches
from tests.history.test_audit import FROM, TO, _as_dicts
from tests.history.test_writer import _load
from tests.history.truth import expected_contention

HOUR_BUCKETS = 3_600_000_000


async def _cached_hours(engine) -> int:
    async with engine.connect() as conn:
        return await conn.scalar(select(func.count()).select_from(PendingPeakHour))


async def _live(queries, monkeypatch, group_by: str):
    with monkeypatch.context() as patch:
        patch.setattr(peaks, "cacheable", lambda *_: False)
        return await queries.contention(FROM, TO, group_by=group_by, bucket_us=HOUR_BUCKETS)


def _late_wait(minute_from: int, minute_to: int) -> list[Changes]:
    """A claim of team-b that waited [from, to) and was then deleted — written late."""
    base = {"namespace": "team-b", "claim": "late", "claim_uid": "uid-late",
            "class_names": ("h200",)}  # fmt: skip
    return [
        Changes(CLUSTER, at(minute_from),
                transitions=[Transition("wait_started", CLUSTER, at(minute_from), **base)]),
        Changes(CLUSTER, at(minute_to),
                transitions=[Transition("wait_ended", CLUSTER, at(minute_to), reason="deleted",
                                        **base)]),
    ]  # fmt: skip


async def test_the_first_audit_fills_the_cache_and_the_next_reads_it(engine, pipeline, queries):
    await _load(pipeline)
    assert await _cached_hours(engine) == 0
    first = await queries.contention(FROM, TO, group_by="NAMESPACE", bucket_us=HOUR_BUCKETS)
    assert await _cached_hours(engine) == 3  # three complete hours
    again = await queries.contention(FROM, TO, group_by="NAMESPACE", bucket_us=HOUR_BUCKETS)
    assert _as_dicts(first) == _as_dicts(again) == expected_contention("NAMESPACE", 60)
    whole = await queries.contention(FROM, TO, group_by="NAMESPACE")  # one 3-hour bucket
    assert _as_dicts(whole) == expected_contention("NAMESPACE", 180)


async def test_a_late_wait_invalidates_its_hours(engine, pipeline, queries, monkeypatch):
    await _load(pipeline)
    await queries.contention(FROM, TO, group_by="NAMESPACE", bucket_us=HOUR_BUCKETS)
    assert await _cached_hours(engine) == 3
    for changes in _late_wait(65, 130):  # written after the audit, about the past
        await pipeline.sink(changes)
    await pipeline.drained()
    assert await _cached_hours(engine) == 1  # hours from 01:00 on are forgotten
    cached = await queries.contention(FROM, TO, group_by="NAMESPACE", bucket_us=HOUR_BUCKETS)
    live = await _live(queries, monkeypatch, "NAMESPACE")
    assert _as_dicts(cached) == _as_dicts(live)
    team_b = {r.bucket_start_us: r.peak_pending for r in cached if r.group == "team-b"}
    assert team_b[FROM + HOUR_BUCKETS] == 2  # "late" and D over [95, 100)


async def test_nothing_is_cached_from_a_computation_a_batch_overtook(engine, pipeline, queries,
                                                                    monkeypatch):  # fmt: skip
    await _load(pipeline)
    real = peaks.hourly_peaks

    async def racing(engine_, **kwargs):
        compute = kwargs["compute"]

        async def compute_then_write(a: int, b: int):
            values = await compute(a, b)  # computed without the late wait...
            for changes in _late_wait(20, 40):  # ...which a batch commits right now
                await pipeline.sink(changes)
            await pipeline.drained()
            return values

        return await real(engine_, **{**kwargs, "compute": compute_then_write})

    monkeypatch.setattr(peaks, "hourly_peaks", racing)
    await queries.contention(FROM, TO, group_by="NAMESPACE", bucket_us=HOUR_BUCKETS)
    monkeypatch.setattr(peaks, "hourly_peaks", real)
    assert await _cached_hours(engine) == 0  # the day's counter moved: nothing stored
    cached = await queries.contention(FROM, TO, group_by="NAMESPACE", bucket_us=HOUR_BUCKETS)
    assert _as_dicts(cached) == _as_dicts(await _live(queries, monkeypatch, "NAMESPACE"))
    team_a = {r.bucket_start_us: r.peak_pending for r in cached if r.group == "team-a"}
    assert team_a[FROM] == 2  # C (20-50) with E (35-40); the late one is team-b


async def test_warming_fills_every_grouping_so_the_first_audit_only_reads(
    engine, pipeline, queries, monkeypatch
):
    await _load(pipeline)
    hours = await contention.warm_peaks(engine, start_us=FROM, end_us=TO, now_us=TO + 1)
    assert hours == 3 * len(contention.GROUPS)
    assert await _cached_hours(engine) == 3 * len(contention.GROUPS)
    assert await contention.warm_peaks(engine, start_us=FROM, end_us=TO, now_us=TO + 1) == 0

    async def never(*args, **kwargs):
        raise AssertionError("an audit after warming computed peaks")

    monkeypatch.setattr(pending, "_hourly_compute", lambda *args: never)
    for group_by in ("NAMESPACE", "CLASS"):
        found = await queries.contention(FROM, TO, group_by=group_by, bucket_us=HOUR_BUCKETS)
        assert _as_dicts(found) == expected_contention(group_by, 60)


async def test_warming_leaves_the_current_hour_to_the_audits(engine, pipeline):
    await _load(pipeline)
    now = FROM + 90 * 60 * 1_000_000  # 90 minutes in: one complete hour
    assert await contention.warm_peaks(engine, start_us=FROM, end_us=TO, now_us=now) == len(
        contention.GROUPS
    )
    assert await _cached_hours(engine) == len(contention.GROUPS)


async def test_the_writer_warms_on_its_schedule_once_it_has_written(engine):
    clock = [TO / 1_000_000 + 60]  # a minute after the script's window, in seconds
    options = WriterOptions(linger=0.01, warm_days=3 / 24, warm_every=600.0)  # three hours
    outbox = MemoryOutbox()
    sink = HistorySink(outbox)
    for changes in batches():  # all in the first batch: the first fill sees them written
        await sink(changes)
    writer = HistoryWriter(engine, outbox, options=options, clock=lambda: clock[0])
    task = asyncio.create_task(writer.run())
    try:
        await writer.drained()
        await eventually(lambda: writer._warming is not None and writer._warming.done(), "fill")
        assert await _cached_hours(engine) == 3 * len(contention.GROUPS)
        first = writer._warming
        await sink(_late_wait(65, 130)[0])  # invalidates from minute 65 on
        await writer.drained()
        await asyncio.sleep(0.6)  # a read timeout: the loop comes round again
        assert writer._warming is first  # not due yet
        clock[0] += 600
        await eventually(lambda: writer._warming is not first, "the next fill")
        await eventually(lambda: writer._warming.done(), "the next fill done")
        assert await _cached_hours(engine) == 3 * len(contention.GROUPS)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_waits_ending_at_a_bucket_start_are_not_pending_in_it(pipeline, queries):
    # two claims of team-b wait [0, 60) and end together at the second hour's start; a third
    # waits [60, 70): the second hour's peak is 1 (never 2 or 3), live and from the cache
    def wait(name: str, start: int, end: int) -> list[Transition]:
        base = {"namespace": "team-b", "claim": name, "claim_uid": f"uid-{name}",
                "class_names": ("h200",)}  # fmt: skip
        return [Transition("wait_started", CLUSTER, at(start), **base),
                Transition("wait_ended", CLUSTER, at(end), reason="deleted", **base)]  # fmt: skip

    spells = [*wait("x", 0, 60), *wait("y", 0, 60), *wait("z", 60, 70)]
    for minute in (0, 60, 70):
        await pipeline.sink(Changes(CLUSTER, at(minute),
                                    transitions=[t for t in spells if t.at == at(minute)]))  # fmt: skip
    await pipeline.drained()
    for bucket in (HOUR_BUCKETS, HOUR_BUCKETS // 4):  # cached hours, and live quarters
        rows = await queries.contention(FROM, TO, group_by="NAMESPACE", bucket_us=bucket)
        peaks_found = {(r.bucket_start_us - FROM) // 60_000_000: r.peak_pending for r in rows}
        assert peaks_found[0] == 2 and peaks_found[60] == 1, peaks_found
        assert all(peak == 0 for start, peak in peaks_found.items() if start >= 75)
