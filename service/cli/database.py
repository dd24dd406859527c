"""`dra-mirror migrate`: bring the history database to the newest schema (Alembic upgrade head).

    dra-mirror migrate [--database-url URL]

The URL is an SQLAlchemy URL or an SQLite file path, from the flag or
`DRA_MIRROR_HISTORY_DATABASE_URL`. Run it once per release before the watchers start (the Helm
chart's pre-upgrade job and docker-compose's `migrate` service do).

Promises: exit 0 with the schema at head; an unreachable database is exit 1 with the reason,
no database given is a usage error (exit 2).
"""

from __future__ import annotations

import asyncio

import click

from dra_mirror.service.cli import preflight
from dra_mirror.service.cli.help import setting_option
from dra_mirror.service.cli.options import build_settings


@click.command()
@setting_option(
    "--database-url",
    setting="history.database_url",
    help="History database (SQLAlchemy URL or SQLite path).",
)
@click.pass_context
def migrate(ctx: click.Context, database_url: str | None) -> None:
    """Bring the history database to the newest schema (Alembic upgrade head)."""
    settings = build_settings(ctx, **{"history.database_url": database_url})
    url = settings.history.database_url
    if not url:
        raise click.UsageError("give --database-url or DRA_MIRROR_HISTORY_DATABASE_URL")
    preflight.check_database(url)
    from dra_mirror.service.history.migrate import migrate as upgrade
    from dra_mirror.service.stores.protocols import StoreUnavailable

    try:
        asyncio.run(upgrade(url))
    except StoreUnavailable as error:
        raise click.ClickException(f"history database unavailable: {error}") from error
    click.echo("history database at the newest schema")
