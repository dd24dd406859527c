"""`/metrics`: Prometheus text for one app — watches, stores, the API and the DRA state.

`Metrics(source)` owns a private `CollectorRegistry` (no global prometheus-client state: two apps
in one process, as in the tests, never share a series). `source` is what the app shares with its
routes (`service.http.state.AppState`): `store`, `reactors` (set once the lifespan started them),
`history` and the clock `now`. Series (docs/operations.md, "Metrics", lists every label):

* per watched cluster, read at scrape time from the process's own reactors (so each cluster
  is reported by the one replica watching it): `dra_mirror_watch_events_total`,
  `dra_mirror_watch_relists_total`, `dra_mirror_watch_errors_total{kind}` (failed list/watch
  attempts), `dra_mirror_malformed_objects_total{kind}`, `dra_mirror_watch_stalls_total{kind}`
  (streams ended for silence), `dra_mirror_watch_resets_total` (resourceVersion resets),
  `dra_mirror_cluster_connected`,
  `dra_mirror_cluster_synced`, `dra_mirror_cluster_last_event_timestamp_seconds`,
  `dra_mirror_cluster_last_sync_timestamp_seconds`, `dra_mirror_cluster_lag_seconds` (now -
  the newer of the last event and the last list: staleness, which also grows on a quiet
  cluster);
* stores: `dra_mirror_store_apply_seconds{store="state"|"history"}` (one batch handed to the
  state store, or to the history outbox; `timed_store`/`timed_sink` wrap them),
  `dra_mirror_history_outbox_backlog`, `dra_mirror_history_rows_written_total`,
  `dra_mirror_history_write_retries_total`, `dra_mirror_history_gaps_total` (spans recorded
  when a cluster was not watched);
* API: `dra_mirror_graphql_request_seconds{operation}` and
  `dra_mirror_graphql_errors_total{operation}` (`timed_operation`); operation names are the
  client's, capped at `MAX_OPERATIONS` distinct values (later ones read `other`, unnamed
  ones `anonymous`) so a client cannot blow up the series count;
* the DRA state (`service.http.metrics_dra`), when `dra=True`: computed by `refresh()` before
  each scrape for the clusters this process watches, from its reactors' own indexes (what they
  write to the state store); when it watches none (e.g. a test app over a loaded store),
  for every cluster of the state store, read from it. Rendered as text and
  cached for `dra_ttl` seconds — concurrent scrapes share one computation.
  `dra_mirror_state_snapshot_seconds` is what the last computation cost (reads and text);
* with a utilisation source, `dra_mirror_held_not_busy_devices{cluster,namespace}`
  (`service.http.metrics_busy`).

A scraper whose scope is narrower than every namespace (`scope_for(request)`) gets only the
DRA series its scope may see (`service.http.metrics_scope`), none of the mirror's own.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
import zlib
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4, generate_latest
from starlette.requests import Request
from starlette.responses import Response

from dra_mirror.service.http.metrics_busy import NotBusyGauge
from dra_mirror.service.http.metrics_collectors import (
    HistoryCollector,
    MetricsSource,
    WatchCollector,
)
from dra_mirror.service.http.metrics_dra import DraReader, DraSnapshot, IndexReader
from dra_mirror.service.http.metrics_dra_text import render
from dra_mirror.service.http.metrics_scope import ScopedSeries
from dra_mirror.service.model.changes import Changes
from dra_mirror.service.stores.protocols import ChangeSink, ClusterStatus, StateSink

log = logging.getLogger(__name__)

T = TypeVar("T")

MAX_OPERATIONS = 200
# Labels of unnamed operations kept by their document's text (up to 1,024 texts of 4 KiB)
MAX_LABELLED_DOCUMENTS, MAX_LABELLED_TEXT = 1024, 4096
GZIP_LEVEL = 1  # 25 MB of DRA text: ~5x smaller in ~0.2 s (measured); higher levels cost more CPU
# Seconds: a memory-store batch takes well under a millisecond, a Redis batch a few ms, a
# 40,000-object initial list seconds.
APPLY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
REQUEST_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
_OPERATION = re.compile(r"\b(?:query|mutation|subscription)\s+([_A-Za-z][_0-9A-Za-z]*)")
_NAME = re.compile(r"[_A-Za-z][_0-9A-Za-z]{0,99}")


class Metrics:
    """One app's metrics; see the module docstring."""

    def __init__(
        self,
        source: MetricsSource,
        *,
        dra: bool = True,
        dra_ttl: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.source = source
        self.dra_enabled = dra
        self.dra_ttl = dra_ttl
        self.clock = clock
        self.registry = CollectorRegistry(auto_describe=False)
        self.store_apply = Histogram(
            "dra_mirror_store_apply_seconds",
            "Seconds to hand one batch of changes to a store.",
            ["store"],
            buckets=APPLY_BUCKETS,
            registry=self.registry,
        )
        self.graphql_seconds = Histogram(
            "dra_mirror_graphql_request_seconds",
            "Seconds to answer one GraphQL operation (parse, validate, execute).",
            ["operation"],
            buckets=REQUEST_BUCKETS,
            registry=self.registry,
        )
        self.graphql_errors = Counter(
            "dra_mirror_graphql_errors",
            "GraphQL operations answered with errors.",
            ["operation"],
            registry=self.registry,
        )
        self.backlog = Gauge(
            "dra_mirror_history_outbox_backlog",
            "History outbox entries not yet written to SQL.",
            registry=self.registry,
        )
        self.snapshot_seconds = Gauge(
            "dra_mirror_state_snapshot_seconds",
            "Seconds the last computation of the DRA series took.",
            registry=self.registry,
        )
        self.snapshot_errors = Counter(
            "dra_mirror_state_snapshot_errors",
            "DRA series computations that failed (the state store did not answer).",
            registry=self.registry,
        )
        self.registry.register(WatchCollector(source))
        self.registry.register(HistoryCollector(source))
        self.not_busy = NotBusyGauge(source, self.registry)
        self.dra_text = b""  # the DRA series as of the last computation, rendered
        self._dra_gzip: tuple[bytes, bytes, Any] | None = None  # (text, compressed, compressor)
        self.scoped = ScopedSeries()  # the DRA series of narrower scrapers' scopes
        self._operations: set[str] = set()
        self._labels: dict[str, str] = {}  # label of an unnamed operation, by document text
        self._latencies: dict[str, Any] = {}  # the latency histogram's child by label
        self._dra_at = float("-inf")
        self._dra_lock = asyncio.Lock()

    # --- scraping ---------------------------------------------------------------------------

    async def refresh(self) -> None:
        """Bring the values prometheus-client cannot await up to date (backlog, DRA state)."""
        history = self.source.history
        if history is not None:
            try:
                self.backlog.set(await history.outbox.backlog())
            except Exception as error:  # a Redis outbox that does not answer: keep the last value
                log.warning("metrics: outbox backlog unavailable: %s", error)
        if self.dra_enabled:
            await self._refresh_dra()
        await self.not_busy.refresh()

    async def _refresh_dra(self) -> None:
        async with self._dra_lock:  # scrapes arriving together share one computation
            if self.clock() - self._dra_at < self.dra_ttl:
                return
            started = time.perf_counter()
            try:
                reader, clusters = await self._dra_source()
                snapshot = await DraSnapshot.read(reader, clusters, now=self.source.now())
            except Exception as error:
                # No figures rather than stale ones: a gap in the graph says what happened.
                log.warning("metrics: DRA state unavailable: %s", error)
                self.snapshot_errors.inc()
                snapshot = DraSnapshot()
            self.dra_text = render(snapshot)
            self.snapshot_seconds.set(time.perf_counter() - started)
            self._dra_at = self.clock()

    async def _dra_source(self) -> tuple[DraReader, list[str]]:
        """Where the DRA series come from: a watcher's own indexes of the clusters it watches
        (what it writes to the store, without reading it back), else the state store."""
        watchers = self.source.reactors
        if watchers is not None:
            indexes = {name: reactor.index for name, reactor in watchers.by_name.items()}
            return IndexReader(indexes), list(indexes)
        return self.source.store, [status.name for status in await self.source.store.clusters()]

    async def endpoint(self, request: Request) -> Response:
        """`GET /metrics`: the Prometheus text format, gzipped when the client accepts it (as
        Prometheus does): the DRA series of a 40,000-claim cluster are some 25 MB of text."""
        await self.refresh()
        dra = self.dra_text if self.dra_enabled else b""
        scope = self.source.scope_for(request)
        if scope.may_hide():  # a scraper narrower than every namespace: its own series only
            body = self.scoped.text(dra, scope)
            if "gzip" not in request.headers.get("accept-encoding", ""):
                return Response(body, media_type=CONTENT_TYPE_PLAIN_0_0_4)
            compressor = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, zlib.MAX_WBITS | 16)
            body = compressor.compress(body) + compressor.flush()
            headers = {"content-encoding": "gzip", "vary": "accept-encoding"}
            return Response(body, media_type=CONTENT_TYPE_PLAIN_0_0_4, headers=headers)
        own = generate_latest(self.registry)
        if "gzip" not in request.headers.get("accept-encoding", ""):
            return Response(dra + own, media_type=CONTENT_TYPE_PLAIN_0_0_4)
        if self._dra_gzip is None or self._dra_gzip[0] is not dra:
            # Compress the cached DRA text once; each scrape continues from a copy of that
            # compressor with its own small text, so the answer stays ONE gzip member.
            compressor = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, zlib.MAX_WBITS | 16)
            self._dra_gzip = (dra, compressor.compress(dra), compressor)
        _, head, compressor = self._dra_gzip
        tail = compressor.copy()
        body = head + tail.compress(own) + tail.flush()
        headers = {"content-encoding": "gzip", "vary": "accept-encoding"}
        return Response(body, media_type=CONTENT_TYPE_PLAIN_0_0_4, headers=headers)

    # --- instruments the app wires in ---------------------------------------------------------

    def operation_label(self, operation_name: str | None, query: str | None) -> str:
        name = operation_name
        if not name and query:
            label = self._labels.get(query)
            if label is not None:
                return label
            found = _OPERATION.search(query)
            label = self.operation_label(found.group(1) if found else None, None)
            if len(query) <= MAX_LABELLED_TEXT:
                if len(self._labels) >= MAX_LABELLED_DOCUMENTS:
                    self._labels.clear()  # a client sending ever new texts: start again
                self._labels[query] = label
            return label
        if not name or not _NAME.fullmatch(name):
            return "anonymous"
        if name not in self._operations:
            if len(self._operations) >= MAX_OPERATIONS:
                return "other"
            self._operations.add(name)
        return name

    async def timed_operation(self, request_data: Any, execution: Awaitable[T]) -> T:
        """Await one GraphQL operation's execution, observing its latency and errors."""
        label = self.operation_label(
            getattr(request_data, "operation_name", None), getattr(request_data, "query", None)
        )
        started = time.perf_counter()
        failed = True
        try:
            result = await execution
            failed = bool(getattr(result, "errors", None))
            return result
        finally:
            latency = self._latencies.get(label)
            if latency is None:  # at most MAX_OPERATIONS + 2 labels
                latency = self._latencies[label] = self.graphql_seconds.labels(operation=label)
            latency.observe(time.perf_counter() - started)
            if failed:  # an operation's error series appears with its first error
                self.graphql_errors.labels(operation=label).inc()

    def timed_store(self, store: StateSink) -> TimedStore:
        return TimedStore(store, self.store_apply.labels(store="state").observe)

    def timed_sink(self, sink: ChangeSink) -> TimedSink:
        return TimedSink(sink, self.store_apply.labels(store="history").observe)


