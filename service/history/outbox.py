"""The outbox between the reactor and SQL: entries wait here until a batch holding them commits.

An `Outbox` is a small Protocol so that the in-process queue (embedded default, here) and a
Redis stream with a consumer group (production) are interchangeable:

* `append(payload)` stores an encoded entry and returns its id, `"<ms>-<seq>"` as Redis stream
  ids are, increasing along the outbox;
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
JSON, so the writer never decodes them), a gap, or "watch started".
"""

from __future__ import annotations

import asyncio
import uuid
from collections import OrderedDict
from collections.abc import Sequence
from typing import Protocol

import msgspec

from service.model.changes import Changes, Transition
from service.model.records import KIND_OF, Record


class Version(msgspec.Struct, array_like=True):
    """One object version, its record already encoded (msgspec JSON): the writer stores the
    body as it is, never decoding the record."""

    kind: str
    namespace: str
    name: str
    uid: str
    resource_version: str
    deleted: bool
    body: bytes


class ChangesEntry(msgspec.Struct, tag="changes"):
    """What history keeps of one `Changes`: its object versions and its transitions."""

    cluster: str
    at: str
    versions: list[Version]
    transitions: list[Transition]

    @classmethod
    def of(cls, changes: Changes) -> ChangesEntry:
        versions = [_version(record, False) for record in changes.upserts] + [
            _version(record, True) for record in changes.deletes
        ]
        return cls(changes.cluster, changes.at, versions, changes.transitions)


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


OutboxEntry = ChangesEntry | GapEntry | StartedEntry

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

    async def append(self, payload: bytes) -> str: ...

    async def read(self, count: int, block: float) -> list[tuple[str, bytes]]: ...

    async def pending(self, count: int) -> list[tuple[str, bytes]]: ...

    async def ack(self, ids: Sequence[str]) -> None: ...

    async def backlog(self) -> int:
        """Entries appended and not yet acknowledged."""
        ...


class MemoryOutbox:
    """The in-process outbox: an ordered map of unacknowledged entries.

    `max_entries` (None: unbounded) makes `append` wait while that many entries are
    unacknowledged — backpressure on the reactor instead of unbounded memory during a long
    SQL outage. Entries are lost with the process; the next start records a gap instead.
    """

    def __init__(self, *, max_entries: int | None = None, name: str | None = None) -> None:
        self.name = name or f"memory-{uuid.uuid4()}"
        self._entries: OrderedDict[str, bytes] = OrderedDict()
        self._handed_out: set[str] = set()
        self._next = 0
        self._max = max_entries
        self._changed = asyncio.Condition()

    async def append(self, payload: bytes) -> str:
        async with self._changed:
            if self._max is not None:
                await self._changed.wait_for(lambda: len(self._entries) < self._max)
            self._next += 1
            entry_id = f"{self._next}-0"
            self._entries[entry_id] = payload
            self._changed.notify_all()
            return entry_id

    def _fresh(self, count: int) -> list[tuple[str, bytes]]:
        fresh = []
        for entry_id, payload in self._entries.items():
            if entry_id not in self._handed_out:
                fresh.append((entry_id, payload))
                if len(fresh) >= count:
                    break
        return fresh

    async def read(self, count: int, block: float) -> list[tuple[str, bytes]]:
        async with self._changed:
            if len(self._handed_out) >= len(self._entries):
                try:
                    async with asyncio.timeout(block):  # never wait_for: see redis_calls.py
                        await self._changed.wait_for(
                            lambda: len(self._handed_out) < len(self._entries)
                        )
                except TimeoutError:
                    return []
            fresh = self._fresh(count)
            self._handed_out.update(entry_id for entry_id, _ in fresh)
            return fresh

    async def pending(self, count: int) -> list[tuple[str, bytes]]:
        out = []
        for entry_id, payload in self._entries.items():
            if entry_id in self._handed_out:
                out.append((entry_id, payload))
                if len(out) >= count:
                    break
        return out

    async def ack(self, ids: Sequence[str]) -> None:
        async with self._changed:
            for entry_id in ids:
                self._entries.pop(entry_id, None)
                self._handed_out.discard(entry_id)
            self._changed.notify_all()

    async def backlog(self) -> int:
        return len(self._entries)
