"""Live events of one cluster read from its Redis stream (`PREFIX:{c}:events`).

The writer appends each batch's live events as one stream entry, inside the batch's
transaction (service.stores.redis_writes), so every API replica reads the same entries in the
same order. A delivery's id is `<entry id>.<n>`: the stream entry (Redis's `ms-seq`) and the
event's place in it. Promises:

* `deliveries(client, key)` yields the events written from now on;
* `deliveries(client, key, after=id)` yields the events after that id, each once and in order,
  then the live ones — when the stream still holds the id's entry. When it does not (trimmed:
  the stream keeps about the last LIVE_STREAM_ENTRIES batches; or an id of another store, or
  no id at all) it yields one `Resync` first, whose id is the stream's last entry as a whole
  (`<entry id>.*`), then the live events;
* reads block at most `BLOCK_MS` at a time (well inside the client's socket timeout), so a
  quiet cluster keeps the connection checked.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from dra_mirror.service.stores import bus

BLOCK_MS = 10_000
READ_COUNT = 200
WHOLE = "*"  # an id's event place meaning "every event of the entry"
ENTRY_ID = re.compile(r"\d+-\d+")

Call = Callable[[Awaitable[Any]], Awaitable[Any]]


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _split(after: str) -> tuple[str, int | None]:
    """(entry id, the place of the last event seen; None: the whole entry)."""
    entry, _, place = after.rpartition(".")
    if place == WHOLE:
        return entry, None
    return entry, int(place) if place.isdigit() else -1


def _events(fields: dict) -> list[bus.LiveEvent]:
    data = fields.get(b"e", fields.get("e"))
    return bus.events_decoder.decode(data) if data is not None else []


async def deliveries(
    client: Any, key: str, cluster: str, call: Call, *, after: str | None = None
) -> AsyncIterator[bus.Delivery]:
    """See the module docstring; `call` wraps each Redis call (errors translated once)."""
    last = "$"
    if after is not None:
        entry, seen = _split(after)
        found = []
        if ENTRY_ID.fullmatch(entry) and seen != -1:  # else not an id of this store
            found = await call(client.xrange(key, min=entry, max=entry))
        if found:
            events = _events(found[0][1])
            if seen is not None:
                for place in range(seen + 1, len(events)):
                    yield bus.Delivery(f"{entry}.{place}", events[place])
            last = entry
        else:
            newest = await call(client.xrevrange(key, count=1))
            last = _text(newest[0][0]) if newest else "0-0"
            reason = "the events after that id are no longer kept"
            yield bus.Delivery(f"{last}.{WHOLE}", bus.Resync(cluster, reason))
    if last == "$":
        newest = await call(client.xrevrange(key, count=1))
        last = _text(newest[0][0]) if newest else "0-0"
    while True:
        answer = await call(client.xread({key: last}, count=READ_COUNT, block=BLOCK_MS))
        for _stream, entries in answer or ():
            for entry_id, fields in entries:
                last = _text(entry_id)
                for place, event in enumerate(_events(fields)):
                    yield bus.Delivery(f"{last}.{place}", event)
