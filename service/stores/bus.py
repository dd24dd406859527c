"""Live change events: what the GraphQL subscriptions carry, and the buses that carry them.

An event says what changed in one claim or one device, with its old and new state:

* `ClaimEvent` — a ResourceClaim ADDED, MODIFIED or DELETED (old/new: the claim record, as the
  store serves it, template name included);
* `DeviceEvent` — a device of a valid pool ADDED, MODIFIED (its entry or its status changed:
  free -> held when a claim is allocated, held -> free when released) or DELETED.

Writers publish one list of events per applied batch, in batch order, only AFTER the batch is
visible to readers (the Redis store publishes inside the same atomic script as the writes).
Two buses carry them:

* `InProcessBus` — embedded default: a fan-out to the subscribers of this process;
* the Redis store's pub/sub (`RedisStore.subscribe`), one channel per cluster, so every API
  replica sees what the watching replica wrote.

Pub/sub is fire-and-forget: a subscriber that is slow (its queue of `max_queued` batches is
full) or disconnected misses events; subscriptions are for live views, the store is the truth.
`events_of(...)` derives the events of a batch from its before/after views (pure).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterable

import msgspec
from msgspec import Struct

from service.model.records import ClaimRecord, DeviceEntry, DeviceKey

ADDED, MODIFIED, DELETED = "ADDED", "MODIFIED", "DELETED"


class DeviceState(Struct, frozen=True, gc=False):
    entry: DeviceEntry
    status: str | None = None  # free | held | shared | blocked


class ClaimEvent(Struct, frozen=True, gc=False, tag_field="topic", tag="claim"):
    type: str
    cluster: str
    namespace: str
    name: str
    old: ClaimRecord | None = None
    new: ClaimRecord | None = None


class DeviceEvent(Struct, frozen=True, gc=False, tag_field="topic", tag="device"):
    type: str
    key: DeviceKey
    node: str | None = None  # the device's node (new state, else old); None: network-attached
    old: DeviceState | None = None
    new: DeviceState | None = None


LiveEvent = ClaimEvent | DeviceEvent
events_encoder = msgspec.msgpack.Encoder()
events_decoder = msgspec.msgpack.Decoder(list[LiveEvent])


def change_type(old: object | None, new: object | None) -> str:
    if old is None:
        return ADDED
    return DELETED if new is None else MODIFIED


def claim_event(cluster: str, old: ClaimRecord | None, new: ClaimRecord | None) -> ClaimEvent:
    meta = (new or old).meta  # type: ignore[union-attr]
    return ClaimEvent(change_type(old, new), cluster, meta.namespace, meta.name, old, new)


def device_event(key: DeviceKey, old: DeviceState | None, new: DeviceState | None) -> DeviceEvent:
    node = (new or old).entry.node  # type: ignore[union-attr]
    return DeviceEvent(change_type(old, new), key, node, old, new)


def matches_claim(event: LiveEvent, cluster: str, namespace: str | None) -> bool:
    return (
        isinstance(event, ClaimEvent)
        and event.cluster == cluster
        and (namespace is None or event.namespace == namespace)
    )


def matches_device(event: LiveEvent, cluster: str, node: str | None) -> bool:
    if not isinstance(event, DeviceEvent) or event.key.cluster != cluster:
        return False
    if node is None:
        return True
    nodes = {s.entry.node for s in (event.old, event.new) if s is not None}
    return node in nodes


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
                    key_cluster = (
                        event.cluster if isinstance(event, ClaimEvent) else event.key.cluster
                    )
                    if key_cluster == cluster:
                        yield event
        finally:
            self._queues.discard(queue)
