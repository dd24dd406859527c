"""Lower bounds that let PostgreSQL leave out the partitions an audit's window cannot reach.

An interval of a table partitioned by its start (`models.PARTITIONED`) overlaps the window
[f, t) when `start_us < t AND (end_us IS NULL OR end_us > f)`. The first half prunes the
partitions after the window by itself; nothing in the second half bounds the start from
below, so every older partition would be read: a device held since January belongs to an
audit of March. `floors(conn, tables, at_us)` finds, for each table, the earliest start of an
interval that began before `at_us` and was still open at `at_us` — one range scan of the
table's `ix_<table>_end` index per older partition, where only the long intervals qualify —
or `at_us` when there is none. Adding `start_us >= floor` to the audit's statements is exact
(no interval reaching the window starts before its floor) and lets the planner drop every
partition before the floor's month.

SQLite is not partitioned: `floors` answers nothing there and the audits add no bound.
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from dra_mirror.service.history.models import PARTITIONED


def partitioned_by_start(table: str) -> bool:
    return PARTITIONED.get(table) == "start_us"


async def floors(conn: AsyncConnection, tables: Iterable[str], at_us: int) -> dict[str, int]:
    """Per table: no interval overlapping [at_us, …) starts before the floor (PostgreSQL)."""
    wanted = sorted({table for table in tables if partitioned_by_start(table)})
    if conn.dialect.name != "postgresql" or not wanted:
        return {}
    statement = " UNION ALL ".join(
        f"SELECT '{table}', MIN(start_us) FROM {table} "
        "WHERE start_us < :at AND (end_us IS NULL OR end_us > :at)"
        for table in wanted
    )
    found = {name: start for name, start in await conn.execute(text(statement), {"at": at_us})}
    return {table: min(at_us, found.get(table) or at_us) for table in wanted}


async def floor_params(engine: AsyncEngine, tables: Iterable[str], at_us: int) -> dict[str, int]:
    """`floors` as statement parameters, `floor_<table>` (empty on SQLite)."""
    if engine.dialect.name != "postgresql":
        return {}
    async with engine.connect() as conn:
        found = await floors(conn, tables, at_us)
    return {f"floor_{table}": floor for table, floor in found.items()}


def bounded(alias: str, table: str, params: dict) -> str:
    """` AND alias.start_us >= :floor_table` when `params` holds that floor, else ''."""
    key = f"floor_{table}"
    return f" AND {alias}.start_us >= :{key}" if key in params else ""
