"""How a cluster's reactor batches, reports and stops (`ReactorSettings`), apart from the
reactor so that the composition root and the tests can tune it without importing the loop."""

from __future__ import annotations

from dataclasses import dataclass, field

from dra_mirror.service.clusters.watching import WatchSettings
from dra_mirror.service.model.activity import DEFAULT_GRACE


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
    sink_retry_cap: float = 5.0
    """Longest wait between retries of a sink whose backend is down, seconds: once it answers
    again, the held batches land at most this much later (a retry costs one connection
    attempt; at 30 s, history after a 5 s Redis crash started up to 33 s late)."""
    stop_grace: float = 10.0
    """How long `stop()` waits for the last batch to reach the sinks, seconds."""
    watched_interval: float = 15.0  # a quiet cluster's "watched until" at most this often
    idle_grace: float = DEFAULT_GRACE
    """Seconds a scheduled, Pending consumer pod keeps its claim from idleness (the index's
    `idle_grace`; the reactor ticks the index when a grace runs out without an event)."""
    watch: WatchSettings = field(default_factory=WatchSettings)
    """The watchers' settings."""