class TimedSink:
    """A change sink (the history outbox's) with `apply` timed; its hooks are the sink's."""

    def __init__(self, sink: ChangeSink, observe: Callable[[float], None]) -> None:
        self._sink = sink
        self._observe = observe

    async def apply(self, changes: Changes) -> None:
        started = time.perf_counter()
        try:
            await self._sink.apply(changes)
        finally:
            self._observe(time.perf_counter() - started)

    async def cluster_started(self, cluster: str, at: str) -> None:
        await self._sink.cluster_started(cluster, at)

    async def record_gap(self, cluster: str, start: str, end: str) -> None:
        await self._sink.record_gap(cluster, start, end)

    async def cluster_watched(self, cluster: str, until: str) -> None:
        await self._sink.cluster_watched(cluster, until)

    async def fence(self, cluster: str, token: str) -> None:
        """The sink's fencing under a lease (service.reactor.leased), when it has one."""
        fence = getattr(self._sink, "fence", None)
        if fence is not None:
            await fence(cluster, token)

    def unfence(self, cluster: str) -> None:
        unfence = getattr(self._sink, "unfence", None)
        if unfence is not None:
            unfence(cluster)


class TimedStore(TimedSink):
    """The state store as the reactors write it, with `apply` timed."""

    def __init__(self, store: StateSink, observe: Callable[[float], None]) -> None:
        super().__init__(store, observe)
        self._store = store

    async def set_status(self, status: ClusterStatus) -> None:
        await self._store.set_status(status)
