"""Monthly partitions of the growing history tables on PostgreSQL: created ahead, dropped by age.

`models.PARTITIONED` names the tables and their key column (microseconds since the epoch).
Each partition holds one calendar month (UTC) of its key: `allocations_y2026m12` holds
[2026-12-01, 2027-01-01). Promises:

* Rows always have a partition. `maintain` keeps the current month and the next `ahead`
  months created (the writer runs it when it starts and every `prune_every` seconds; so does
  `dra-mirror history partitions`); `cover` — called by the writer in each batch, before any
  row — creates whatever month the batch needs that is still missing (a backlog from a month
  already dropped, a clock far off), in its own short transaction.
* Retention drops whole partitions, never deletes rows: object versions of every month that
  ended before `now - versions_days`; intervals (only when `intervals_days` is given) of
  every month that ended before its cutoff and holds no interval still open or ending after
  it. A month is dropped only once all of it is older than the cutoff, so up to a month more
  than asked is kept. DDL waits at most `LOCK_TIMEOUT` for the tables' locks (a long audit
  holds them): a run that cannot get them is logged and the next run tries again.
* SQLite is not partitioned: `cover` does nothing, retention deletes the rows older than the
  cutoff (object versions; intervals that ended before it).
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from sqlalchemy import delete, text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from dra_mirror.service.history.models import INTERVAL_TABLES, PARTITIONED, ObjectVersion
from dra_mirror.service.history.times import EPOCH, MICROSECOND, US_PER_SECOND, to_datetime

log = logging.getLogger(__name__)

AHEAD = 2  # months created ahead of the current one
LOCK_TIMEOUT = "5s"
_NAME = re.compile(r"^(?P<table>[a-z_]+)_y(?P<year>\d{4})m(?P<month>\d{2})$")
_BOUND = re.compile(r"FROM \('?(-?\d+)'?\) TO \('?(-?\d+)'?\)")


@dataclass(frozen=True, order=True)
class Month:
    year: int
    month: int

    @classmethod
    def of(cls, us: int) -> Month:
        moment = to_datetime(us)
        return cls(moment.year, moment.month)

    def next(self, months: int = 1) -> Month:
        index = self.year * 12 + self.month - 1 + months
        return Month(index // 12, index % 12 + 1)

    @property
    def start_us(self) -> int:
        return (datetime(self.year, self.month, 1, tzinfo=UTC) - EPOCH) // MICROSECOND

    @property
    def end_us(self) -> int:
        return self.next().start_us

    def name(self, table: str) -> str:
        return f"{table}_y{self.year:04d}m{self.month:02d}"


def is_partition(name: str) -> bool:
    """Whether a table name is one of our monthly partitions (Alembic skips them)."""
    found = _NAME.match(name)
    return found is not None and found["table"] in PARTITIONED


@dataclass(frozen=True)
class Partition:
    table: str
    name: str
    start_us: int
    end_us: int


async def listed(conn: AsyncConnection) -> list[Partition]:
    """Every partition of the partitioned history tables, with its bounds, oldest first."""
    rows = await conn.execute(
        text(
            # text, not name: types asyncpg decodes without asking the server first
            "SELECT p.relname::text, c.relname::text, pg_get_expr(c.relpartbound, c.oid) "
            "FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
            "JOIN pg_class p ON p.oid = i.inhparent WHERE p.relname = ANY(CAST(:tables AS text[]))"
        ),
        {"tables": list(PARTITIONED)},
    )
    found = []
    for parent, name, bound in rows:
        match = _BOUND.search(bound or "")
        if match:  # a DEFAULT partition (made by hand) has no range: never ours to drop
            found.append(Partition(parent, name, int(match[1]), int(match[2])))
    return sorted(found, key=lambda p: (p.table, p.start_us))


def _missing(partitions: Iterable[Partition], table: str, months: Iterable[Month]) -> list[Month]:
    ranges = [(p.start_us, p.end_us) for p in partitions if p.table == table]
    return [m for m in sorted(set(months))
            if not any(lo <= m.start_us and m.end_us <= hi for lo, hi in ranges)]  # fmt: skip


async def _create(conn: AsyncConnection, table: str, month: Month) -> None:
    await conn.execute(
        text(
            f"CREATE TABLE IF NOT EXISTS {month.name(table)} PARTITION OF {table} "
            f"FOR VALUES FROM ({month.start_us}) TO ({month.end_us})"
        )
    )


async def create(
    engine: AsyncEngine, needed: dict[str, set[Month]], *, lock_timeout: str | None = LOCK_TIMEOUT
) -> list[str]:
    """Create the partitions of `needed` (table -> months) that do not exist; their names.
    With `lock_timeout` None, wait for the tables' locks as long as it takes."""
    if engine.dialect.name != "postgresql" or not any(needed.values()):
        return []
    created: list[str] = []
    async with engine.begin() as conn:
        existing = await listed(conn)
        todo = {table: _missing(existing, table, months) for table, months in needed.items()}
        if not any(todo.values()):
            return []
        if lock_timeout is not None:
            await conn.execute(text(f"SET LOCAL lock_timeout = '{lock_timeout}'"))
        for table, months in todo.items():
            for month in months:
                await _create(conn, table, month)
                created.append(month.name(table))
    log.info("history: created partitions %s", ", ".join(created))
    return created


