"""The outbox between the reactor and SQL: entries wait here until a batch holding them commits.

An `Outbox` is a small Protocol so that the in-process queue (embedded default, here) and a
Redis stream with a consumer group (production) are interchangeable:

* `append(payload, cluster=...)` stores an encoded entry of `cluster` and returns its id,
  `"<ms>-<seq>"` as Redis stream ids are, increasing along the outbox (a shared outbox may
  refuse an entry of a cluster this process no longer holds: `Fenced`, service.history.
  redis_outbox);
* `read(count, block)` hands out entries not handed out before, waiting up to `block`
  seconds for the first (XREADGROUP `>`);
* `pending(count)` hands out again entries handed out but never acknowledged — what a
  restarted writer resumes from (XREADGROUP `0`);
* `ack(ids)` forgets entries whose batch committed (XACK + XDEL).

Delivery is at least once; the writer makes replays harmless (unique keys in SQL, and the last
committed id per `name` kept in `outbox_positions`). `name` must identify the outbox across
restarts: a Redis stream key; for the in-process queue a fresh name per process, since its
entries (and ids) die with it.

Entries (`OutboxEntry`) are msgspec msgpack: a `Changes` batch (its records pre-encoded as
JSON, so the writer never decodes them; a large one in parts of at most `ENTRY_ROWS` versions
or transitions, `changes_entries`), a gap, "watch started", or "watched until".
"""

from __future__ import annotations

import asyncio
import uuid
from collections import OrderedDict, deque
from collections.abc import Iterator, Sequence
from itertools import chain, islice
from typing import Protocol

import msgspec

from dra_mirror.service.model.changes import Changes, Transition
from dra_mirror.service.model.records import KIND_OF, Record


class Version(msgspec.Struct, array_like=True, gc=False):
    """One object version, its record already encoded (msgspec JSON): the writer stores the
    body as it is, never decoding the record."""

    kind: str
    namespace: str
    name: str
    uid: str
    resource_version: str
    deleted: bool
    body: bytes


class ChangesEntry(msgspec.Struct, tag="changes", gc=False):
    """What history keeps of one `Changes`: its object versions and its transitions."""

    cluster: str
    at: str
    # tuples, not lists: a decoded entry then holds no container the garbage collector must
    # keep tracking (Version and Transition are untracked), which keeps a writer draining a
    # backlog out of full collections
    versions: tuple[Version, ...]
    transitions: tuple[Transition, ...]
    # the batch reconciles a complete LIST (Changes.listed_kind): its versions may have been
    # stored long before (a new watch re-announces every object); entries written before
    # this field decode as False
    listed: bool = False
    # the fact groups this batch carries complete for a new index (`Changes.announced`)
    announced: tuple[str, ...] = ()

    @classmethod
    def of(cls, changes: Changes) -> ChangesEntry:
        versions = (*(_version(record, False) for record in changes.upserts),
                    *(_version(record, True) for record in changes.deletes))  # fmt: skip
        return cls(changes.cluster, changes.at, versions, tuple(changes.transitions),
                   changes.listed_kind is not None, changes.announced)  # fmt: skip


ENTRY_ROWS = 2_000
"""The most object versions or transitions one entry carries: a larger `Changes` (a LIST) is
appended as several entries (`changes_entries`), so neither the outbox's payloads nor the
writer's decoded batches hold a whole cluster's LIST at once."""


