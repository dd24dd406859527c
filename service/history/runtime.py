"""History wired for one process: the database, the outbox, the sink, the writer and the reads.

    history = await History.open(url)          # migrates (optional), starts the writer
    compose_app(settings, store=…, history=opened(history))  # GraphQL reads: a HistoryQueries
    run_reactors(…, sinks=[store, history.sink])     # a ChangeSink with the watch hooks
    await history.close()                      # drains (bounded), stops the writer, disposes

`History` is a `HistoryQueries` (what `info.context.history` and the CSV export read) that also
owns the writer task. On embedded defaults the outbox is in-process; production passes a Redis
stream outbox (`outbox=`, `service.history.redis_outbox`). `close()` waits up to
`drain_seconds` for the backlog to reach SQL when the outbox is in-process (it dies with the
process, and the next start records the gap); a durable outbox (Redis) keeps its entries for
the next drainer, so `close()` only gives its drain lease up.

The writer task is supervised: an outbox that became unreachable (`StoreError`: Redis down)
stops `HistoryWriter.run`, which is started again after a backoff — it resumes from the
entries it was handed and never acknowledged.
"""

from __future__ import annotations

import asyncio
import logging

from sqlalchemy.ext.asyncio import AsyncEngine

from dra_mirror.service.history.db import open_engine
from dra_mirror.service.history.migrate import migrate
from dra_mirror.service.history.options import WriterOptions
from dra_mirror.service.history.outbox import MemoryOutbox, Outbox
from dra_mirror.service.history.queries import HistoryQueries
from dra_mirror.service.history.sink import HistorySink
from dra_mirror.service.history.writer import HistoryWriter
from dra_mirror.service.stores.protocols import StoreError

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
        self._task: asyncio.Task[None] | None = None
        self._closing = False

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
            self._task = asyncio.create_task(self._supervise(), name="history-writer")

    async def _supervise(self) -> None:
        options = self.writer.options
        delay = options.retry_initial
        while True:
            try:
                await self.writer.run()
            except StoreError as error:
                task = asyncio.current_task()
                if self._closing or (task is not None and task.cancelling()):
                    raise asyncio.CancelledError from error
                self.writer.stats.last_error = f"outbox: {error}"
                log.warning("history outbox unavailable (%s); writer restarts in %.1fs",
                            error, delay)  # fmt: skip
                await asyncio.sleep(delay)
                delay = min(options.retry_max, delay * 2)

    async def close(self) -> None:
        durable = self.outbox.durable
        self._closing = True
        if self._task is not None:
            if not durable:
                try:
                    async with asyncio.timeout(self.drain_seconds):
                        await self.writer.drained()
                except TimeoutError:
                    log.warning("history: %d outbox entries not written at shutdown",
                                await self.outbox.backlog())  # fmt: skip
            self._task.cancel()
            # the writer stops at its next await (Redis calls re-raise a cancellation the
            # client lost: service.stores.redis_calls); closing the outbox's connections
            # (below) ends anything still waiting on a socket
            await asyncio.wait({self._task}, timeout=2.0)
        # a durable outbox: hand the drain over, disconnect
        for step, action in (("release", self.outbox.release), ("close", self.outbox.close)):
            try:
                await action()
            except Exception as error:  # shutting down: a lease left to expire is fine
                log.warning("history: outbox %s failed at shutdown: %s", step, error)
        if self._task is not None:
            await asyncio.wait({self._task}, timeout=2.0)
            if not self._task.done():
                log.warning("history: the writer did not stop in time")
            elif not self._task.cancelled() and self._task.exception() is not None:
                log.error("history writer failed", exc_info=self._task.exception())
            self._task = None
        await self.engine.dispose()
