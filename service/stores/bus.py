"""Live change events: what the GraphQL subscriptions carry, and the buses that carry them.

An event says what changed in one claim or one device, with its old and new state:

* `ClaimEvent` — a ResourceClaim ADDED, MODIFIED or DELETED (old/new: the claim record, as the
  store serves it, template name included);
* `DeviceEvent` — a device of a valid pool ADDED, MODIFIED (its entry or its status changed:
  free -> held when a claim is allocated, held -> free when released) or DELETED.

Writers publish one list of events per applied batch, in batch order, only AFTER the batch is
visible to readers (the Redis store publishes inside the same MULTI/EXEC as the writes).
Two buses carry them:

* `InProcessBus` — embedded default: a fan-out to the subscribers of this process, fed by
  `LiveMemoryStore` (the in-memory store deriving each batch's events from its own index);
* the Redis store's pub/sub (`RedisStore.subscribe`), one channel per cluster, so every API
  replica sees what the watching replica wrote.

Pub/sub is fire-and-forget: a subscriber that is slow (its queue of `max_queued` batches is
full) or disconnected misses events; subscriptions are for live views, the store is the truth.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterable

import msgspec
from msgspec import Struct

from dra_mirror.service.model.changes import Changes
from dra_mirror.service.model.records import (
    RESOURCE_CLAIM,
    ClaimRecord,
    DeviceEntry,
    DeviceKey,
    ObjectKey,
    PodRecord,
    SliceRecord,
    key_of,
)
from dra_mirror.service.stores.memory import MemoryStore

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


class LiveMemoryStore(MemoryStore):
    """The in-memory store that also publishes each batch's live events on an `InProcessBus`
    (embedded default: `subscribe(cluster)` serves the GraphQL subscriptions). Events are
    derived from the store's own index before and after the batch: the claims the batch names
    (and those its pods name), and every device of the pools its slices and allocations touch."""

    def __init__(self, live: InProcessBus | None = None) -> None:
        super().__init__()
        self.live = live or InProcessBus()

    async def apply(self, changes: Changes) -> None:
        cluster = changes.cluster
        claims, pools = self._touched(changes)
        before_claims = self._claims(cluster, claims)
        before_devices = self._devices(cluster, pools)
        await super().apply(changes)
        events: list[LiveEvent] = []
        for key, new in self._claims(cluster, claims).items():
            old = before_claims.get(key)
            if old != new:
                events.append(claim_event(cluster, old, new))
        after_devices = self._devices(cluster, pools)
        for key in sorted(before_devices.keys() | after_devices.keys()):
            old_state, new_state = before_devices.get(key), after_devices.get(key)
            if old_state != new_state:
                events.append(device_event(key, old_state, new_state))
        self.live.publish(events)

    def subscribe(self, cluster: str) -> AsyncIterator[LiveEvent]:
        return self.live.subscribe(cluster)

    def _touched(self, changes: Changes) -> tuple[set[ObjectKey], set[tuple[str, str]]]:
        index = self.index(changes.cluster)
        claims: set[ObjectKey] = set()
        pools: set[tuple[str, str]] = set()
        for record in (*changes.upserts, *changes.deletes):
            key = key_of(record)
            versions = [record, index.get(key) if index is not None else None]
            if isinstance(record, ClaimRecord):
                claims.add(key)
                for claim in versions:
                    if isinstance(claim, ClaimRecord) and claim.allocation is not None:
                        pools.update((r.driver, r.pool) for r in claim.allocation.results)
            elif isinstance(record, SliceRecord):
                pools.update(
                    (s.driver, s.pool.name) for s in versions if isinstance(s, SliceRecord)
                )
            elif isinstance(record, PodRecord):
                claims.update(
                    ObjectKey(key.cluster, RESOURCE_CLAIM, key.namespace, c.claim_name)
                    for c in record.claims
                    if c.claim_name
                )
        return claims, pools

    def _claims(self, cluster: str, keys: set[ObjectKey]) -> dict[ObjectKey, ClaimRecord | None]:
        index = self.index(cluster)
        return {k: index.get(k) if index is not None else None for k in keys}  # type: ignore[misc]

    def _devices(self, cluster: str, pools: set[tuple[str, str]]) -> dict[DeviceKey, DeviceState]:
        index = self.index(cluster)
        if index is None:
            return {}
        found: dict[DeviceKey, DeviceState] = {}
        for driver, pool in pools:
            for key, entry in index.pool(driver, pool).devices.items():
                found[key] = DeviceState(entry, index.device_status(key))
        return found
