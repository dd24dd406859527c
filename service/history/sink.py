"""The history sink the reactor calls: every batch and watch hook into the outbox, nothing more.

`HistorySink(outbox)` is a `ChangeSink` (service.stores.protocols). It only encodes and
appends: it never waits for SQL, so state stays current while history drains behind it (a
bounded outbox may make it wait — backpressure, never loss). A `Changes` is kept when it holds
records, transitions or the announcement of a new index's first complete lists (its derived
delta and live events are the state stores' concern); a large one (a LIST) in parts of at most
`ENTRY_ROWS` rows (`outbox.changes_entries`). When an append fails, the reactor hands the same
batch again: the parts already appended are not appended again.

Every entry is appended as the cluster's (`Outbox.append(…, cluster=…)`): a watcher under a
lease hands its token over (`fence`, `unfence`), and a shared outbox then refuses the entries
of a cluster this process no longer holds (`Fenced`, service.history.redis_outbox).
"""

from __future__ import annotations

from dra_mirror.service.history.outbox import (
    ENTRY_ROWS,
    GapEntry,
    Outbox,
    StartedEntry,
    WatchedEntry,
    changes_entries,
    encode_entry,
)
from dra_mirror.service.model.changes import Changes


class HistorySink:
    """A ChangeSink (service.stores.protocols): puts each Changes that holds records or
    transitions into the outbox, and the watch hooks as their own entries."""

    def __init__(self, outbox: Outbox, *, entry_rows: int = ENTRY_ROWS) -> None:
        self.outbox = outbox
        self.entry_rows = entry_rows
        # a Changes appended in part when an append failed: the reactor hands the same batch
        # again (its delivery retries), and the parts already appended are not appended twice
        self._partial: tuple[Changes, int] | None = None

    async def apply(self, changes: Changes) -> None:
        if not (changes.upserts or changes.deletes or changes.transitions or changes.announced):
            return
        done = 0
        if self._partial is not None and self._partial[0] is changes:
            done = self._partial[1]
        self._partial = None
        for part, entry in enumerate(changes_entries(changes, rows=self.entry_rows)):
            if part < done:
                continue
            try:
                await self.outbox.append(encode_entry(entry), cluster=changes.cluster)
            except BaseException:
                self._partial = (changes, part)
                raise

    async def __call__(self, changes: Changes) -> None:
        """The same as `apply`."""
        await self.apply(changes)

    async def record_gap(self, cluster: str, start: str, end: str) -> None:
        """The cluster was not watched from `start` to `end` (RFC 3339), e.g. a watch
        reconnect; the index kept its state, so intervals stay as they are."""
        await self.outbox.append(encode_entry(GapEntry(cluster, start, end)), cluster=cluster)

    async def cluster_started(self, cluster: str, at: str) -> None:
        """This process starts watching `cluster` with an empty index: call before handing
        over its first Changes. Records the gap since history last saw the cluster and
        marks what was left open then as unconfirmed: the new index's first complete lists
        re-announce what is still held (one interval across the handover) and end the rest."""
        await self.outbox.append(encode_entry(StartedEntry(cluster, at)), cluster=cluster)

    async def cluster_watched(self, cluster: str, until: str) -> None:
        """`cluster` was watched until `until` though nothing changed (a bookmark, a lease
        renewal, a clean stop): a later start counts its gap from there."""
        await self.outbox.append(encode_entry(WatchedEntry(cluster, until)), cluster=cluster)

    async def fence(self, cluster: str, token: str) -> None:
        """This process took `cluster`'s lease with `token`: its entries are appended only
        while that is the cluster's fence (an outbox without fencing ignores it)."""
        fence = getattr(self.outbox, "fence", None)
        if fence is not None:
            await fence(cluster, token)

    def unfence(self, cluster: str) -> None:
        """This process lost `cluster`'s lease: what it still appends of it is refused."""
        unfence = getattr(self.outbox, "unfence", None)
        if unfence is not None:
            unfence(cluster)
