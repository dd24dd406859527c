"""Alembic environment for the history database, async (aiosqlite / asyncpg).

The URL is taken, in order, from `config.attributes["url"]` (set by
`service.history.migrate`), the `-x url=...` argument, then `DRA_MIRROR_HISTORY_DATABASE_URL`.
`render_as_batch` lets later migrations alter SQLite tables (which cannot ALTER most things)
by copy-and-move; PostgreSQL gets plain ALTERs. A connection handed in through
`config.attributes["connection"]` is used as is (tests and `migrate()` share one engine).

Comparing models and database (`alembic check`): an index the models give one dialect only
(`info={"dialect": …}`) is compared on that dialect only, and the monthly partitions of
PostgreSQL (`service.history.partitions`) are not tables of the models: they are left out.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Mapping
from typing import Any

from alembic import context
from sqlalchemy.engine import Connection

from dra_mirror.service.history.db import async_url, open_engine
from dra_mirror.service.history.models import Base
from dra_mirror.service.history.partitions import is_partition

config = context.config
target_metadata = Base.metadata


def _url() -> str:
    url = config.attributes.get("url") or context.get_x_argument(as_dictionary=True).get("url")
    url = url or os.environ.get("DRA_MIRROR_HISTORY_DATABASE_URL")
    if not url:
        raise SystemExit(
            "set DRA_MIRROR_HISTORY_DATABASE_URL (or -x url=...) to the history database URL"
        )
    return async_url(url)


def _include_name(dialect: str) -> Callable[..., bool]:
    def include_name(name: str | None, type_: str, parent_names: Mapping[str, str | None]) -> bool:
        return not (type_ == "table" and name is not None and is_partition(name))

    return include_name


def _include_object(dialect: str) -> Callable[..., bool]:
    def include_object(
        obj: Any, name: str | None, type_: str, reflected: bool, compare_to: Any
    ) -> bool:
        wanted = getattr(obj, "info", {}).get("dialect")
        if type_ == "index" and not reflected and wanted not in (None, dialect):
            return False
        return True

    return include_object


def _configure(connection: Connection) -> None:
    dialect = connection.dialect.name
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=dialect == "sqlite",
        compare_type=True,
        include_name=_include_name(dialect),
        include_object=_include_object(dialect),
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_offline() -> None:
    context.configure(url=_url(), target_metadata=target_metadata, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()


async def _run_online() -> None:
    engine = open_engine(_url())
    try:
        async with engine.connect() as connection:
            await connection.run_sync(_configure)
            await connection.commit()
    finally:
        await engine.dispose()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _configure(connection)
    else:
        asyncio.run(_run_online())


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
