"""One task per cluster: watch streams in, batches of `Changes` out to every sink, in order.

A `Reactor` owns one cluster's `ClusterIndex` (the model) and one `KindWatcher` per kind. The
watchers feed a bounded queue (`ClusterFeed`: backpressure when a sink is slow); the reactor
folds events into the index in batches (up to `batch_max_events`, or `batch_max_delay` after
the first) and hands each non-empty `Changes` to every sink in order (state store, history
outbox, live bus). A complete LIST goes to `index.resync` after the events queued before it,
so objects deleted while nobody watched come out as deletes. The model decides what to write.

It keeps the cluster's `ClusterStatus` (connected; synced once every kind was listed or is
known not to be served; resource.k8s.io version; last event and sync; error; events, relists,
malformed objects per kind) and pushes it through `status_sink` on every state change, and
at most about once a second for counters alone. Sinks with the history sink's hooks also get
`cluster_started(cluster, at)` before the first `Changes` and `record_gap(cluster, start,
end)` when the cluster comes back after a disconnection. A sink (or hook) raising `StoreError`
gets the same `Changes` (or hook call) again after a backoff, and nothing after it is handed
out meanwhile (nothing is skipped, order is kept); any other exception is a bug: it is logged
and the batch moves on.

`run_reactors(...)` starts one reactor per connection and returns a `Reactors` group: await
`wait_synced()` (or read `ready`/`not_ready()` for /readyz), then `stop()` (cancels the
watches, then applies what was already received).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import msgspec

from dra_mirror.service.clusters.backoff import Backoff
from dra_mirror.service.clusters.config import ClusterConnection
from dra_mirror.service.clusters.discovery import DraVersions
from dra_mirror.service.clusters.errors import NotServed, WatchStalled
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
    Skipped,
    WatchMessage,
    WatchSettings,
)
from dra_mirror.service.model.changes import Changes
from dra_mirror.service.model.index import ClusterIndex, Event
from dra_mirror.service.model.records import KINDS
from dra_mirror.service.reactor.feed import CLOSED, ClusterFeed
from dra_mirror.service.reactor.heap import SyncGc
from dra_mirror.service.reactor.malformed import MalformedObjects
from dra_mirror.service.stores.protocols import ClusterStatus, StoreError

log = logging.getLogger(__name__)

Sink = Callable[[Changes], Awaitable[None]]
StatusSink = Callable[[ClusterStatus], Awaitable[None]]
Clock = Callable[[], datetime]
Sleep = Callable[[float], Awaitable[None]]


@dataclass(frozen=True)
class ReactorSettings:
    """How a reactor batches and reports."""

    batch_max_events: int = 500
    """Most events folded into one `Changes`."""
    batch_max_delay: float = 0.05
    """Longest wait after a batch's first event before it is applied, seconds."""
    queue_size: int = 10_000
    """Messages the watchers may queue ahead of the reactor before they wait."""
    status_interval: float = 1.0
    """Counters-only status updates are pushed at most this often, seconds."""
    sink_retry_cap: float = 30.0
    """Longest wait between retries of a sink whose backend is down, seconds."""
    stop_grace: float = 10.0
    """How long `stop()` waits for the last batch to reach the sinks, seconds."""
    watch: WatchSettings = field(default_factory=WatchSettings)
    """The watchers' settings."""


def utc_now() -> datetime:
    return datetime.now(UTC)


def rfc3339(moment: datetime) -> str:
    """`2026-11-29T23:49:37.123Z`: UTC, millisecond precision."""
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _as_callable(target: Any, method: str) -> Callable[..., Awaitable[None]]:
    # A store may be passed itself (its `apply`/`set_status` is used) or as a bound method.
    return getattr(target, method, target)


