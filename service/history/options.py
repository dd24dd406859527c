"""How the history writer batches, retries and keeps house, and what it counts."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class WriterOptions:
    batch_rows: int = 200
    """Write a batch once it holds about this many rows (object versions + transitions)."""
    batch_entries: int = 2000
    """Never take more outbox entries than this into one batch. A backlog (after an outage,
    at start-up) drains in batches this big: each transaction costs a few round trips and a
    commit whatever its size, so draining in batches of 100 is several times slower."""
    max_batch_bytes: int = 4 * 2**20
    """Never take more encoded entries than this into one batch (the entry that crosses it is
    the last): a backlog of large entries (an initial sync's LISTs, in parts of
    `outbox.ENTRY_ROWS`) drains in batches of about this size, so the writer never holds a
    whole LIST decoded, and reads about this much from the outbox at a time."""
    linger: float = 0.1
    """Seconds to wait for more entries before writing a short batch."""
    retry_initial: float = 0.2
    """First delay after a failed batch; doubles per attempt."""
    retry_max: float = 10.0
    """Longest delay between attempts while SQL is unreachable."""
    reject_after: int = 3
    """Attempts before a batch SQL refuses (not unreachable) is split entry by entry."""
    retention_days: float | None = None
    """Drop object versions older than this many days; None keeps them forever."""
    prune_every: float = 3600.0
    """Seconds between partition upkeep and retention runs."""
    warm_days: float | None = None
    """Keep the hourly peak cache of the contention audit filled for the last this many days
    (every grouping), in a background task; None leaves it to the audits."""
    warm_every: float = 600.0
    """Seconds between two fills of the peak cache (only by a writer that committed since)."""


@dataclass
class WriterStats:
    batches: int = 0
    entries: int = 0
    rows: int = 0
    retries: int = 0
    rejected: int = 0
    replayed: int = 0
    pruned: int = 0
    gaps: int = 0  # spans recorded when a cluster was not watched (dra_mirror_history_gaps_total)
    last_error: str | None = None
    position: str | None = None