def changes_entries(changes: Changes, *, rows: int = ENTRY_ROWS) -> Iterator[ChangesEntry]:
    """What history keeps of `changes`, as consecutive entries: one when it holds at most
    `rows` versions and transitions; else its versions `rows` at a time, then its transitions
    `rows` at a time, in order, each with the batch's cluster, time and `listed`. Only the last
    carries `announced`: what a new index did not re-announce is settled once all of its
    LIST is written. Entries are built as they are taken (one chunk's versions at a time)."""
    versions = len(changes.upserts) + len(changes.deletes)
    transitions = changes.transitions
    if versions + len(transitions) <= rows:
        yield ChangesEntry.of(changes)
        return
    listed = changes.listed_kind is not None
    version_parts = -(-versions // rows)
    parts = version_parts + -(-len(transitions) // rows)
    records = chain(((r, False) for r in changes.upserts), ((r, True) for r in changes.deletes))
    for part in range(parts):
        announced = changes.announced if part == parts - 1 else ()
        chunk: tuple[Version, ...] = ()
        moved: tuple[Transition, ...] = ()
        if part < version_parts:
            chunk = tuple(_version(record, deleted) for record, deleted in islice(records, rows))
        else:
            start = (part - version_parts) * rows
            moved = tuple(transitions[start : start + rows])
        yield ChangesEntry(changes.cluster, changes.at, chunk, moved, listed, announced)


_json = msgspec.json.Encoder()


def _version(record: Record, deleted: bool) -> Version:
    meta = record.meta
    return Version(KIND_OF[type(record)], meta.namespace, meta.name, meta.uid,
                   meta.resource_version, deleted, _json.encode(record))  # fmt: skip


class GapEntry(msgspec.Struct, tag="gap"):
    """The cluster was not watched from `start` to `end` (RFC 3339)."""

    cluster: str
    start: str
    end: str


class StartedEntry(msgspec.Struct, tag="started"):
    """This process started watching `cluster` at `at` with an empty index."""

    cluster: str
    at: str


class WatchedEntry(msgspec.Struct, tag="watched"):
    """`cluster` was watched, quiet or not, until `until` (a bookmark, a lease renewal, a
    clean stop): history's mark of the cluster moves there even when nothing changed."""

    cluster: str
    until: str


OutboxEntry = ChangesEntry | GapEntry | StartedEntry | WatchedEntry

_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(OutboxEntry)


def encode_entry(entry: OutboxEntry) -> bytes:
    return _encoder.encode(entry)


def decode_entry(payload: bytes) -> OutboxEntry:
    return _decoder.decode(payload)


def entry_order(entry_id: str) -> tuple[int, int]:
    """The sort key of an outbox id (`"<ms>-<seq>"`)."""
    ms, _, seq = entry_id.partition("-")
    return int(ms), int(seq or 0)


class Outbox(Protocol):
    name: str
    durable: bool
    """Entries outlive the process (a Redis stream): shutdown need not wait for SQL."""

    async def append(self, payload: bytes, *, cluster: str | None = None) -> str: ...

    async def read(self, count: int, block: float) -> list[tuple[str, bytes]]: ...

    async def pending(self, count: int) -> list[tuple[str, bytes]]: ...

    async def ack(self, ids: Sequence[str]) -> None: ...

    async def backlog(self) -> int:
        """Entries appended and not yet acknowledged."""
        ...

    async def release(self) -> None:
        """Give up what this process holds of the outbox (a drain lease) at shutdown."""
        ...

    async def close(self) -> None:
        """Release the outbox's connections."""
        ...


class MemoryOutbox:
    """The in-process outbox: an ordered map of unacknowledged entries.

    `max_entries` (None: unbounded) makes `append` wait while that many entries are
    unacknowledged — backpressure on the reactor instead of unbounded memory during a long
    SQL outage. Entries are lost with the process; the next start records a gap instead.
    """

    durable = False

    def __init__(self, *, max_entries: int | None = None, name: str | None = None) -> None:
        self.name = name or f"memory-{uuid.uuid4()}"
        self._entries: OrderedDict[str, bytes] = OrderedDict()  # every unacknowledged entry
        self._unread: deque[str] = deque()  # ids never handed out, oldest first
        self._next = 0
        self._max = max_entries
        self._changed = asyncio.Condition()

    async def append(self, payload: bytes, *, cluster: str | None = None) -> str:
        async with self._changed:
            limit = self._max
            if limit is not None:
                await self._changed.wait_for(lambda: len(self._entries) < limit)
            self._next += 1
            entry_id = f"{self._next}-0"
            self._entries[entry_id] = payload
            self._unread.append(entry_id)
            self._changed.notify_all()
            return entry_id

    async def read(self, count: int, block: float) -> list[tuple[str, bytes]]:
        async with self._changed:
            if not self._unread:
                try:
                    async with asyncio.timeout(block):  # never wait_for: see redis_calls.py
                        await self._changed.wait_for(lambda: bool(self._unread))
                except TimeoutError:
                    return []
            fresh: list[tuple[str, bytes]] = []
            while self._unread and len(fresh) < count:
                entry_id = self._unread.popleft()
                payload = self._entries.get(entry_id)
                if payload is not None:  # not acknowledged unread
                    fresh.append((entry_id, payload))
            return fresh

    async def pending(self, count: int) -> list[tuple[str, bytes]]:
        unread = set(self._unread)
        out = []
        for entry_id, payload in self._entries.items():
            if entry_id not in unread:
                out.append((entry_id, payload))
                if len(out) >= count:
                    break
        return out

    async def ack(self, ids: Sequence[str]) -> None:
        async with self._changed:
            for entry_id in ids:
                self._entries.pop(entry_id, None)
            self._changed.notify_all()

    async def backlog(self) -> int:
        return len(self._entries)

    async def release(self) -> None:
        """Nothing to hand over: the entries die with the process."""

    async def close(self) -> None:
        """Nothing to close."""
