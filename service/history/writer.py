"""The task that drains the outbox into SQL (`HistoryWriter`), after the sink the reactor calls.

    reactor ─▶ HistorySink(changes) ─▶ Outbox ─▶ HistoryWriter.run() ─▶ one transaction per batch

Promises:

* `HistorySink` only encodes and appends: it never waits for SQL, so state stays current while
  history drains behind it (a bounded outbox may make it wait — backpressure, never loss).
* `HistoryWriter` gathers entries into batches of about `batch_rows` rows or `linger` seconds
  (and never more than `max_batch_bytes`: the entries read beyond it wait, undecoded, for the
  next batch; entries are then read about that much at a time), writes each batch and its outbox position in one transaction, then acknowledges the entries.
  A crash between commit and acknowledgement replays entries the database already has: the
  position (and the unique keys) make that harmless. On start it resumes from the entries its
  outbox handed out but never saw acknowledged. While one batch commits, the next one is read,
  decoded and prepared beside it (at most one batch ahead), so Python and SQL work overlap.
* SQL unreachable: the batch is retried with exponential backoff capped at `retry_max` seconds,
  forever, each attempt logged with what happens next; the backlog waits in the outbox.
* SQL rejecting a batch (a value it cannot store; or any other failure to write it): after `reject_after` attempts the batch is
  written entry by entry; an entry still rejected is counted, logged once with its cluster and
  skipped, so one bad object never blocks history.
* Partitions and retention (`service.history.partitions.maintain`): when it starts and every
  `prune_every` seconds, the writer keeps the coming months' partitions created (PostgreSQL)
  and drops the object versions older than `retention_days` (intervals are kept).
* Peak cache: every `warm_every` seconds, when it committed anything since the last time, the
  writer fills the contention audit's hourly peak cache for the last `warm_days` days in a
  background task (contention.warm_peaks): the first audit of a grouping then reads it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Sequence

from sqlalchemy import select
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError, SQLAlchemyError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from sqlalchemy.ext.asyncio import AsyncEngine

from dra_mirror.service.history import partitions
from dra_mirror.service.history.contention import warm_peaks
from dra_mirror.service.history.gathering import SLICE, Batch, Decoded, Gatherer
from dra_mirror.service.history.models import OutboxPosition
from dra_mirror.service.history.options import WriterOptions, WriterStats
from dra_mirror.service.history.outbox import (
    Outbox,
    OutboxEntry,
    entry_order,
)
from dra_mirror.service.history.preparing import Prepared, prepare
from dra_mirror.service.history.recording import BatchRecorder
from dra_mirror.service.history.sink import HistorySink
from dra_mirror.service.history.times import US_PER_SECOND

__all__ = ["HistorySink", "HistoryWriter", "WriterOptions", "WriterStats"]

log = logging.getLogger(__name__)


def _transient(error: BaseException) -> bool:
    """Unreachable (retry forever) rather than refused (split and skip)."""
    if isinstance(error, OperationalError | InterfaceError | PoolTimeout | OSError):
        return True
    if isinstance(error, DBAPIError):
        return bool(error.connection_invalidated) or "connect" in str(error.orig).lower()
    return False


class HistoryWriter:
    def __init__(
        self,
        engine: AsyncEngine,
        outbox: Outbox,
        *,
        options: WriterOptions | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.engine = engine
        self.outbox = outbox
        self.options = options or WriterOptions()
        self.sleep = sleep
        self.clock = clock
        self.stats = WriterStats()
        self._position: tuple[int, int] | None = None
        self._idle = asyncio.Event()
        self._last_prune = 0.0
        self._acking: asyncio.Task[None] | None = None  # the last batch's acknowledgement
        self._warming: asyncio.Task[None] | None = None
        self._warmed_at: float | None = None  # clock() of the last fill
        self._warmed_batches = -1  # stats.batches at the last fill
        self._gatherer = Gatherer(outbox, self.options, self.stats)

    async def run(self) -> None:
        """Drain the outbox forever (cancel to stop; an unfinished batch is replayed).

        Two tasks: a read-ahead that gathers, decodes and prepares the next batch (pure work:
        `preparing.prepare`) while this one commits the current batch — the Python and the
        SQL halves of ingest overlap instead of taking turns."""
        await self._with_retry(self._load_position, "read the outbox position")
        await self._resume()
        ready: asyncio.Queue[Batch | Exception | None] = asyncio.Queue(maxsize=1)
        reader = asyncio.create_task(self._read_ahead(ready), name="history-read-ahead")
        try:
            while True:
                item = await ready.get()
                if isinstance(item, Exception):  # the outbox failed (StoreError): acknowledge
                    with contextlib.suppress(Exception):  # what committed if it still can,
                        await self._acknowledged()
                    raise item  # and stop: the runtime restarts run()
                if item is not None:
                    self._idle.clear()
                    await self._write(item)
                if ready.empty():
                    await self._acknowledged()
                    if await self.outbox.backlog() == 0:
                        self._idle.set()
                await self._maybe_prune()
                self._maybe_warm()
        finally:
            # Stopped (cancelled): everything goes. Restarted after the outbox failed: the
            # peak cache's fill goes on — it reads and writes SQL only, and a fill cancelled
            # inside its SQLite transaction could hold the database's lock past it.
            current = asyncio.current_task()
            stopping = current is not None and current.cancelling() > 0
            tasks = {t for t in (reader, self._acking) if t is not None}
            if stopping and self._warming is not None:
                tasks.add(self._warming)
                self._warming = None
            for task in tasks:
                task.cancel()  # an acknowledgement cut short: those entries are replayed
            await asyncio.wait(tasks, timeout=5.0)
            self._acking = None

    async def _acknowledged(self) -> None:
        """Wait for the last batch's acknowledgement; raise its failure (StoreError)."""
        acking, self._acking = self._acking, None
        if acking is not None:
            await acking

    async def drained(self) -> None:
        """Return once everything appended so far is written (for tests and shutdown)."""
        while True:
            await self._idle.wait()
            if await self.outbox.backlog() == 0:
                return
            await asyncio.sleep(0.01)

    # --- batches -----------------------------------------------------------------------

    async def _resume(self) -> None:
        while True:
            pending = await self.outbox.pending(self.options.batch_entries)
            if not pending:
                return
            decoded: Decoded = []
            await self._gatherer.decode_until(pending, decoded, (0, 0))
            self._gatherer.carry = []  # what did not fit is handed out as pending again, next
            await self._write(await self._prepare(decoded))
            await self._acknowledged()  # before asking for what is still pending

    async def _read_ahead(self, ready: asyncio.Queue[Batch | Exception | None]) -> None:
        """Hand `run` the next prepared batch, or None when nothing came within the read's
        block (so it can mark itself idle and prune), or the outbox's failure."""
        try:
            while True:
                decoded = await self._gatherer.gather()
                await ready.put(await self._prepare(decoded) if decoded else None)
        except Exception as error:
            await ready.put(error)

    async def _prepare(self, decoded: list[tuple[str, OutboxEntry | None]]) -> Batch:
        """The batch of these entries, prepared in slices: the commit running beside it gets
        the loop back as soon as its SQL answers, not after the whole batch is prepared."""
        fresh = self._fresh(decoded)
        prepared: Prepared = []
        for start in range(0, len(fresh), SLICE):
            await asyncio.sleep(0)
            prepare((entry for _, entry in fresh[start : start + SLICE]), into=prepared)
        decodable = sum(1 for _, entry in decoded if entry is not None)
        return Batch([entry_id for entry_id, _ in decoded], fresh, prepared, decodable)

    def _fresh(
        self, decoded: Sequence[tuple[str, OutboxEntry | None]]
    ) -> list[tuple[str, OutboxEntry]]:
        """The decodable entries after the last committed position (older ones are replays)."""
        position = self._position
        return [
            (entry_id, entry)
            for entry_id, entry in decoded
            if entry is not None and (position is None or entry_order(entry_id) > position)
        ]

    async def _write(self, batch: Batch) -> None:
        fresh = batch.fresh
        position = self._position
        if fresh and position is not None and batch.oldest <= position:
            # prepared before the previous batch committed, and some of it is a replay of
            # that batch (a takeover handed them out twice): prepare what is left again
            fresh = self._fresh(fresh)
            batch = Batch(batch.ids, fresh, prepare(e for _, e in fresh), batch.decodable)
        self.stats.replayed += batch.decodable - len(fresh)
        if fresh:
            await self._commit_with_retry(batch)
        # acknowledged beside the next commit (one acknowledgement in flight at a time): a
        # Redis round trip with thousands of ids stays off the path from batch to batch
        await self._acknowledged()
        self._acking = asyncio.create_task(self.outbox.ack(batch.ids))

    async def _commit_with_retry(self, batch: Batch) -> None:
        attempt = 0
        refused = 0
        while True:
            attempt += 1
            try:
                await self._commit(batch)
                return
            except Exception as error:  # anything not "unreachable" ends as refused, below
                self.stats.last_error = f"{type(error).__name__}: {str(error).splitlines()[0]}"
                if not _transient(error):
                    refused += 1
                    if refused >= self.options.reject_after:
                        await self._commit_one_by_one(batch.fresh)
                        return
                delay = self._retry_delay(attempt)
                self.stats.retries += 1
                log.warning(
                    "history batch of %d entries failed (attempt %d): %s; retrying in %.1fs",
                    len(batch.fresh), attempt, self.stats.last_error, delay,
                )  # fmt: skip
                await self.sleep(delay)

    async def _commit_one_by_one(self, entries: list[tuple[str, OutboxEntry]]) -> None:
        for entry in entries:
            single = Batch([entry[0]], [entry], prepare([entry[1]]))
            try:
                await self._commit(single)
            except Exception as error:
                if _transient(error):
                    await self._commit_with_retry(single)
                    continue
                self.stats.rejected += 1
                cluster = entry[1].cluster
                log.error(
                    "history entry %s of cluster %s refused by SQL, skipped: %s",
                    entry[0], cluster, str(error).splitlines()[0],
                    extra={"cluster": cluster},
                )  # fmt: skip

    async def _commit(self, batch: Batch) -> None:
        last = batch.newest
        async with self.engine.begin() as conn:
            recorder = BatchRecorder(conn)
            await recorder.record_prepared(batch.prepared)
            await recorder.position(self.outbox.name, last, int(self.clock() * US_PER_SECOND))
        self._position = entry_order(last)
        self.stats.position = last
        self.stats.batches += 1
        self.stats.entries += len(batch.fresh)
        self.stats.rows += recorder.rows
        self.stats.gaps += recorder.gaps

    # --- position and retention ----------------------------------------------------------

    async def _load_position(self) -> None:
        async with self.engine.connect() as conn:
            position = await conn.scalar(
                select(OutboxPosition.position).where(OutboxPosition.stream == self.outbox.name)
            )
        self._position = entry_order(position) if position else None

    def _retry_delay(self, attempt: int) -> float:
        """Exponential backoff for SQL that cannot be reached: doubling, capped."""
        return min(self.options.retry_max, self.options.retry_initial * 2 ** (attempt - 1))

    async def _with_retry(self, action: Callable[[], Awaitable[None]], what: str) -> None:
        attempt = 0
        while True:
            attempt += 1
            try:
                return await action()
            except (SQLAlchemyError, OSError) as error:
                delay = self._retry_delay(attempt)
                self.stats.retries += 1
                log.warning("history: cannot %s (attempt %d): %s; retrying in %.1fs",
                            what, attempt, str(error).splitlines()[0], delay)  # fmt: skip
                await self.sleep(delay)

    async def _maybe_prune(self) -> None:
        now = self.clock()
        if now - self._last_prune < self.options.prune_every:
            return
        self._last_prune = now
        try:
            done = await partitions.maintain(
                self.engine, now=now, versions_days=self.options.retention_days
            )
            self.stats.pruned += done.rows
        except (SQLAlchemyError, OSError) as error:
            log.warning("history retention failed: %s; next run in %.0fs",
                        str(error).splitlines()[0], self.options.prune_every)  # fmt: skip

    def _maybe_warm(self) -> None:
        days = self.options.warm_days
        if days is None or (self._warming is not None and not self._warming.done()):
            return
        now = self.clock()
        due = self._warmed_at is None or now - self._warmed_at >= self.options.warm_every
        if not due or self.stats.batches == self._warmed_batches:
            return  # nothing written since the last fill: another process may be the writer
        self._warmed_at, self._warmed_batches = now, self.stats.batches
        self._warming = asyncio.create_task(self._warm(days, now), name="history-peak-cache")

    async def _warm(self, days: float, now: float) -> None:
        now_us = int(now * US_PER_SECOND)
        started = time.monotonic()
        try:
            hours = await warm_peaks(
                self.engine, start_us=now_us - int(days * 86400 * US_PER_SECOND),
                end_us=now_us, now_us=now_us,
            )  # fmt: skip
        except (SQLAlchemyError, OSError) as error:
            log.warning("history: filling the peak cache failed: %s; next try in %.0fs",
                        str(error).splitlines()[0], self.options.warm_every)  # fmt: skip
            return
        if hours:
            log.info("history: peak cache filled for %d hours in %.1fs", hours,
                     time.monotonic() - started)  # fmt: skip
