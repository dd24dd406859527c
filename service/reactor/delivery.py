"""How one cluster's reactor hands things to its sinks: in order, and retried while down.

`Delivery(cluster, sinks, ...)` carries, to every `ChangeSink` in turn:

* `started(at)` — the `cluster_started` hook, before the first batch;
* `gap(start, end)` — the `record_gap` hook, after a reconnection;
* `watched(until)` — the `cluster_watched` hook: watched until then, though nothing changed;
* `changes(changes)` — each non-empty batch (`apply`);

and `seed(source)` reads what a shared store holds of the cluster (`held`). The rule is the
same for all of them: a call raising `StoreError` (the backend is down) is made again after a
backoff with full jitter, capped at `retry_cap` seconds — forever, since nothing may be
skipped and nothing after it is handed out meanwhile; only a stop (which cancels the task)
ends the wait. Any other exception is a bug in the sink: logged once, and that call is skipped.
"""

from __future__ import annotations

import functools
import logging
import random
from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol

from dra_mirror.service.clusters.backoff import Backoff
from dra_mirror.service.model.changes import Changes, Seed
from dra_mirror.service.stores.protocols import ChangeSink, StoreError

log = logging.getLogger(__name__)


class SeedSource(Protocol):
    """A shared store that holds what an earlier writer of the cluster left (Redis)."""

    async def held(self, cluster: str) -> Seed: ...


class Delivery:
    """See the module docstring."""

    def __init__(
        self,
        cluster: str,
        sinks: Sequence[ChangeSink],
        *,
        sleep: Callable[[float], Awaitable[None]],
        rng: random.Random,
        retry_cap: float,
    ) -> None:
        self.cluster = cluster
        self.sinks = list(sinks)
        self.sleep = sleep
        self.rng = rng
        self.retry_cap = retry_cap
        self._log = {"cluster": cluster}

    async def started(self, at: str) -> None:
        for sink in self.sinks:
            call = functools.partial(sink.cluster_started, self.cluster, at)
            await self._retrying(sink, call, "its start hook")

    async def gap(self, start: str, end: str) -> None:
        for sink in self.sinks:
            call = functools.partial(sink.record_gap, self.cluster, start, end)
            await self._retrying(sink, call, "its gap hook")

    async def watched(self, until: str) -> None:
        for sink in self.sinks:
            call = functools.partial(sink.cluster_watched, self.cluster, until)
            await self._retrying(sink, call, "its watched hook")

    async def changes(self, changes: Changes) -> None:
        if not changes:
            return
        what = f"a batch of {len(changes.upserts)} upserts, {len(changes.deletes)} deletes"
        for sink in self.sinks:
            await self._retrying(sink, functools.partial(sink.apply, changes), what)

    async def seed(self, source: SeedSource) -> Seed | None:
        """What the store holds of the cluster (None: reading it failed on a bug)."""
        found: list[Seed] = []

        async def read() -> None:
            found.append(await source.held(self.cluster))

        await self._retrying(source, read, "reading what it holds")
        return found[0] if found else None

    async def _retrying(self, sink: object, call: Callable[[], Awaitable[None]], what: str) -> None:
        backoff = Backoff(base=0.5, cap=self.retry_cap, rng=self.rng)
        while True:
            try:
                await call()
                return
            except StoreError as error:
                delay = backoff.next_delay()
                log.warning(
                    "sink %r unavailable (%s); attempt %d, retrying %s in %.2fs",
                    sink,
                    error,
                    backoff.attempt,
                    what,
                    delay,
                    extra=self._log,
                )
                await self.sleep(delay)
            except Exception:
                log.exception("sink %r failed on %s; moving on", sink, what, extra=self._log)
                return
