"""The buses that carry live events (`service.model.live`) to the GraphQL subscriptions.

The model derives each batch's events (`Changes.events`); writers publish them, in batch
order, only AFTER the batch is visible to readers. Two buses carry them:

* `InProcessBus` — embedded default: a fan-out to the subscribers of this process, fed by the
  in-memory store's `apply`;
* the Redis store's stream of each cluster (`RedisStore.subscribe`, service.stores.redis_live),
  so every API replica sees what the watching replica wrote; the store appends each batch's
  events inside the same MULTI/EXEC as the writes, encoded with `events_encoder` (msgpack).

A subscriber receives `Delivery` values: an event and its id, the resume token. Promises of
the in-process bus:

* ids are `<bus epoch>-<n>`, n counting the cluster's events from 1; a subscriber that passes
  the last id it saw (`after`) gets every later event once, in order, then the live ones —
  as long as the bus still keeps them (the last `replay` events of each cluster);
* when it cannot keep that promise it says so with a `Resync` delivery (re-read with a query,
  then go on from the Resync's id): an id of another epoch (this process started again) or
  older than what is kept, or a subscriber so slow that `max_queued` batches wait for it;
* the model's own `Resync` (a batch too large to carry per-object events) is delivered like
  any event.

The Redis store keeps the same promises from its streams (service.stores.redis_live).
"""

from __future__ import annotations

import asyncio
import secrets
from collections import deque
from collections.abc import AsyncIterator, Iterable
from typing import NamedTuple

import msgspec

from dra_mirror.service.model.live import (  # noqa: F401  (the event types, re-exported)
    ADDED,
    DELETED,
    MODIFIED,
    ClaimEvent,
    DeviceEvent,
    DeviceState,
    LiveEvent,
    Resync,
    event_cluster,
)

events_encoder = msgspec.msgpack.Encoder()
events_decoder = msgspec.msgpack.Decoder(list[LiveEvent])

REPLAY_EVENTS = 10_000
"""Events of each cluster the in-process bus keeps for subscribers that resume."""


class Delivery(NamedTuple):
    """One live event as a subscriber receives it; `id` is its resume token."""

    id: str
    event: LiveEvent


class _Subscriber:
    def __init__(self, cluster: str, max_queued: int) -> None:
        self.cluster = cluster
        self.queue: asyncio.Queue[list[Delivery]] = asyncio.Queue(max_queued)
        self.behind = False  # its queue overflowed: it is told to re-read once it catches up


class InProcessBus:
    """Fan-out of event batches to this process's subscribers (embedded default)."""

    def __init__(self, *, max_queued: int = 1000, replay: int = REPLAY_EVENTS) -> None:
        self.max_queued = max_queued
        self.replay = replay
        self.epoch = secrets.token_hex(4)
        self._counts: dict[str, int] = {}
        self._kept: dict[str, deque[Delivery]] = {}
        self._subscribers: set[_Subscriber] = set()

    @property
    def subscribers(self) -> int:
        """How many subscribers are listening now."""
        return len(self._subscribers)

    def drained(self) -> bool:
        """Whether every subscriber has taken every batch published to it."""
        return all(s.queue.empty() for s in self._subscribers)

    def newest_id(self, cluster: str) -> str:
        """The id of the cluster's newest event (what a Resync tells a subscriber to go on
        from)."""
        return self._id(self._counts.get(cluster, 0))

    def _id(self, n: int) -> str:
        return f"{self.epoch}-{n}"

    def publish(self, events: Iterable[LiveEvent]) -> None:
        by_cluster: dict[str, list[Delivery]] = {}
        for event in events:
            cluster = event_cluster(event)
            n = self._counts[cluster] = self._counts.get(cluster, 0) + 1
            by_cluster.setdefault(cluster, []).append(Delivery(self._id(n), event))
        for cluster, batch in by_cluster.items():
            kept = self._kept.get(cluster)
            if kept is None:
                kept = self._kept[cluster] = deque(maxlen=self.replay)
            kept.extend(batch)
            for subscriber in self._subscribers:
                if subscriber.cluster != cluster or subscriber.behind:
                    continue
                try:
                    subscriber.queue.put_nowait(batch)
                except asyncio.QueueFull:
                    subscriber.behind = True

    def _since(self, cluster: str, after: str) -> list[Delivery]:
        """What a subscriber that saw `after` missed, or one Resync when that is not kept."""
        last = self._counts.get(cluster, 0)
        epoch, _, number = after.rpartition("-")
        kept = self._kept.get(cluster) or deque()
        first = int(kept[0].id.rpartition("-")[2]) if kept else last + 1
        seen = int(number) if number.isdigit() else -1
        if epoch != self.epoch or seen > last or seen < first - 1:
            reason = "the events after that id are not kept" if epoch == self.epoch else (
                "the mirror started again since that id"
            )  # fmt: skip
            return [Delivery(self.newest_id(cluster), Resync(cluster, reason))]
        return list(kept)[len(kept) - (last - seen) :] if last > seen else []

    async def subscribe(self, cluster: str, *, after: str | None = None) -> AsyncIterator[Delivery]:
        """Events of `cluster` from now on — or, given the id of the last one a subscriber saw,
        from just after it (see the module docstring) — until the caller stops iterating."""
        subscriber = _Subscriber(cluster, self.max_queued)
        self._subscribers.add(subscriber)  # before reading what was kept: nothing falls between
        missed = self._since(cluster, after) if after is not None else []
        try:
            for delivery in missed:
                yield delivery
            while True:
                if subscriber.behind and subscriber.queue.empty():
                    subscriber.behind = False
                    newest = self.newest_id(cluster)
                    yield Delivery(newest, Resync(cluster, "the subscriber fell behind"))
                    continue
                for delivery in await subscriber.queue.get():
                    yield delivery
        finally:
            self._subscribers.discard(subscriber)
