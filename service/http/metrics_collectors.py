"""What `/metrics` reads from the process at scrape time: its reactors' cluster statuses and
its history writer's counters (prometheus-client collectors; they cannot await, so they read
only in-process values).

Each cluster is reported by the process watching it (`source.reactors.by_name`): the
embedded or all-in-one server for every cluster, a leased watcher for the clusters whose lease
it holds. `service.http.metrics` registers these collectors in its app's registry.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from dra_mirror.service.http.watchers import Watchers
from dra_mirror.service.stores.protocols import StateReader

if TYPE_CHECKING:  # SQLAlchemy loads only when a history database is configured
    from dra_mirror.service.history.runtime import History


class MetricsSource(Protocol):
    """What the app shares with its routes (`service.http.state.AppState`)."""

    @property
    def store(self) -> StateReader: ...

    @property
    def reactors(self) -> Watchers | None: ...

    @property
    def history(self) -> History | None: ...

    @property
    def now(self) -> Callable[[], datetime]: ...

    @property
    def scope_for(self) -> Callable[[Any], Any]: ...  # a request's access scope


def _timestamp(text: str | None) -> float | None:
    if not text:
        return None
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        return None


class WatchCollector:
    """Per-cluster watch figures, read from the reactors' `ClusterStatus` at scrape time."""

    def __init__(self, source: MetricsSource) -> None:
        self.source = source

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        watchers = self.source.reactors
        reactors = watchers.by_name if watchers is not None else {}
        now = self.source.now().timestamp()
        per_cluster = ["cluster"]
        per_kind = ["cluster", "kind"]
        events = CounterMetricFamily(
            "dra_mirror_watch_events", "Watch events applied.", labels=per_cluster
        )
        relists = CounterMetricFamily(
            "dra_mirror_watch_relists", "Lists after the first one of a kind.", labels=per_cluster
        )
        errors = CounterMetricFamily(
            "dra_mirror_watch_errors", "Failed list or watch attempts.", labels=per_kind
        )
        malformed = CounterMetricFamily(
            "dra_mirror_malformed_objects", "Objects skipped as malformed.", labels=per_kind
        )
        stalls = CounterMetricFamily(
            "dra_mirror_watch_stalls",
            "Watch streams ended because they stayed silent (no event, no bookmark).",
            labels=per_kind,
        )
        resets = CounterMetricFamily(
            "dra_mirror_watch_resets",
            "resourceVersion resets seen (each relists every kind of the cluster).",
            labels=per_cluster,
        )
        connected = GaugeMetricFamily(
            "dra_mirror_cluster_connected", "1 while the watches are up.", labels=per_cluster
        )
        synced = GaugeMetricFamily(
            "dra_mirror_cluster_synced", "1 once every kind was listed.", labels=per_cluster
        )
        last_event = GaugeMetricFamily(
            "dra_mirror_cluster_last_event_timestamp_seconds",
            "When the last watch event was applied (Unix time).",
            labels=per_cluster,
        )
        last_sync = GaugeMetricFamily(
            "dra_mirror_cluster_last_sync_timestamp_seconds",
            "When the last complete list was applied (Unix time).",
            labels=per_cluster,
        )
        lag = GaugeMetricFamily(
            "dra_mirror_cluster_lag_seconds",
            "Seconds since the last event or list was applied.",
            labels=per_cluster,
        )
        for name in sorted(reactors):
            reactor = reactors[name]
            status = reactor.status
            events.add_metric([name], status.events)
            relists.add_metric([name], status.relists)
            for kind, count in sorted(reactor.errors.items()):
                errors.add_metric([name, kind], count)
            for kind, count in sorted(status.malformed.items()):
                malformed.add_metric([name, kind], count)
            for kind, count in sorted(status.stalls.items()):
                stalls.add_metric([name, kind], count)
            resets.add_metric([name], status.resets)
            connected.add_metric([name], int(status.connected))
            synced.add_metric([name], int(status.synced))
            event_at = _timestamp(status.last_event_at)
            sync_at = _timestamp(status.last_sync_at)
            if event_at is not None:
                last_event.add_metric([name], event_at)
            if sync_at is not None:
                last_sync.add_metric([name], sync_at)
            newest = max((t for t in (event_at, sync_at) if t is not None), default=None)
            if newest is not None:
                lag.add_metric([name], max(0.0, now - newest))
        yield from (events, relists, errors, malformed, stalls, resets, connected, synced)
        yield from (last_event, last_sync)
        yield lag


class HistoryCollector:
    """The history writer's counters (the backlog is a gauge set by `Metrics.refresh`)."""

    def __init__(self, source: MetricsSource) -> None:
        self.source = source

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        history = self.source.history
        if history is None:
            return
        stats = history.writer.stats
        rows = CounterMetricFamily(
            "dra_mirror_history_rows_written", "Rows written to the history database."
        )
        rows.add_metric([], stats.rows)
        retries = CounterMetricFamily(
            "dra_mirror_history_write_retries", "History writes retried (database unreachable)."
        )
        retries.add_metric([], stats.retries)
        gaps = CounterMetricFamily(
            "dra_mirror_history_gaps",
            "Gaps recorded in the history: spans when a cluster was not watched.",
        )
        gaps.add_metric([], stats.gaps)
        yield from (rows, retries, gaps)
