"""Opening the history database, and the one place SQL driver errors are translated.

`open_engine(url)` takes a SQLAlchemy URL: `sqlite+aiosqlite:///path/history.db` (embedded
default) or `postgresql+asyncpg://user@host/db` (production). A bare path or a plain
`sqlite:///`/`postgresql://` URL is given its async driver. SQLite runs in WAL mode (readers do
not block the writer) with a busy timeout; PostgreSQL connections are checked before use, so a
server restart costs one failed batch, not a poisoned pool.

Errors: anything the driver raises because the database cannot be reached or refuses the
statement becomes `HistoryUnavailable` (a `StoreUnavailable`): callers retry or answer
"history store unavailable"; nothing else leaks out of `sql_errors()`. A URL that cannot work
at all (not a URL, another database, a driver that is not installed) is a `BadHistoryUrl`
from `check_url`, which the commands call before they start.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import (
    ArgumentError,
    DBAPIError,
    InterfaceError,
    NoSuchModuleError,
    OperationalError,
)
from sqlalchemy.exc import TimeoutError as PoolTimeout
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from dra_mirror.service.stores.protocols import StoreUnavailable


class HistoryUnavailable(StoreUnavailable):
    """The history database cannot be reached now (or refused the batch); try again later."""


def async_url(url: str) -> str:
    """The SQLAlchemy async form of a history URL or a bare SQLite file path."""
    if "://" not in url:
        return f"sqlite+aiosqlite:///{url}"
    parsed = make_url(url)
    if parsed.drivername in {"sqlite", "sqlite+pysqlite"}:
        parsed = parsed.set(drivername="sqlite+aiosqlite")
    elif parsed.drivername in {"postgresql", "postgres", "postgresql+psycopg2"}:
        parsed = parsed.set(drivername="postgresql+asyncpg")
    return parsed.render_as_string(hide_password=False)


class BadHistoryUrl(ValueError):
    """The history database URL cannot work; the message says why and what is accepted."""


SUPPORTED = ("sqlite+aiosqlite", "postgresql+asyncpg")
_ACCEPTED = "give sqlite:///PATH (or a file path) or postgresql://USER:PASSWORD@HOST/DB"


def check_url(url: str) -> None:
    """Raise `BadHistoryUrl` unless `url` names a SQLite file this process can create or
    write or a PostgreSQL database whose driver is installed (nothing is connected to). The message never repeats the URL (it may
    hold a password)."""
    try:
        parsed = make_url(async_url(url))
    except (ArgumentError, ValueError) as error:
        raise BadHistoryUrl(f"history database URL is not a URL ({error}): {_ACCEPTED}") from None
    if parsed.drivername not in SUPPORTED:
        raise BadHistoryUrl(
            f"history database driver {parsed.drivername!r} is not supported: {_ACCEPTED}"
        )
    try:
        parsed.get_dialect().import_dbapi()
    except (NoSuchModuleError, ImportError) as error:
        raise BadHistoryUrl(f"history database driver {parsed.drivername!r}: {error}") from None
    if parsed.drivername.startswith("sqlite"):
        _check_sqlite_file(parsed.database or "")


def _check_sqlite_file(database: str) -> None:
    """A SQLite file the process can create or write (its directory exists and is writable,
    or the file exists and is): else `BadHistoryUrl` naming the path."""
    if not database or database == ":memory:" or database.startswith("file:"):
        return
    path = os.path.abspath(database)
    folder = os.path.dirname(path) or "."
    if os.path.exists(path):
        if os.path.isdir(path) or not os.access(path, os.R_OK | os.W_OK):
            raise BadHistoryUrl(f"history database {path} is not a file this process can write")
    elif not os.path.isdir(folder):
        raise BadHistoryUrl(f"history database {path}: its directory {folder} does not exist")
    elif not os.access(folder, os.W_OK | os.X_OK):
        raise BadHistoryUrl(
            f"history database {path}: this process cannot create files in {folder}"
        )


def _sqlite_pragmas(dbapi_connection: Any, _record: object) -> None:
    # WAL: readers see the last commit while the writer appends; NORMAL sync is durable
    # across process crashes (not power loss) and several times faster than FULL.
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA busy_timeout=5000")
    cursor.close()


def open_engine(url: str, *, echo: bool = False) -> AsyncEngine:
    url = async_url(url)
    if url.startswith("sqlite"):
        engine = create_async_engine(url, echo=echo)
        event.listen(engine.sync_engine, "connect", _sqlite_pragmas)
        return engine
    return create_async_engine(url, echo=echo, pool_pre_ping=True, pool_size=5, max_overflow=5)


@contextlib.contextmanager
def sql_errors(what: str) -> Iterator[None]:
    """Translate driver errors of one SQL operation into `HistoryUnavailable`."""
    try:
        yield
    except (OperationalError, InterfaceError, PoolTimeout, DBAPIError, OSError) as error:
        raise HistoryUnavailable(f"history store unavailable ({what}): {_short(error)}") from error


def _short(error: BaseException) -> str:
    text = str(getattr(error, "orig", None) or error)
    return text.splitlines()[0][:300] if text else type(error).__name__
