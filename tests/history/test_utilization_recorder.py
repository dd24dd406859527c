"""The utilisation recorder: five-minute buckets per device from the source into the history,
idempotent, delayed but not lost by an outage, unknown devices left without buckets."""

from __future__ import annotations

from sqlalchemy import func, select

from dra_mirror.service.history.models import UtilizationBucket, UtilizationMark
from dra_mirror.service.history.utilization_recorder import UtilizationRecorder
from dra_mirror.service.model.utilization_buckets import BUCKET_SECONDS
from tests.history.utilization_data import FakeBuckets, gpu

T0 = 1_796_083_200  # 2026-12-01T00:00:00Z, a bucket boundary
DEVICES = [gpu("east", "gpu-0", "GPU-0"), gpu("east", "gpu-1", "GPU-1"),
           gpu("east", "gpu-2", "GPU-2")]  # fmt: skip


def recorder(engine, source: FakeBuckets, **options) -> UtilizationRecorder:
    async def devices(cluster: str):
        return [d for d in DEVICES if d.key.cluster == cluster]

    return UtilizationRecorder(engine, source, devices=devices, clusters=lambda: ["east", "west"],
                               lag=60, backfill=3600, **options)  # fmt: skip


async def rows(engine) -> list[UtilizationBucket]:
    async with engine.connect() as conn:
        found = await conn.execute(
            select(UtilizationBucket).order_by(
                UtilizationBucket.device, UtilizationBucket.bucket_us
            )
        )
        return list(found)


def fill(source: FakeBuckets, start: int, end: int) -> None:
    """GPU-0 busy 40 % spending 30 kJ a bucket; GPU-1 idle without an energy counter; GPU-2
    has no exporter (no readings at all)."""
    for at in range(start, end, BUCKET_SECONDS):
        source.values[("GPU-0", at)] = (0.4, 30_000_000.0)
        source.values[("GPU-1", at)] = (0.0, None)


async def test_buckets_since_the_mark_written_once(engine) -> None:
    source = FakeBuckets()
    fill(source, T0 - 7200, T0 + 7200)
    now = T0 + 130  # the bucket [T0, T0+300) is not complete
    written = await recorder(engine, source).record(now)
    # the first round goes back an hour: 12 buckets for each of the two devices read
    assert written == 24
    found = await rows(engine)
    assert {r.device for r in found} == {"gpu-0", "gpu-1"}  # gpu-2: unknown, no bucket
    first = found[0]
    assert (first.device, first.bucket_us) == ("gpu-0", (T0 - 3600) * 1_000_000)
    assert (first.busy, first.samples, first.energy_j, first.uuid) == (40.0, 20, 30_000.0, "GPU-0")
    assert all(r.energy_j is None and r.busy == 0.0 for r in found if r.device == "gpu-1")
    assert all(r.bucket_us < T0 * 1_000_000 for r in found)
    assert await recorder(engine, source).record(now) == 0  # nothing twice
    assert len(await rows(engine)) == 24
    # a cluster the source does not cover is never asked
    assert {c for c, _, _ in source.asked} == {"east"}


async def test_an_outage_delays_the_buckets_and_loses_none(engine) -> None:
    source = FakeBuckets()
    fill(source, T0 - 7200, T0 + 7200)
    rec = recorder(engine, source)
    await rec.record(T0 + 60)
    source.down = True
    assert await rec.record(T0 + 1860) == 0  # 6 buckets due, Prometheus down
    assert rec.last_error is not None and "connection refused" in rec.last_error
    async with engine.connect() as conn:
        mark = await conn.scalar(select(UtilizationMark.recorded_us))
    assert mark == T0 * 1_000_000  # the mark did not move
    source.down = False
    assert await rec.record(T0 + 3660) == 24  # every bucket of the hour, the outage's too
    async with engine.connect() as conn:
        count = await conn.scalar(
            select(func.count()).where(UtilizationBucket.bucket_us >= T0 * 1_000_000)
        )
    assert count == 24


async def test_catching_up_asks_in_chunks_and_no_further_back_than_retention(engine) -> None:
    source = FakeBuckets()
    fill(source, T0 - 7200, T0 + 7200)
    rec = recorder(engine, source, chunk=5, catch_up=1800)
    written = await rec.record(T0 + 60)
    assert written == 12  # the last half hour of the hour asked: 6 buckets, 2 devices
    assert [(s, e) for _, s, e in source.asked] == [(T0 - 1800, T0 - 300), (T0 - 300, T0)]


async def test_the_runtimes_recorder_reads_the_stores_gpu_devices(engine) -> None:
    from dra_mirror.service.runtime.mirror import utilization_recorder
    from dra_mirror.service.stores.memory import MemoryStore
    from tests.feeding import feed
    from tests.model.builders import device, slice_

    store = MemoryStore()
    gpus = (device("gpu-0", uuid="GPU-0"), device("gpu-1", uuid="GPU-1"))
    await feed(store, "east", upserts=[slice_("s1", pool="node-1", devices=gpus, node="node-1")],
               at="2026-12-01T00:00:00Z")  # fmt: skip
    source = FakeBuckets()
    fill(source, T0 - 3600, T0)
    recorder = utilization_recorder(engine, source, store, lambda: {"east": None})
    assert await recorder.record(T0 + 60) == 24  # gpu-0 and gpu-1, an hour each
    assert {(r.pool, r.device) for r in await rows(engine)} == {("node-1", "gpu-0"),
                                                               ("node-1", "gpu-1")}  # fmt: skip
