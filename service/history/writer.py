"""The history sink the reactor calls, and the task that drains the outbox into SQL.

    reactor ─▶ HistorySink(changes) ─▶ Outbox ─▶ HistoryWriter.run() ─▶ one transaction per batch

Promises:

* `HistorySink` only encodes and appends: it never waits for SQL, so state stays current while
  history drains behind it (a bounded outbox may make it wait — backpressure, never loss).
* `HistoryWriter` gathers entries into batches of about `batch_rows` rows or `linger` seconds,
  writes each batch and its outbox position in one transaction, then acknowledges the entries.
  A crash between commit and acknowledgement replays entries the database already has: the
  position (and the unique keys) make that harmless. On start it resumes from the entries its
  outbox handed out but never saw acknowledged.
* SQL unreachable: the batch is retried with exponential backoff capped at `retry_max` seconds,
  forever, each attempt logged with what happens next; the backlog waits in the outbox.
* SQL rejecting a batch (a value it cannot store; or any other failure to write it): after `reject_after` attempts the batch is
  written entry by entry; an entry still rejected is counted, logged once with its cluster and
  skipped, so one bad object never blocks history.
* Retention: every `prune_every` seconds object versions older than `retention_days` are
  deleted (intervals are kept).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import msgspec
from sqlalchemy import delete, select
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError, SQLAlchemyError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from sqlalchemy.ext.asyncio import AsyncEngine

from service.history.models import ObjectVersion, OutboxPosition
from service.history.outbox import (
    ChangesEntry,
    GapEntry,
    Outbox,
    OutboxEntry,
    StartedEntry,
    decode_entry,
    encode_entry,
    entry_order,
)
from service.history.recording import BatchRecorder
from service.history.times import US_PER_SECOND
from service.model.changes import Changes

log = logging.getLogger(__name__)


def utc_now() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


class HistorySink:
    """A ChangeSink: puts each non-empty Changes into the outbox."""

    def __init__(self, outbox: Outbox) -> None:
        self.outbox = outbox

    async def __call__(self, changes: Changes) -> None:
        if changes:
            await self.outbox.append(encode_entry(ChangesEntry.of(changes)))

    async def record_gap(self, cluster: str, start: str, end: str) -> None:
        """The cluster was not watched from `start` to `end` (RFC 3339), e.g. a watch
        reconnect; the index kept its state, so intervals stay as they are."""
        await self.outbox.append(encode_entry(GapEntry(cluster, start, end)))

    async def cluster_started(self, cluster: str, at: str) -> None:
        """This process starts watching `cluster` with an empty index: call before handing
        over its first Changes. Records the gap since history last saw the cluster and
        closes what was left open then (the first sync re-announces what is still held)."""
        await self.outbox.append(encode_entry(StartedEntry(cluster, at)))


@dataclass(frozen=True)
class WriterOptions:
    batch_rows: int = 200
    """Write a batch once it holds about this many rows (object versions + transitions)."""
    batch_entries: int = 2000
    """Never take more outbox entries than this into one batch. A backlog (after an outage,
    at start-up) drains in batches this big: each transaction costs a few round trips and a
    commit whatever its size, so draining in batches of 100 is several times slower."""
    linger: float = 0.1
    """Seconds to wait for more entries before writing a short batch."""
    retry_initial: float = 0.2
    """First delay after a failed batch; doubles per attempt."""
    retry_max: float = 10.0
    """Longest delay between attempts while SQL is unreachable."""
    reject_after: int = 3
    """Attempts before a batch SQL refuses (not unreachable) is split entry by entry."""
    retention_days: float | None = None
    """Delete object versions older than this many days; None keeps them forever."""
    prune_every: float = 3600.0
    """Seconds between retention runs."""


@dataclass
class WriterStats:
    batches: int = 0
    entries: int = 0
    rows: int = 0
    retries: int = 0
    rejected: int = 0
    replayed: int = 0
    pruned: int = 0
    last_error: str | None = None
    position: str | None = None


def _transient(error: BaseException) -> bool:
    """Unreachable (retry forever) rather than refused (split and skip)."""
    if isinstance(error, OperationalError | InterfaceError | PoolTimeout | OSError):
        return True
    if isinstance(error, DBAPIError):
        return bool(error.connection_invalidated) or "connect" in str(error.orig).lower()
    return False


def _size(entry: OutboxEntry | None) -> int:
    if isinstance(entry, ChangesEntry):
        return max(1, len(entry.versions) + len(entry.transitions))
    return 1


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

    async def run(self) -> None:
        """Drain the outbox forever (cancel to stop; an unfinished batch is replayed)."""
        await self._with_retry(self._load_position, "read the outbox position")
        await self._resume()
        while True:
            batch = await self._gather()
            if batch:
                self._idle.clear()
                await self._write(batch)
            if await self.outbox.backlog() == 0:
                self._idle.set()
            await self._maybe_prune()

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
            await self._write(self._decode(pending))

    def _decode(self, raw: Sequence[tuple[str, bytes]]) -> list[tuple[str, OutboxEntry | None]]:
        """Decode entries; one that cannot be decoded is counted, logged and later skipped."""
        decoded: list[tuple[str, OutboxEntry | None]] = []
        for entry_id, payload in raw:
            try:
                decoded.append((entry_id, decode_entry(payload)))
            except msgspec.DecodeError as error:
                self.stats.rejected += 1
                log.error("history outbox entry %s cannot be decoded, skipped: %s", entry_id, error)
                decoded.append((entry_id, None))
        return decoded

    async def _gather(self) -> list[tuple[str, OutboxEntry | None]]:
        options = self.options
        batch = self._decode(await self.outbox.read(options.batch_entries, block=0.5))
        if not batch:
            return batch
        rows = sum(_size(entry) for _, entry in batch)
        deadline = time.monotonic() + options.linger
        while rows < options.batch_rows and len(batch) < options.batch_entries:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            more = await self.outbox.read(options.batch_entries - len(batch), block=remaining)
            if not more:
                break
            decoded = self._decode(more)
            batch.extend(decoded)
            rows += sum(_size(entry) for _, entry in decoded)
        return batch

    async def _write(self, batch: Sequence[tuple[str, OutboxEntry | None]]) -> None:
        fresh = [
            (entry_id, entry)
            for entry_id, entry in batch
            if entry is not None
            and (self._position is None or entry_order(entry_id) > self._position)
        ]
        self.stats.replayed += sum(1 for _, entry in batch if entry is not None) - len(fresh)
        if fresh:
            await self._commit_with_retry(fresh)  # type: ignore[arg-type]
        await self.outbox.ack([entry_id for entry_id, _ in batch])

    async def _commit_with_retry(self, entries: list[tuple[str, OutboxEntry]]) -> None:
        attempt = 0
        refused = 0
        while True:
            attempt += 1
            try:
                await self._commit(entries)
                return
            except Exception as error:  # anything not "unreachable" ends as refused, below
                self.stats.last_error = f"{type(error).__name__}: {str(error).splitlines()[0]}"
                if not _transient(error):
                    refused += 1
                    if refused >= self.options.reject_after:
                        await self._commit_one_by_one(entries)
                        return
                delay = self._retry_delay(attempt)
                self.stats.retries += 1
                log.warning(
                    "history batch of %d entries failed (attempt %d): %s; retrying in %.1fs",
                    len(entries), attempt, self.stats.last_error, delay,
                )  # fmt: skip
                await self.sleep(delay)

    async def _commit_one_by_one(self, entries: list[tuple[str, OutboxEntry]]) -> None:
        for entry in entries:
            try:
                await self._commit([entry])
            except Exception as error:
                if _transient(error):
                    await self._commit_with_retry([entry])
                    continue
                self.stats.rejected += 1
                cluster = getattr(entry[1], "cluster", "?")
                log.error(
                    "history entry %s of cluster %s refused by SQL, skipped: %s",
                    entry[0], cluster, str(error).splitlines()[0],
                    extra={"cluster": cluster},
                )  # fmt: skip

    async def _commit(self, entries: list[tuple[str, OutboxEntry]]) -> None:
        async with self.engine.begin() as conn:
            recorder = BatchRecorder(conn)
            await recorder.record([entry for _, entry in entries])
            last = max((entry_id for entry_id, _ in entries), key=entry_order)
            await recorder.position(self.outbox.name, last, int(self.clock() * US_PER_SECOND))
        self._position = entry_order(last)
        self.stats.position = last
        self.stats.batches += 1
        self.stats.entries += len(entries)
        self.stats.rows += recorder.rows

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
        days = self.options.retention_days
        now = self.clock()
        if days is None or now - self._last_prune < self.options.prune_every:
            return
        self._last_prune = now
        try:
            self.stats.pruned += await prune_versions(
                self.engine, older_than_us=int((now - days * 86400) * US_PER_SECOND)
            )
        except (SQLAlchemyError, OSError) as error:
            log.warning("history retention failed: %s; next run in %.0fs",
                        str(error).splitlines()[0], self.options.prune_every)  # fmt: skip


async def prune_versions(engine: AsyncEngine, *, older_than_us: int) -> int:
    """Delete object versions observed before `older_than_us`; returns how many."""
    async with engine.begin() as conn:
        result = await conn.execute(
            delete(ObjectVersion).where(ObjectVersion.observed_us < older_than_us)
        )
    return result.rowcount or 0
