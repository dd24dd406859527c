"""`dra-mirror history partitions`: the monthly partitions of a PostgreSQL history database.

    dra-mirror history partitions [--database-url URL] [--ahead 2]
                                  [--retention-days N] [--interval-retention-days N]
                                  [--analyze] [--list-only]

Creates this month's partitions and the next `--ahead` months' (what every history writer
does when it starts and hourly, `service.history.partitions.maintain`), drops the months
older than the retention asked for (object versions; intervals only when
`--interval-retention-days` is given, and only months holding no interval still open or
ending after the cutoff), optionally ANALYZEs the partitioned tables (autovacuum analyzes
partitions, never their parents, whose statistics the planner also reads), then lists every
partition with its range, estimated rows and size. `--list-only` changes nothing. On SQLite
(not partitioned) retention deletes rows instead, and there is nothing to list.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import click


@click.group("history")
def history() -> None:
    """The history database: maintenance commands."""


@history.command("partitions")
@click.option("--database-url", default=None,
              help="History database [env DRA_MIRROR_HISTORY_DATABASE_URL].")  # fmt: skip
@click.option("--ahead", type=click.IntRange(0, 24), default=2, show_default=True,
              help="Months created after the current one.")  # fmt: skip
@click.option("--retention-days", type=click.FloatRange(min=0, min_open=True), default=None,
              help="Drop object versions older than this many days (whole months).")  # fmt: skip
@click.option("--interval-retention-days", type=click.FloatRange(min=0, min_open=True),
              default=None, help="Drop months of intervals that all ended this many days ago.")  # fmt: skip
@click.option("--analyze", is_flag=True, help="ANALYZE the partitioned tables afterwards.")
@click.option("--list-only", is_flag=True, help="Only list the partitions; change nothing.")
@click.pass_context
def partitions_command(ctx: click.Context, database_url: str | None, **options: Any) -> None:
    """Create the coming months' partitions, apply retention, list the partitions."""
    from dra_mirror.service.cli.options import build_settings
    from dra_mirror.service.stores.protocols import StoreUnavailable

    url = build_settings(ctx, **{"history.database_url": database_url}).history.database_url
    if not url:
        raise click.UsageError("give --database-url or DRA_MIRROR_HISTORY_DATABASE_URL")
    try:
        lines = asyncio.run(_run(url, **options))
    except StoreUnavailable as error:
        raise click.ClickException(f"history database unavailable: {error}") from error
    for line in lines:
        click.echo(line)


async def _run(
    url: str, *, ahead: int, retention_days: float | None,
    interval_retention_days: float | None, analyze: bool, list_only: bool,
) -> list[str]:  # fmt: skip
    from sqlalchemy import inspect, text

    from dra_mirror.service.history import partitions
    from dra_mirror.service.history.db import open_engine, sql_errors
    from dra_mirror.service.history.models import PARTITIONED
    from dra_mirror.service.history.times import to_rfc3339

    engine = open_engine(url)
    lines: list[str] = []
    try:
        with sql_errors("history partitions"):
            async with engine.connect() as conn:
                tables = set(await conn.run_sync(lambda c: inspect(c).get_table_names()))
            if not set(PARTITIONED) <= tables:
                raise click.ClickException(
                    "this database holds no history tables: run `dra-mirror migrate` first"
                )
            if not list_only:
                done = await partitions.maintain(
                    engine, now=time.time(), versions_days=retention_days,
                    intervals_days=interval_retention_days, ahead=ahead,
                )  # fmt: skip
                lines.append(f"created {len(done.created)}: {', '.join(done.created) or '-'}")
                lines.append(f"dropped {len(done.dropped)}: {', '.join(done.dropped) or '-'} "
                             f"({done.rows} rows)")  # fmt: skip
            if engine.dialect.name != "postgresql":
                lines.append("SQLite: not partitioned")
                return lines
            async with engine.connect() as conn:
                if analyze and not list_only:
                    for table in PARTITIONED:
                        await conn.execute(text(f"ANALYZE {table}"))
                    await conn.commit()
                found = await partitions.listed(conn)
                measured = await conn.execute(
                    text("SELECT relname, reltuples, pg_total_relation_size(oid) FROM pg_class "
                         "WHERE relname = ANY(:names)"),
                    {"names": [p.name for p in found]},
                )  # fmt: skip
                sizes = {name: (rows, size) for name, rows, size in measured}
    finally:
        await engine.dispose()
    lines.append(f"{'partition':<32} {'from':<21} {'to':<21} {'rows':>12} {'size':>10}")
    for p in found:
        rows, size = sizes.get(p.name, (-1, 0))
        estimate = "?" if rows < 0 else f"{int(rows):,}"
        lines.append(f"{p.name:<32} {to_rfc3339(p.start_us):<21} {to_rfc3339(p.end_us):<21} "
                     f"{estimate:>12} {size / 2**20:>8.1f}Mi")  # fmt: skip
    return lines
