"""Reading the outbox into batches of bounded size, for the history writer (`writer.py`).

`Gatherer.gather()` returns the next batch's entries, decoded, in outbox order:

* it waits up to half a second for a first entry, then takes what comes within `linger`
  seconds, until the batch holds `batch_rows` rows (object versions + transitions) or
  `batch_entries` entries;
* a batch never holds more than `max_batch_bytes` of encoded entries: the entry that crosses
  it is the batch's last, and the entries read after it wait, undecoded, for the next batch
  (they are handed out by the outbox but not acknowledged: a crash replays them, as any
  other);
* the next read asks for about `max_batch_bytes` of entries (from the mean size of the
  entries read last), so a backlog of large entries (an initial sync's LISTs, in parts of
  `outbox.ENTRY_ROWS`) is never read whole, while small entries are read `batch_entries` at
  a time;
* an entry that cannot be decoded is counted (`stats.rejected`), logged and kept as None
  (acknowledged with its batch, never written).

Each entry is decoded once, when it joins a batch. Decoding yields to the event loop every
`SLICE` entries or `YIELD_BYTES` of them, so the commit running beside it gets
the loop back as soon as its SQL answers.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass

import msgspec

from dra_mirror.service.history.options import WriterOptions, WriterStats
from dra_mirror.service.history.outbox import (
    ChangesEntry,
    Outbox,
    OutboxEntry,
    decode_entry,
    entry_order,
)
from dra_mirror.service.history.preparing import Prepared

log = logging.getLogger(__name__)

SLICE = 50  # entries decoded or prepared between two yields to the event loop
YIELD_BYTES = 2**20  # ... or this many bytes of entries decoded

Decoded = list[tuple[str, OutboxEntry | None]]


@dataclass
class Batch:
    """Outbox entries taken together: every id (acknowledged once the batch committed), the
    decodable entries newer than the committed position, and those entries prepared."""

    ids: list[str]
    fresh: list[tuple[str, OutboxEntry]]
    prepared: Prepared
    decodable: int = -1
    oldest: tuple[int, int] = (0, 0)  # order of the oldest fresh entry
    newest: str = ""  # id of the newest fresh entry: the position once committed

    def __post_init__(self) -> None:
        if self.decodable < 0:
            self.decodable = len(self.fresh)
        if self.fresh:
            orders = [(entry_order(entry_id), entry_id) for entry_id, _ in self.fresh]
            self.oldest = min(orders)[0]
            self.newest = max(orders)[1]


def rows_of(entry: OutboxEntry | None) -> int:
    if isinstance(entry, ChangesEntry):
        return max(1, len(entry.versions) + len(entry.transitions))
    return 1


class Gatherer:
    """See the module docstring."""

    def __init__(self, outbox: Outbox, options: WriterOptions, stats: WriterStats) -> None:
        self.outbox = outbox
        self.options = options
        self.stats = stats
        self.carry: list[tuple[str, bytes]] = []  # read, not yet in a batch
        self._read_count = options.batch_entries

    def _decode(self, entry_id: str, payload: bytes) -> OutboxEntry | None:
        """One entry; one that cannot be decoded is counted, logged and later skipped (None)."""
        try:
            return decode_entry(payload)
        except msgspec.DecodeError as error:
            self.stats.rejected += 1
            log.error("history outbox entry %s cannot be decoded, skipped: %s", entry_id, error)
            return None

    async def decode_until(
        self, raw: Sequence[tuple[str, bytes]], into: Decoded, size: tuple[int, int]
    ) -> tuple[int, int]:
        """Decode `raw` into `into` until the batch holds `max_batch_bytes` of encoded entries;
        the entries after that go to `carry`, undecoded (each entry is decoded once: an
        initial sync's entries are megabytes each). `size` and the result: the batch's (rows,
        bytes). Sets the next read's count from the mean size of these entries."""
        limit = self.options.max_batch_bytes
        rows, held = size
        taken = since_yield = 0
        for entry_id, payload in raw:
            if taken and (taken % SLICE == 0 or since_yield >= YIELD_BYTES):
                await asyncio.sleep(0)
                since_yield = 0
            entry = self._decode(entry_id, payload)
            into.append((entry_id, entry))
            rows += rows_of(entry)
            held += len(payload)
            since_yield += len(payload)
            taken += 1
            if held >= limit:
                break
        if taken < len(raw):
            self.carry = list(raw[taken:]) + self.carry
        if taken:
            mean = max(1, sum(len(payload) for _, payload in raw[:taken]) // taken)
            self._read_count = max(1, min(self.options.batch_entries, limit // mean))
        return rows, held

    async def _take(self, count: int, block: float) -> list[tuple[str, bytes]]:
        if self.carry:
            carried, self.carry = self.carry, []
            return carried
        return await self.outbox.read(max(1, min(count, self._read_count)), block=block)

    async def gather(self) -> Decoded:
        """The next batch's entries (empty: nothing came within half a second)."""
        options = self.options
        batch: Decoded = []
        size = await self.decode_until(await self._take(options.batch_entries, 0.5), batch, (0, 0))
        if not batch:
            return batch
        deadline = time.monotonic() + options.linger
        while (
            size[0] < options.batch_rows
            and size[1] < options.max_batch_bytes
            and len(batch) < options.batch_entries
            and not self.carry
        ):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            more = await self._take(options.batch_entries - len(batch), remaining)
            if not more:
                break
            size = await self.decode_until(more, batch, size)
        return batch
