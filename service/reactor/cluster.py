"""One task per cluster: watch streams in, batches of `Changes` out to every sink, in order.

A `Reactor` owns one cluster's `ClusterIndex` (the model: the index its state store opened
for it) and one `KindWatcher` per kind. The watchers feed a bounded queue (`ClusterFeed`:
backpressure when a sink is slow); the reactor folds events into the index in batches (up to
`batch_max_events`, or `batch_max_delay` after the first) and hands each non-empty `Changes`
to every sink in order (`ChangeSink`: the state store, the history outbox). A complete LIST
goes to `index.resync` after the events queued before it, so objects deleted while nobody
watched come out as deletes. The model decides what to write, including the derived state
and the live events the Changes carry.

Before its first batch it calls every sink's `cluster_started(cluster, at)` (history: a new
index starts watching) and, when given a `seed_from` (a shared store's `held`), seeds its
index with what the store holds (service.model.index, rule 8); `record_gap(cluster, start,
end)` follows a reconnection; `cluster_watched(cluster, until)` (a bookmark while connected,
at most every `watched_interval`; a clean stop) says a quiet cluster is still watched. A sink (or hook, or the seed's read) raising `StoreError` gets
the same call again after a backoff, and nothing after it is handed out meanwhile (nothing
is skipped, order is kept); any other exception is a bug: it is logged and the batch moves on.

A kind whose stream missed its bookmark deadline (`Silent`) or that relists after a reset of
the cluster's versions makes the cluster not `connected` (served as `stale`) until that kind
is heard again or has relisted; only a stream that failed or was stalled is a gap in history
(from when it was last heard), and a gap of no length is none.

It keeps the cluster's `ClusterStatus` (connected; synced once every kind was listed or is
known not to be served — DeviceTaintRule, `kinds.OPTIONAL`, holds back neither, unserved or
failing; whether DRA is served, at which version (each optional kind's: `optional`),
which versions discovery lists; last event and sync; error; counters, resourceVersion resets,
malformed objects and stalled streams per kind) and pushes it to its `StatusSink` on every
state change, at most about once a second for counters alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Iterable, Sequence

import msgspec

from dra_mirror.service.clusters.config import ClusterConnection
from dra_mirror.service.clusters.discovery import DraVersions
from dra_mirror.service.clusters.errors import NotServed, WatchStalled
from dra_mirror.service.clusters.failures import FailureLog
from dra_mirror.service.clusters.resets import ClusterResets
from dra_mirror.service.clusters.resources import is_dra
from dra_mirror.service.clusters.transport import ClusterApi
from dra_mirror.service.clusters.watching import (
    Bookmarked,
    Connected,
    Failed,
    KindWatcher,
    Listed,
    Observed,
    Silent,
    Skipped,
    WatchMessage,
)
from dra_mirror.service.model.index import ClusterIndex, Event
from dra_mirror.service.model.kinds import KINDS, OPTIONAL
from dra_mirror.service.reactor.clock import Clock, Sleep, rfc3339, utc_now
from dra_mirror.service.reactor.connection import ClusterConnectionState
from dra_mirror.service.reactor.delivery import Delivery, SeedSource
from dra_mirror.service.reactor.feed import CLOSED, ClusterFeed
from dra_mirror.service.reactor.malformed import MalformedObjects
from dra_mirror.service.reactor.settings import ReactorSettings
from dra_mirror.service.stores.protocols import ChangeSink, ClusterStatus, StatusSink

log = logging.getLogger(__name__)


class Reactor(ClusterConnectionState):
    """Watches one cluster and feeds its changes to the sinks; see the module docstring."""

    def __init__(
        self,
        connection: ClusterConnection,
        *,
        index: ClusterIndex,
        sinks: Sequence[ChangeSink],
        status_sink: StatusSink,
        seed_from: SeedSource | None = None,
        settings: ReactorSettings | None = None,
        clock: Clock = utc_now,
        sleep: Sleep = asyncio.sleep,
        rng: random.Random | None = None,
        kinds: Iterable[str] = KINDS,
    ) -> None:
        self.name = connection.name
        self.connection = connection
        self.settings = settings or ReactorSettings()
        self.status_sink = status_sink
        self.seed_from = seed_from
        self.clock = clock
        self.sleep = sleep
        self.rng = rng or random.Random()
        self.kinds = tuple(kinds)
        self.index = index
        index.idle_grace = self.settings.idle_grace  # service.model.activity
        self.delivery = Delivery(
            self.name, sinks, sleep=sleep, rng=self.rng, retry_cap=self.settings.sink_retry_cap
        )
        self.status = ClusterStatus(name=self.name)
        self.synced = asyncio.Event()
        self.api = ClusterApi(self.name, connection.api_client)
        self.versions = DraVersions(self.api)
        self.resets = ClusterResets(self.name)  # one reset seen by any kind relists every kind
        self.failures = FailureLog(self.name)  # one log line per backoff step, not per kind
        self.feed = ClusterFeed(self.settings.queue_size)
        self.malformed = MalformedObjects(self.name)
        self.watchers = {
            kind: KindWatcher(
                kind,
                api=self.api,
                versions=self.versions,
                emit=self.feed.emit,
                sleep=sleep,
                settings=self.settings.watch,
                rng=self.rng,
                resets=self.resets,
                failures=self.failures,
            )
            for kind in self.kinds
        }
        self._pending: list[Event] = []
        self._pending_version = ""
        self.listed: set[str] = set()  # kinds listed at least once
        self._unserved: set[str] = set()
        self._failing: dict[str, str] = {}
        self._up: set[str] = set()
        self._silent: dict[str, float] = {}  # kind -> seconds its stream was silent, when noticed
        self._watching = False  # every stream up (what gaps follow; silence is no gap)
        self._disconnected_at: str | None = None
        self._gaps: list[tuple[str, str]] = []
        self._status_due = True
        self._status_pushed_at = float("-inf")
        self._watched_at = float("-inf")
        self._watch_tasks: list[asyncio.Task[None]] = []
        self._consumer: asyncio.Task[None] | None = None
        self._log = {"cluster": self.name}
        self.errors: dict[str, int] = {}  # kind -> failed list/watch attempts (for /metrics)

    # --- lifecycle ----------------------------------------------------------------------

    def start(self) -> None:
        """Start the consumer and one watcher task per kind (needs a running loop)."""
        if self._consumer is not None:
            return
        self._consumer = asyncio.create_task(self._consume(), name=f"reactor {self.name}")
        for kind, watcher in self.watchers.items():
            task = asyncio.create_task(watcher.run(), name=f"watch {self.name} {kind}")
            self._watch_tasks.append(task)

    async def stop(self) -> None:
        """Cancel the watches, apply what they already delivered, push the last status."""
        for task in self._watch_tasks:
            task.cancel()
        await asyncio.gather(*self._watch_tasks, return_exceptions=True)
        self._watch_tasks.clear()
        consumer, self._consumer = self._consumer, None
        if consumer is None:
            return
        if not consumer.done():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.settings.stop_grace):
                    await self.feed.close()
                    await asyncio.shield(consumer)
        if not consumer.done():
            log.warning("sinks did not take the last batch in time; dropping it", extra=self._log)
            consumer.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            error = await asyncio.gather(consumer, return_exceptions=True)
            if error and isinstance(error[0], Exception):
                log.error("reactor failed", exc_info=error[0], extra=self._log)
        if self._watching and consumer.done() and not consumer.cancelled():
            # Watched up to here, every batch delivered: a stop is not a gap.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.settings.stop_grace):
                    await self.delivery.watched(self._at())
        self.status.connected = False
        await self.push_status(force=True)

    # --- the consumer ---------------------------------------------------------------------

    async def _consume(self) -> None:
        loop = asyncio.get_running_loop()
        # A new index starts watching: history closes what it left open before.
        await self.delivery.started(self._at())
        if self.seed_from is not None:
            seed = await self.delivery.seed(self.seed_from)
            if seed is not None:
                self.index.seed(seed, at=self._at())
                log.info("index seeded with %d objects the store held", len(seed.records),
                         extra=self._log)  # fmt: skip
                if set(self.kinds) <= seed.listed:
                    # An earlier holder synced every kind: what the store serves is whole, if
                    # not current (not connected until the watches open; the relists follow).
                    self.status.synced = True
                    self._status_pushed_at = float("-inf")
                    self._status_due = True
        try:
            while True:
                message = await self.feed.take(self._wait())
                if message is CLOSED:
                    break
                if message is not None:
                    await self._handle(message)
                await self._tick()
                deadline = loop.time() + self.settings.batch_max_delay
                while self._pending and len(self._pending) < self.settings.batch_max_events:
                    remaining = deadline - loop.time()
                    if remaining <= 0:
                        break
                    message = await self.feed.take(remaining)
                    if message is None:
                        break
                    if message is CLOSED:
                        await self._flush()
                        return
                    await self._handle(message)
                await self._flush()
                await self.push_status()
        finally:
            self.feed.abandon()
        await self._flush()

    def _wait(self) -> float | None:
        """How long to wait for a message: until a held status is due, or until the first
        starting pod's idle grace runs out (None: until a message comes)."""
        waits = [w for w in (self._status_wait(), self._tick_wait()) if w is not None]
        return min(waits, default=None)

    def _tick_wait(self) -> float | None:
        ends = self.index.next_tick()
        if ends is None:
            return None
        return max(0.0, ends - self.clock().timestamp())

    async def _tick(self) -> None:
        """A starting pod's grace ran out with no event: its claim is idle from now."""
        ends = self.index.next_tick()
        if ends is None or ends > self.clock().timestamp():
            return
        await self._flush()
        await self.delivery.changes(self.index.tick(at=self._at()))

    def _status_wait(self) -> float | None:
        # Wake up in time to push a status whose push was held back by the interval.
        if not self._status_due:
            return None
        loop = asyncio.get_running_loop()
        return max(0.0, self._status_pushed_at + self.settings.status_interval - loop.time())

    async def _handle(self, message: WatchMessage) -> None:
        try:
            await self._react(message)
            while self._gaps:
                await self.delivery.gap(*self._gaps.pop(0))
        except Exception:  # a bug must not stop the cluster's mirror: log it, go on
            log.exception(
                "failed to handle %s",
                type(message).__name__,
                extra={**self._log, "kind": message.kind},
            )

    async def _react(self, message: WatchMessage) -> None:
        kind = message.kind
        if isinstance(message, Observed):
            self._pending.append(message.event)
            self._pending_version = message.resource_version or self._pending_version
            self._mark_up(kind)
        elif isinstance(message, Listed):
            await self._flush()  # events queued before the list came first
            changes = self.index.resync(
                kind, message.records, at=self._at(), resource_version=message.resource_version
            )
            if kind in self.listed:
                self.status.relists += 1
                log.info(
                    "relisted %d objects", len(message.records), extra={**self._log, "kind": kind}
                )
            self.listed.add(kind)
            self._unserved.discard(kind)
            self._served_at(kind, message.api_version)
            self.status.last_sync_at = rfc3339(self.clock())
            self._status_due = True
            self._mark_up(kind)
            await self.delivery.changes(changes)
            self._check_synced()
        elif isinstance(message, Skipped):
            self._skip(message)
        elif isinstance(message, Silent):
            # Missed its bookmark deadline: what the kind serves may be stale (a stream from
            # a position the server never reached is silent) until it is heard again.
            self._silent[kind] = message.seconds
            self._refresh_connection()
        elif isinstance(message, Connected | Bookmarked):
            if isinstance(message, Connected):
                self._served_at(kind, message.api_version)  # follows a cluster upgrade
            self._mark_up(kind)
            if isinstance(message, Bookmarked):
                await self._watched()
        elif isinstance(message, Failed):
            self._up.discard(kind)
            self._silent.pop(kind, None)
            unserved = isinstance(message.error, NotServed)
            if unserved and kind in OPTIONAL:  # mirrored without it: not an error
                self._failing.pop(kind, None)
                self._unserved.add(kind)
                self._optional_version(kind, None)
            else:
                self.errors[kind] = self.errors.get(kind, 0) + 1
                if isinstance(message.error, WatchStalled):
                    self.status.stalls[kind] = self.status.stalls.get(kind, 0) + 1
                self._failing[kind] = message.error.detail()
            if unserved and is_dra(kind) and kind not in OPTIONAL | self.listed:
                self._dra(served=False)
                self._unserved.add(kind)
            self._check_synced()
            # a stream that was silent before it failed (a stall, a reset found on a silent
            # stream) may have missed changes since it was last heard: the gap starts there
            self._refresh_connection(silent_for=message.silent_for)

    async def _watched(self) -> None:
        """A quiet cluster is still watched: say until when (every watch up, all delivered)."""
        now = asyncio.get_running_loop().time()
        if not self._watching or now - self._watched_at < self.settings.watched_interval:
            return
        self._watched_at = now
        await self._flush()
        await self.delivery.watched(self._at())

    def _skip(self, message: Skipped) -> None:
        if self.malformed.report(message.kind, message.malformed, message.resource_version):
            self.status.malformed = dict(self.malformed.counts)
            self._status_due = True

    async def _flush(self) -> None:
        if not self._pending:
            return
        events, self._pending = self._pending, []
        at = self._at()
        self.status.events += len(events)
        self.status.last_event_at = at
        self._status_due = True
        try:
            changes = self.index.apply(events, at=at, resource_version=self._pending_version)
        except Exception:  # a bug in the model: keep every event it can take, skip the rest
            log.exception("index failed on a batch; applying it event by event", extra=self._log)
            for event in events:
                try:
                    changes = self.index.apply(
                        [event], at=at, resource_version=self._pending_version
                    )
                except Exception:
                    log.exception("index failed on %s; skipped", event.type, extra=self._log)
                    continue
                await self.delivery.changes(changes)
            return
        await self.delivery.changes(changes)

    async def push_status(self, *, force: bool = False) -> None:
        loop = asyncio.get_running_loop()
        now = loop.time()
        if not force and (
            not self._status_due or now - self._status_pushed_at < self.settings.status_interval
        ):
            return
        self._status_due = False
        self._status_pushed_at = now
        self.status.resets = self.resets.generation
        snapshot = msgspec.structs.replace(
            self.status, malformed=dict(self.status.malformed), stalls=dict(self.status.stalls)
        )
        try:
            await self.status_sink.set_status(snapshot)
        except Exception as error:  # the next push carries the same facts
            log.warning("status push failed: %s", error, extra=self._log)
            self._status_due = True
