"""History wired for one process: the database, the outbox, the sink, the writer and the reads.

    history = await History.open(url)          # migrates (optional), starts the writer
    create_app(settings, store=…, history=history)   # GraphQL reads: history is a HistoryQueries
    run_reactors(…, sinks=[store.apply, history.sink])
    await history.close()                      # drains (bounded), stops the writer, disposes

`History` is a `HistoryQueries` (what `info.context.history` and the CSV export read) that also
owns the writer task. On embedded defaults the outbox is in-process; production passes a Redis
stream outbox (`outbox=`). `close()` waits up to `drain_seconds` for the backlog to reach SQL:
an in-process outbox dies with the process, and the next start records the gap.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from sqlalchemy.ext.asyncio import AsyncEngine

from service.history.db import open_engine
from service.history.migrate import migrate
from service.history.outbox import MemoryOutbox, Outbox
from service.history.queries import HistoryQueries
from service.history.writer import HistorySink, HistoryWriter, WriterOptions

log = logging.getLogger(__name__)


class History(HistoryQueries):
    def __init__(
        self,
        engine: AsyncEngine,
        *,
        outbox: Outbox | None = None,
        options: WriterOptions | None = None,
        drain_seconds: float = 10.0,
    ) -> None:
        super().__init__(engine)
        self.outbox: Outbox = outbox or MemoryOutbox()
        self.sink = HistorySink(self.outbox)
        self.writer = HistoryWriter(engine, self.outbox, options=options)
        self.drain_seconds = drain_seconds
        self._task: asyncio.Task | None = None

    @classmethod
    async def open(
        cls,
        url: str,
        *,
        upgrade: bool = True,
        outbox: Outbox | None = None,
        options: WriterOptions | None = None,
    ) -> History:
        """Open the database at `url` (migrating it to head unless `upgrade=False`) and start
        the writer."""
        if upgrade:
            await migrate(url)
        history = cls(open_engine(url), outbox=outbox, options=options)
        history.start()
        return history

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self.writer.run(), name="history-writer")

    async def close(self) -> None:
        if self._task is not None:
            try:
                await asyncio.wait_for(self.writer.drained(), self.drain_seconds)
            except TimeoutError:
                log.warning("history: %d outbox entries not written at shutdown",
                            await self.outbox.backlog())  # fmt: skip
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        await self.engine.dispose()