def months_between(start_us: int, end_us: int) -> set[Month]:
    """The months holding any instant of [start_us, end_us]."""
    month, last = Month.of(start_us), Month.of(end_us)
    found = set()
    while month <= last:
        found.add(month)
        month = month.next()
    return found


async def cover(engine: AsyncEngine, conn: AsyncConnection, needed: dict[str, set[Month]]) -> None:
    """Before a batch writes through `conn`: create the months it needs that are missing, in a
    transaction of their own (committed before the batch; the batch's own transaction holds
    no lock yet). No lock timeout: a batch must not be refused (and skipped) because an audit
    held the table a while.

    The check costs one catalogue read, by partition name; none when every month needed is
    the current one or later and this connection saw it before (`conn.info` lives as long as
    the database connection): retention never drops those, its cutoff is in the past."""
    if conn.dialect.name != "postgresql" or not any(needed.values()):
        return
    wanted = {(table, month) for table, months in needed.items() for month in months}
    known: set[tuple[str, Month]] = conn.info.setdefault("history_partitions", set())
    if wanted <= known:
        return
    names = [month.name(table) for table, month in wanted]
    present = set(await conn.scalars(
        text("SELECT relname::text FROM pg_class WHERE relname = ANY(CAST(:names AS text[]))"),
        {"names": names},
    ))  # fmt: skip
    if len(present) < len(wanted):
        await create(engine, needed, lock_timeout=None)
    current = Month.of(int(time.time() * US_PER_SECOND))
    known.update((table, month) for table, month in wanted if month >= current)


@dataclass
class Maintenance:
    """What one run of `maintain` did."""

    created: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    rows: int = 0  # rows dropped (or, on SQLite, deleted)


async def maintain(
    engine: AsyncEngine,
    *,
    now: float,
    versions_days: float | None = None,
    intervals_days: float | None = None,
    ahead: int = AHEAD,
) -> Maintenance:
    """Create this month and the next `ahead`, then apply the retention asked for."""
    now_us = int(now * US_PER_SECOND)
    current = Month.of(now_us)
    months = {current.next(i) for i in range(ahead + 1)}
    done = Maintenance(created=await create(engine, dict.fromkeys(PARTITIONED, months)))
    if versions_days is not None:
        cutoff = now_us - int(versions_days * 86400 * US_PER_SECOND)
        await _expire(engine, [ObjectVersion.__tablename__], cutoff, done, intervals=False)
    if intervals_days is not None:
        cutoff = now_us - int(intervals_days * 86400 * US_PER_SECOND)
        tables = [t.__tablename__ for t in INTERVAL_TABLES if t.__tablename__ in PARTITIONED]
        await _expire(engine, tables, cutoff, done, intervals=True)
    return done


async def _expire(
    engine: AsyncEngine, tables: list[str], cutoff_us: int, done: Maintenance, *, intervals: bool
) -> None:
    if engine.dialect.name != "postgresql":
        done.rows += await _delete_rows(engine, tables, cutoff_us, intervals=intervals)
        return
    async with engine.connect() as conn:
        old = [p for p in await listed(conn) if p.table in tables and p.end_us <= cutoff_us]
    for partition in old:
        async with engine.begin() as conn:
            # the locks first: no late batch may write into the month between the check and
            # the drop
            await conn.execute(text(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'"))
            await conn.execute(text(f"LOCK TABLE {partition.table}, {partition.name} "
                                    "IN ACCESS EXCLUSIVE MODE"))  # fmt: skip
            if intervals and await conn.scalar(
                text(f"SELECT EXISTS (SELECT 1 FROM {partition.name} "
                     "WHERE end_us IS NULL OR end_us > :cutoff)"),
                {"cutoff": cutoff_us},
            ):  # fmt: skip
                continue  # an interval still open (or ending after the cutoff) is kept whole
            rows = await conn.scalar(text(f"SELECT count(*) FROM {partition.name}"))
            await conn.execute(text(f"ALTER TABLE {partition.table} DETACH PARTITION "
                                    f"{partition.name}"))  # fmt: skip
            await conn.execute(text(f"DROP TABLE {partition.name}"))
        done.dropped.append(partition.name)
        done.rows += int(rows or 0)
        log.info("history retention: dropped %s (%d rows)", partition.name, rows or 0)


async def _delete_rows(
    engine: AsyncEngine, tables: list[str], cutoff_us: int, *, intervals: bool
) -> int:
    """SQLite: the rows older than the cutoff (intervals: those that ended before it)."""
    removed = 0
    async with engine.begin() as conn:
        for model in (ObjectVersion, *INTERVAL_TABLES):
            if model.__tablename__ not in tables:
                continue
            if intervals:
                end = getattr(model, "end_us")  # noqa: B009  (interval tables only)
                condition = end.is_not(None) & (end <= cutoff_us)
            else:
                condition = ObjectVersion.observed_us < cutoff_us
            result = await conn.execute(delete(model).where(condition))
            removed += result.rowcount or 0
    return removed