class Reactor:
    """Watches one cluster and feeds its changes to the sinks; see the module docstring."""

    def __init__(
        self,
        connection: ClusterConnection,
        *,
        sinks: Sequence[Sink],
        status_sink: StatusSink,
        settings: ReactorSettings | None = None,
        clock: Clock = utc_now,
        sleep: Sleep = asyncio.sleep,
        rng: random.Random | None = None,
        kinds: Iterable[str] = KINDS,
    ) -> None:
        self.name = connection.name
        self.connection = connection
        self.settings = settings or ReactorSettings()
        self.sinks = [_as_callable(sink, "apply") for sink in sinks]
        self._sink_objects = list(sinks)  # for the optional history hooks (see _hook)
        self.status_sink = _as_callable(status_sink, "set_status")
        self.clock = clock
        self.sleep = sleep
        self.rng = rng or random.Random()
        self.kinds = tuple(kinds)
        self.index = ClusterIndex(self.name)
        self.status = ClusterStatus(name=self.name)
        self.synced = asyncio.Event()
        self.api = ClusterApi(self.name, connection.api_client)
        self.versions = DraVersions(self.api)
        self.resets = ClusterResets(self.name)  # one reset seen by any kind relists every kind
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
            )
            for kind in self.kinds
        }
        self._pending: list[Event] = []
        self._pending_version = ""
        self._listed: set[str] = set()
        self._unserved: set[str] = set()
        self._failing: dict[str, str] = {}
        self._up: set[str] = set()
        self._disconnected_at: str | None = None
        self._gaps: list[tuple[str, str]] = []
        self._status_due = True
        self._status_pushed_at = float("-inf")
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
        self.status.connected = False
        await self._push_status(force=True)

    # --- the consumer ---------------------------------------------------------------------

    async def _consume(self) -> None:
        loop = asyncio.get_running_loop()
        # This process starts from an empty index: history closes what it left open before.
        await self._hook("cluster_started", self.name, self._at())
        try:
            while True:
                message = await self.feed.take(self._status_wait())
                if message is CLOSED:
                    break
                if message is not None:
                    await self._handle(message)
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
                await self._push_status()
        finally:
            self.feed.abandon()
        await self._flush()

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
                start, end = self._gaps.pop(0)
                await self._hook("record_gap", self.name, start, end)
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
            if kind in self._listed:
                self.status.relists += 1
                log.info(
                    "relisted %d objects", len(message.records), extra={**self._log, "kind": kind}
                )
            self._listed.add(kind)
            self._unserved.discard(kind)
            if is_dra(kind):
                self.status.api_version = message.api_version
            self.status.last_sync_at = rfc3339(self.clock())
            self._status_due = True
            self._mark_up(kind)
            await self._deliver(changes)
            self._check_synced()
        elif isinstance(message, Skipped):
            self._skip(message)
        elif isinstance(message, Connected | Bookmarked):
            if isinstance(message, Connected) and is_dra(kind):
                self._status_due |= self.status.api_version != message.api_version
                self.status.api_version = message.api_version  # follows a cluster upgrade
            self._mark_up(kind)
        elif isinstance(message, Failed):
            self.errors[kind] = self.errors.get(kind, 0) + 1
            if isinstance(message.error, WatchStalled):
                self.status.stalls[kind] = self.status.stalls.get(kind, 0) + 1
            self._up.discard(kind)
            self._failing[kind] = message.error.detail()
            if isinstance(message.error, NotServed) and is_dra(kind) and kind not in self._listed:
                self._unserved.add(kind)
                self._check_synced()
            self._refresh_connection()

    def _mark_up(self, kind: str) -> None:
        if kind in self._up and kind not in self._failing:
            return
        self._up.add(kind)
        self._failing.pop(kind, None)
        self._refresh_connection()

    def _refresh_connection(self) -> None:
        errors = sorted(set(self._failing.values()))
        connected = bool(self._up) and all(kind in self._unserved for kind in self._failing)
        # One failure is enough to say what is wrong; the log has every attempt.
        error = (
            errors[0] + (f" (and {len(errors) - 1} more)" if len(errors) > 1 else "")
            if errors
            else None
        )
        if self.status.connected and not connected:
            self._disconnected_at = self._at()
        elif connected and not self.status.connected and self._disconnected_at is not None:
            # Events may have been missed (or arrive late) in between: history marks the gap.
            self._gaps.append((self._disconnected_at, self._at()))
            self._disconnected_at = None
        if (connected, error) != (self.status.connected, self.status.error):
            self.status.connected = connected
            self.status.error = error
            self._status_pushed_at = float("-inf")  # push state changes at once
        self._status_due = True

    def _check_synced(self) -> None:
        if self.synced.is_set():
            return
        if all(kind in self._listed or kind in self._unserved for kind in self.kinds):
            self.status.synced = True
            self.synced.set()
            self._status_pushed_at = float("-inf")
            self._status_due = True
            log.info("synced: every kind listed once", extra=self._log)

    def _skip(self, message: Skipped) -> None:
        if self.malformed.report(message.kind, message.malformed, message.resource_version):
            self.status.malformed = dict(self.malformed.counts)
            self._status_due = True

    def _at(self) -> str:
        return rfc3339(self.clock())

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
                await self._deliver(changes)
            return
        await self._deliver(changes)

    async def _deliver(self, changes: Changes) -> None:
        if not changes:
            return
        what = f"a batch of {len(changes.upserts)} upserts, {len(changes.deletes)} deletes"
        for sink in self.sinks:
            await self._retrying(sink, lambda sink=sink: sink(changes), what)

    async def _hook(self, name: str, *args: str) -> None:
        """Call `name(*args)` on every sink that has it (the history sink's `cluster_started`
        and `record_gap`), under the same rule as a batch: retried while it raises
        `StoreError` (the entry must not be lost, and it must precede the batches after it,
        which wait meanwhile), logged and skipped on any other exception."""
        for sink in self._sink_objects:
            hook = getattr(sink, name, None)
            if hook is None:
                continue
            await self._retrying(sink, lambda hook=hook: hook(*args), f"its {name} hook")

    async def _retrying(self, sink: object, call: Callable[[], Awaitable[None]], what: str) -> None:
        """`await call()` until it does not raise `StoreError`, waiting the backoff between
        attempts (only a stop, which cancels this task, ends the wait); any other exception is
        a bug in the sink: logged once, and `what` is skipped."""
        backoff = Backoff(base=0.5, cap=self.settings.sink_retry_cap, rng=self.rng)
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

    async def _push_status(self, *, force: bool = False) -> None:
        loop = asyncio.get_running_loop()
        now = loop.time()
        if not force and (
            not self._status_due or now - self._status_pushed_at < self.settings.status_interval
        ):
            return
        self._status_due = False
        self._status_pushed_at = now
        snapshot = msgspec.structs.replace(
            self.status, malformed=dict(self.status.malformed), stalls=dict(self.status.stalls)
        )
        try:
            await self.status_sink(snapshot)
        except Exception as error:  # the next push carries the same facts
            log.warning("status push failed: %s", error, extra=self._log)
            self._status_due = True


