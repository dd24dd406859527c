"""History fixtures: a fresh, migrated history database per test, on SQLite and PostgreSQL.

`history_url` is parametrized: `sqlite` (a file in tmp_path) and `postgres` (a fresh database
created on the suite's PostgreSQL, dropped afterwards; those tests carry the `postgres` mark).
`writer_for` runs a HistoryWriter task until the test ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Iterable
from pathlib import Path

import asyncpg
import pytest
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine

from dra_mirror.service.history.db import open_engine
from dra_mirror.service.history.migrate import migrate
from dra_mirror.service.history.outbox import MemoryOutbox
from dra_mirror.service.history.queries import HistoryQueries
from dra_mirror.service.history.writer import HistorySink, HistoryWriter, WriterOptions
from dra_mirror.service.model.changes import Changes

BACKENDS = [pytest.param("sqlite", id="sqlite"),
            pytest.param("postgres", id="postgres", marks=pytest.mark.postgres)]  # fmt: skip

FAST = WriterOptions(linger=0.01, retry_initial=0.05, retry_max=0.2)


def plain_dsn(url: str) -> str:
    """asyncpg's form of a SQLAlchemy PostgreSQL URL."""
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


@contextlib.asynccontextmanager
async def fresh_database(backend: str, request, directory: Path) -> AsyncIterator[str]:
    """A URL of an empty database: a SQLite file, or a new database on the suite's PostgreSQL."""
    if backend == "sqlite":
        yield f"sqlite+aiosqlite:///{directory / f'history-{uuid.uuid4().hex[:8]}.db'}"
        return
    server_url = request.getfixturevalue("postgres_url")
    name = f"history_{uuid.uuid4().hex[:12]}"
    admin = plain_dsn(make_url(server_url).set(database="postgres").render_as_string(False))
    conn = await asyncpg.connect(admin)
    try:
        await conn.execute(f'CREATE DATABASE "{name}"')
    finally:
        await conn.close()
    try:
        yield make_url(server_url).set(database=name).render_as_string(hide_password=False)
    finally:
        conn = await asyncpg.connect(admin)
        try:
            await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            await conn.close()


@pytest.fixture(params=BACKENDS)
async def history_url(request, tmp_path) -> AsyncIterator[str]:
    async with fresh_database(request.param, request, tmp_path) as url:
        yield url


@pytest.fixture
async def engine(history_url: str) -> AsyncIterator[AsyncEngine]:
    await migrate(history_url)
    engine = open_engine(history_url)
    yield engine
    await engine.dispose()


@pytest.fixture
def queries(engine: AsyncEngine) -> HistoryQueries:
    return HistoryQueries(engine)


async def eventually(predicate, what: str, *, attempts: int = 3000) -> None:
    """Wait (polling every 10 ms, at most ~30 s) until `predicate()` holds."""
    for _ in range(attempts):
        if predicate():
            return
        await asyncio.sleep(0.01)
    pytest.fail(f"never happened: {what}")


class Pipeline:
    """An outbox, the sink in front of it and a running writer behind it."""

    def __init__(
        self, engine: AsyncEngine, outbox=None, options: WriterOptions = FAST, **sink: int
    ) -> None:
        self.outbox = outbox or MemoryOutbox()
        self.sink = HistorySink(self.outbox, **sink)
        self.writer = HistoryWriter(engine, self.outbox, options=options)
        self.task: asyncio.Task | None = None

    def start(self) -> Pipeline:
        self.task = asyncio.create_task(self.writer.run())
        return self

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            try:
                await self.task
            except asyncio.CancelledError:
                pass
            self.task = None

    async def drained(self) -> None:
        await asyncio.wait_for(self.writer.drained(), 60)


@contextlib.asynccontextmanager
async def recorded(
    backend: str, request, directory: Path, batches: Iterable[Changes]
) -> AsyncIterator[AsyncEngine]:
    """A fresh, migrated database of `backend` holding `batches` written through the whole
    pipeline (drained): its engine, disposed on exit."""
    async with fresh_database(backend, request, directory) as url:
        await migrate(url)
        engine = open_engine(url)
        running = Pipeline(engine).start()
        try:
            for changes in batches:
                await running.sink(changes)
            await running.drained()
            yield engine
        finally:
            await running.stop()
            await engine.dispose()


@pytest.fixture
async def pipeline(engine: AsyncEngine) -> AsyncIterator[Pipeline]:
    running = Pipeline(engine).start()
    yield running
    await running.stop()


@pytest.fixture(scope="module", params=BACKENDS)
async def loaded(request, tmp_path_factory) -> AsyncIterator[HistoryQueries]:
    """The hand-written script written through the whole pipeline, once per module and backend
    (read-only tests share it)."""
    from tests.history.script import batches

    directory = tmp_path_factory.mktemp("history")
    async with fresh_database(request.param, request, directory) as url:
        await migrate(url)
        engine = open_engine(url)
        running = Pipeline(engine).start()
        try:
            for changes in batches():
                await running.sink(changes)
            await running.drained()
            yield HistoryQueries(engine)
        finally:
            await running.stop()
            await engine.dispose()
