"""The pure half of recording a batch: outbox entries into segments, with no database.

`prepare(entries)` turns consecutive Changes entries into a `Segment` — their object versions
as row tuples (`VERSION_COLUMNS` order), the newest instant per cluster, their transitions in
order, what they announce complete — and passes gap/started/watched entries through in place.
It is pure and the costliest step after decoding, so the writer prepares the next batch while
SQL works on the current one (`service.history.recording.BatchRecorder` writes them).
`months_needed` names the monthly partitions a prepared batch may write into.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from dra_mirror.service.history import partitions
from dra_mirror.service.history.models import PARTITIONED
from dra_mirror.service.history.outbox import (
    ChangesEntry,
    GapEntry,
    OutboxEntry,
    StartedEntry,
    WatchedEntry,
)
from dra_mirror.service.history.times import to_us
from dra_mirror.service.model.changes import Transition

VERSION_COLUMNS = ("cluster", "kind", "namespace", "name", "uid", "resource_version",
                   "observed_us", "deleted", "body")  # fmt: skip


@dataclass
class Segment:
    """A run of consecutive Changes entries, prepared without the database: their object
    versions as rows (tuples in VERSION_COLUMNS order), the newest instant per cluster, and
    their transitions in order. A segment ends with the entry that announces fact groups
    complete (`announced`: (cluster, groups)), settled after its transitions."""

    versions: list[tuple[Any, ...]] = field(default_factory=list)
    marks: dict[str, int] = field(default_factory=dict)
    transitions: list[Transition] = field(default_factory=list)
    first_us: int | None = None  # earliest instant written (a version or a transition)
    last_us: int | None = None
    # versions of entries that reconcile a complete LIST: stored possibly long before
    listed: set[tuple[str, str, str, bool]] = field(default_factory=set)

    def saw(self, us: int) -> None:
        if self.first_us is None or us < self.first_us:
            self.first_us = us
        if self.last_us is None or us > self.last_us:
            self.last_us = us

    announced: list[tuple[str, tuple[str, ...], str]] = field(default_factory=list)


Prepared = list[Segment | GapEntry | StartedEntry | WatchedEntry]


def prepare(entries: Iterable[OutboxEntry], into: Prepared | None = None) -> Prepared:
    """Everything about a batch that needs no database (decoding aside, the costliest part):
    pure, so the writer prepares the next batch while SQL works on the current one. With
    `into`, the entries continue what was prepared there (a batch prepared in slices)."""
    prepared: Prepared = [] if into is None else into
    segment = prepared[-1] if prepared and isinstance(prepared[-1], Segment) else None
    for entry in entries:
        if not isinstance(entry, ChangesEntry):
            prepared.append(entry)
            segment = None
            continue
        if segment is None:
            segment = Segment()
            prepared.append(segment)
        cluster = entry.cluster
        observed = to_us(entry.at)
        for v in entry.versions:
            segment.versions.append(
                (cluster, v.kind, v.namespace, v.name, v.uid, v.resource_version, observed,
                 v.deleted, v.body.decode())
            )  # fmt: skip
            if entry.listed:
                segment.listed.add((cluster, v.uid, v.resource_version, v.deleted))
        if observed > segment.marks.get(cluster, -1):
            segment.marks[cluster] = observed
        segment.saw(observed)
        for tr in entry.transitions:
            segment.saw(to_us(tr.at))
        segment.transitions.extend(entry.transitions)
        if entry.announced:
            segment.announced.append((cluster, entry.announced, entry.at))
            segment = None
    return prepared


def months_needed(prepared: Prepared) -> dict[str, set[partitions.Month]]:
    """The months of the partitioned tables a prepared batch may write rows into."""
    months: set[partitions.Month] = set()
    for part in prepared:
        if isinstance(part, Segment) and part.first_us is not None and part.last_us is not None:
            months |= partitions.months_between(part.first_us, part.last_us)
    return dict.fromkeys(PARTITIONED, months) if months else {}