class Reactors:
    """The reactors of every cluster: readiness, statuses and a clean stop."""

    def __init__(self, reactors: Sequence[Reactor], *, sync_gc: SyncGc | None = None) -> None:
        self.by_name = {reactor.name: reactor for reactor in reactors}
        self._sync_gc = sync_gc
        self._gc_waiter: asyncio.Task[None] | None = None
        if sync_gc is not None:
            self._gc_waiter = asyncio.create_task(self._end_sync_gc(), name="reactors gc")

    async def _end_sync_gc(self) -> None:
        assert self._sync_gc is not None
        try:
            await self.wait_synced()
        except asyncio.CancelledError:
            self._sync_gc.done(freeze=False)
            raise
        self._sync_gc.done()

    def __iter__(self):
        return iter(self.by_name.values())

    @property
    def ready(self) -> bool:
        """Every cluster synced once (for /readyz)."""
        return all(r.synced.is_set() for r in self.by_name.values())

    def not_ready(self) -> list[str]:
        """Why not ready: one line per cluster that has not synced yet."""
        reasons = []
        for reactor in self.by_name.values():
            if reactor.synced.is_set():
                continue
            waiting = [k for k in reactor.kinds if k not in reactor._listed]
            detail = f"; error: {reactor.status.error}" if reactor.status.error else ""
            reasons.append(f"{reactor.name}: not synced (waiting for {', '.join(waiting)}){detail}")
        return reasons

    def statuses(self) -> list[ClusterStatus]:
        return [reactor.status for reactor in self.by_name.values()]

    async def wait_synced(self) -> None:
        """Return once every cluster has synced once."""
        await asyncio.gather(*(r.synced.wait() for r in self.by_name.values()))

    async def stop(self) -> None:
        if self._gc_waiter is not None:
            self._gc_waiter.cancel()
            await asyncio.gather(self._gc_waiter, return_exceptions=True)
        if self._sync_gc is not None:
            # a waiter cancelled before it first ran never reaches its own clean-up
            self._sync_gc.done(freeze=False)
        await asyncio.gather(*(reactor.stop() for reactor in self.by_name.values()))

    async def __aenter__(self) -> Reactors:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()


async def run_reactors(
    connections: Sequence[ClusterConnection],
    *,
    sinks: Sequence[Sink],
    status_sink: StatusSink,
    settings: ReactorSettings | None = None,
    clock: Clock = utc_now,
    sleep: Sleep = asyncio.sleep,
    rng: random.Random | None = None,
    tune_gc: bool = True,
) -> Reactors:
    """Start one reactor per cluster and return them (stop them with `await reactors.stop()`,
    or use the result as an async context manager). `tune_gc`: see `SyncGc`."""
    reactors = [
        Reactor(
            connection,
            sinks=sinks,
            status_sink=status_sink,
            settings=settings,
            clock=clock,
            sleep=sleep,
            rng=rng,
        )
        for connection in connections
    ]
    sync_gc = SyncGc() if tune_gc else None
    for reactor in reactors:
        await reactor._push_status(force=True)
        reactor.start()
    return Reactors(reactors, sync_gc=sync_gc)
