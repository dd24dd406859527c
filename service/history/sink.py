"""The history sink the reactor calls: every batch and watch hook into the outbox, nothing more.

`HistorySink(outbox)` is a `ChangeSink` (service.stores.protocols). It only encodes and
appends: it never waits for SQL, so state stays current while history drains behind it (a
bounded outbox may make it wait — backpressure, never loss). A `Changes` is kept when it holds
records, transitions or the announcement of a new index's first complete lists (its derived
delta and live events are the state stores' concern).
"""

from __future__ import annotations

from dra_mirror.service.history.outbox import (
    ChangesEntry,
    GapEntry,
    Outbox,
    StartedEntry,
    WatchedEntry,
    encode_entry,
)
from dra_mirror.service.model.changes import Changes


class HistorySink:
    """A ChangeSink (service.stores.protocols): puts each Changes that holds records or
    transitions into the outbox, and the watch hooks as their own entries."""

    def __init__(self, outbox: Outbox) -> None:
        self.outbox = outbox

    async def apply(self, changes: Changes) -> None:
        if changes.upserts or changes.deletes or changes.transitions or changes.announced:
            await self.outbox.append(encode_entry(ChangesEntry.of(changes)))

    async def __call__(self, changes: Changes) -> None:
        """The same as `apply`."""
        await self.apply(changes)

    async def record_gap(self, cluster: str, start: str, end: str) -> None:
        """The cluster was not watched from `start` to `end` (RFC 3339), e.g. a watch
        reconnect; the index kept its state, so intervals stay as they are."""
        await self.outbox.append(encode_entry(GapEntry(cluster, start, end)))

    async def cluster_started(self, cluster: str, at: str) -> None:
        """This process starts watching `cluster` with an empty index: call before handing
        over its first Changes. Records the gap since history last saw the cluster and
        marks what was left open then as unconfirmed: the new index's first complete lists
        re-announce what is still held (one interval across the handover) and end the rest."""
        await self.outbox.append(encode_entry(StartedEntry(cluster, at)))

    async def cluster_watched(self, cluster: str, until: str) -> None:
        """`cluster` was watched until `until` though nothing changed (a bookmark, a lease
        renewal, a clean stop): a later start counts its gap from there."""
        await self.outbox.append(encode_entry(WatchedEntry(cluster, until)))
