"""The utilisation recorder: five-minute buckets per device, from Prometheus into the history.

    recorder = UtilizationRecorder(engine, source, devices=…, clusters=…)
    await recorder.record(now)        # every cluster's complete buckets since its mark
    recorder.start(); await recorder.stop()   # the same every `every` seconds, supervised

Per cluster the source covers, the recorder asks (`PrometheusSource.buckets`: `query_range`
at a step of five minutes) for the buckets from the cluster's mark (`utilization_marks`) to
the end of the last bucket complete `lag` seconds ago, at most `chunk` buckets a question,
joins them to the cluster's GPU devices (`service.model.utilization_buckets`) and writes
the rows and the new mark in one transaction. So:

* re-running writes nothing twice (the mark moves with the rows; a row already there is
  skipped by its primary key);
* a Prometheus or database outage delays the buckets, never loses them: the mark stays, and
  the next round asks from it — as far back as `catch_up` (Prometheus' default retention,
  15 days); a first round starts `backfill` ago;
* a device without readings gets no bucket: unknown, never 0 %.

The device facts are the ones the mirror holds when a bucket is recorded.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Protocol

from sqlalchemy import select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncEngine

from dra_mirror.service.history.db import HistoryUnavailable, sql_errors
from dra_mirror.service.history.models import UtilizationBucket, UtilizationMark
from dra_mirror.service.history.times import US_PER_SECOND
from dra_mirror.service.model.dcgm import Readings, ReadingsUnavailable
from dra_mirror.service.model.records import DeviceEntry
from dra_mirror.service.model.utilization import weighed
from dra_mirror.service.model.utilization_buckets import (
    BUCKET_SECONDS,
    Bucket,
    buckets,
    last_complete_end,
)
from dra_mirror.service.stores.protocols import StoreError

log = logging.getLogger(__name__)

DAY = 86400


class BucketSource(Protocol):
    def covers(self, cluster: str) -> bool: ...

    async def buckets(self, cluster: str, start: int, end: int) -> Readings: ...


Devices = Callable[[str], Awaitable[Sequence[DeviceEntry]]]


def _buckets(entries: Sequence[DeviceEntry], found: Readings) -> list[Bucket]:
    return buckets(weighed(entries, found), found)


class UtilizationRecorder:
    """See the module docstring."""

    def __init__(
        self,
        engine: AsyncEngine,
        source: BucketSource,
        *,
        devices: Devices,
        clusters: Callable[[], Iterable[str]],
        every: float = 60.0,
        lag: float = 60.0,
        backfill: float = DAY,
        catch_up: float = 15 * DAY,
        chunk: int = 36,
    ) -> None:
        self.engine = engine
        self.source = source
        self.devices = devices
        self.clusters = clusters
        self.every, self.lag, self.chunk = every, lag, chunk
        self.backfill, self.catch_up = backfill, catch_up
        self.last_error: str | None = None
        self._task: asyncio.Task[None] | None = None

    async def record(self, now: float | None = None) -> int:
        """Record every covered cluster's complete buckets; the rows written. A cluster the
        source or the database cannot answer now is left for the next round (logged)."""
        now = time.time() if now is None else now
        written = 0
        for cluster in sorted(set(self.clusters())):
            if not self.source.covers(cluster):
                continue
            try:
                written += await self.record_cluster(cluster, now)
            except (ReadingsUnavailable, HistoryUnavailable, StoreError) as error:
                self.last_error = f"{cluster}: {error}"
                log.warning("utilisation buckets of %s not recorded yet: %s", cluster, error)
        return written

    async def record_cluster(self, cluster: str, now: float) -> int:
        end = last_complete_end(now, self.lag)
        oldest = last_complete_end(now - self.catch_up, 0)
        mark = await self._mark(cluster)
        start = max(oldest, mark if mark is not None else last_complete_end(end - self.backfill, 0))
        written = 0
        while start < end:
            stop = min(end, start + self.chunk * BUCKET_SECONDS)
            found = await self.source.buckets(cluster, start, stop)
            entries = await self.devices(cluster)
            # the join is the model's, pure: in a worker thread (a fleet's is seconds)
            joined = await asyncio.to_thread(_buckets, entries, found)
            rows = [b for b in joined if start <= b.start < stop]
            written += await self._write(cluster, rows, stop)
            start = stop
        return written

    async def _mark(self, cluster: str) -> int | None:
        with sql_errors("utilization marks"):
            async with self.engine.connect() as conn:
                found = await conn.scalar(
                    select(UtilizationMark.recorded_us).where(UtilizationMark.cluster == cluster)
                )
        return None if found is None else int(found) // US_PER_SECOND

    async def _write(self, cluster: str, rows: list[Bucket], stop: int) -> int:
        dialect = postgresql if self.engine.dialect.name == "postgresql" else sqlite
        values = [
            {"cluster": cluster, "driver": b.key.driver, "pool": b.key.pool,
             "device": b.key.device, "bucket_us": b.start * US_PER_SECOND, "uuid": b.uuid,
             "gpu_instance": b.gpu_instance, "busy": b.busy, "samples": b.samples,
             "energy_j": b.energy_j, "equivalents": b.equivalents}
            for b in rows
        ]  # fmt: skip
        mark = dialect.insert(UtilizationMark).values(
            cluster=cluster, recorded_us=stop * US_PER_SECOND
        )
        with sql_errors("utilization buckets"):
            async with self.engine.begin() as conn:
                if values:
                    insert = dialect.insert(UtilizationBucket).on_conflict_do_nothing()
                    await conn.execute(insert, values)
                await conn.execute(
                    mark.on_conflict_do_update(
                        index_elements=["cluster"], set_={"recorded_us": mark.excluded.recorded_us}
                    )
                )
        return len(values)

    async def run(self) -> None:
        while True:
            try:
                await self.record()
            except Exception:  # a round that failed otherwise: logged, the next one retries
                self.last_error = "unexpected failure (see the log)"
                log.exception("recording utilisation buckets failed")
            await asyncio.sleep(self.every)

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self.run(), name="utilization-recorder")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.wait({self._task}, timeout=2.0)
            self._task = None
