"""The buses that carry live events (`service.model.live`) to the GraphQL subscriptions.

The model derives each batch's events (`Changes.events`); writers publish them, in batch
order, only AFTER the batch is visible to readers. Two buses carry them:

* `InProcessBus` — embedded default: a fan-out to the subscribers of this process, fed by the
  in-memory store's `apply`;
* the Redis store's pub/sub (`RedisStore.subscribe`), one channel per cluster, so every API
  replica sees what the watching replica wrote; the store publishes inside the same
  MULTI/EXEC as the writes, encoded with `events_encoder` (msgpack).

Pub/sub is fire-and-forget: a subscriber that is slow (its queue of `max_queued` batches is
full) or disconnected misses events; subscriptions are for live views, the store is the truth.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterable

import msgspec

from dra_mirror.service.model.live import (  # noqa: F401  (the event types, re-exported)
    ADDED,
    DELETED,
    MODIFIED,
    ClaimEvent,
    DeviceEvent,
    DeviceState,
    LiveEvent,
    event_cluster,
)

events_encoder = msgspec.msgpack.Encoder()
events_decoder = msgspec.msgpack.Decoder(list[LiveEvent])


class InProcessBus:
    """Fan-out of event batches to this process's subscribers (embedded default)."""

    def __init__(self, *, max_queued: int = 1000) -> None:
        self.max_queued = max_queued
        self._queues: set[asyncio.Queue[list[LiveEvent]]] = set()

    def publish(self, events: Iterable[LiveEvent]) -> None:
        batch = list(events)
        if not batch:
            return
        for queue in self._queues:
            with contextlib.suppress(asyncio.QueueFull):  # a slow subscriber misses events
                queue.put_nowait(batch)

    async def subscribe(self, cluster: str) -> AsyncIterator[LiveEvent]:
        """Events of `cluster` from now on, until the caller stops iterating."""
        queue: asyncio.Queue[list[LiveEvent]] = asyncio.Queue(self.max_queued)
        self._queues.add(queue)
        try:
            while True:
                for event in await queue.get():
                    if event_cluster(event) == cluster:
                        yield event
        finally:
            self._queues.discard(queue)
