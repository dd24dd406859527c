"""GraphQL subscriptions (graphql-transport-ws over WebSocket at `/graphql`): live changes.

    subscription { claimEvents(cluster: "east", namespace: "ml") { type old { state } new { state } } }
    subscription { deviceEvents(cluster: "east", node: "n17") { type old { status } new { status } } }

Each event carries the change type (ADDED, MODIFIED, DELETED) and the old and new state, typed
as the queries type them (`ResourceClaim`, `Device` with its status). Events come from the state
store's `subscribe(cluster)` (Redis pub/sub, or the in-process bus of the embedded store),
published only once the batch is visible to queries. Promises:

* only what the request's scope may see is sent (claims by namespace, devices by cluster);
* a store without live events answers a clear error ("live events are not available …"); a
  store that cannot be reached answers "state store unavailable" and ends the subscription;
* pub/sub is at-most-once: a client that falls behind or reconnects re-reads with a query.
"""

from __future__ import annotations

import enum
from collections.abc import AsyncGenerator
from typing import Any

import strawberry
from graphql import GraphQLError
from strawberry.types import Info

from dra_mirror.service.stores.bus import ClaimEvent as ClaimChange
from dra_mirror.service.stores.bus import DeviceEvent as DeviceChange
from dra_mirror.service.stores.bus import DeviceState
from dra_mirror.service.stores.protocols import StoreUnavailable

from .claims import ResourceClaim
from .devices import Device
from .reader import StateStoreUnavailable
from .scalars import DeviceStatus


@strawberry.enum
class ChangeType(enum.Enum):
    ADDED = "ADDED"
    MODIFIED = "MODIFIED"
    DELETED = "DELETED"


@strawberry.type
class ClaimEvent:
    type: ChangeType
    cluster: str
    namespace: str
    name: str
    old: ResourceClaim | None = strawberry.field(description="Before the change (null: added).")
    new: ResourceClaim | None = strawberry.field(description="After the change (null: deleted).")


@strawberry.type
class DeviceSnapshot:
    device: Device
    status: DeviceStatus | None


@strawberry.type
class DeviceEvent:
    type: ChangeType
    cluster: str
    node: str | None = strawberry.field(description="The device's node (null: network-attached).")
    old: DeviceSnapshot | None
    new: DeviceSnapshot | None


def _snapshot(state: DeviceState | None) -> DeviceSnapshot | None:
    if state is None:
        return None
    status = DeviceStatus(state.status) if state.status else None
    return DeviceSnapshot(device=Device(entry=state.entry), status=status)


async def _events(info: Info, cluster: str) -> AsyncGenerator[Any, None]:
    store = info.context.reader.store
    subscribe = getattr(store, "subscribe", None)
    if subscribe is None:
        raise GraphQLError(
            "live events are not available from this state store",
            extensions={"code": "LIVE_EVENTS_UNAVAILABLE"},
        )
    try:
        async for event in subscribe(cluster):
            yield event
    except StoreUnavailable as error:
        raise StateStoreUnavailable(error) from error


@strawberry.type
class Subscription:
    @strawberry.subscription(
        description="Claims of a cluster (optionally one namespace) as they change."
    )
    async def claim_events(
        self, info: Info, cluster: str, namespace: str | None = None
    ) -> AsyncGenerator[ClaimEvent, None]:
        scope = info.context.reader.scope
        async for event in _events(info, cluster):
            if not isinstance(event, ClaimChange):
                continue
            if namespace is not None and event.namespace != namespace:
                continue
            if not scope.allows(event.cluster, event.namespace):
                continue
            yield ClaimEvent(
                type=ChangeType(event.type),
                cluster=event.cluster,
                namespace=event.namespace,
                name=event.name,
                old=ResourceClaim(record=event.old) if event.old is not None else None,
                new=ResourceClaim(record=event.new) if event.new is not None else None,
            )

    @strawberry.subscription(
        description="Devices of a cluster (optionally one node) as they change: published, changed, allocated, released, withdrawn."
    )
    async def device_events(
        self, info: Info, cluster: str, node: str | None = None
    ) -> AsyncGenerator[DeviceEvent, None]:
        scope = info.context.reader.scope
        if not scope.allows(cluster, ""):
            return
        async for event in _events(info, cluster):
            if not isinstance(event, DeviceChange):
                continue
            nodes = {s.entry.node for s in (event.old, event.new) if s is not None}
            if node is not None and node not in nodes:
                continue
            yield DeviceEvent(
                type=ChangeType(event.type),
                cluster=event.key.cluster,
                node=event.node,
                old=_snapshot(event.old),
                new=_snapshot(event.new),
            )
