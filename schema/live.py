"""GraphQL subscriptions (graphql-transport-ws over WebSocket at `/graphql`): live changes.

    subscription { claimEvents(cluster: "east", namespace: "ml") { type old { state } new { state } } }
    subscription { deviceEvents(cluster: "east", node: "n17") { type old { status } new { status } } }

Each event carries the change type (ADDED, MODIFIED, DELETED) and the old and new state, typed
as the queries type them (`ResourceClaim`, `Device` with its status). Events come from the state
store's `subscribe(cluster)` (Redis pub/sub, or the in-process bus of the embedded store),
published only once the batch is visible to queries. Promises:

* each event is answered from its own moment: a claim's idle mark and consumers are the ones
  the event carries (its old and new side each), and every other field is read through
  DataLoaders made fresh for the event (a subscription lives long; values cached while
  answering an earlier event would be stale);
* a change of a derived field alone is an event: a consumer pod starting to run sends its
  claims' MODIFIED with equal records and the new idle mark and consumers;
* only what the request's scope may see is sent (claims by namespace, devices by cluster); a
  subscription to a cluster outside the scope ends at once, with nothing sent;
* a store that cannot be reached answers "state store unavailable" and ends the subscription;
* pub/sub is at-most-once: a client that falls behind or reconnects re-reads with a query; a
  batch of more than LIVE_BATCH_LIMIT objects (an initial sync, a relist) carries no
  per-object events (service.model.live).
"""

from __future__ import annotations

import enum
from collections.abc import AsyncGenerator

import strawberry

from dra_mirror.service.model.live import ClaimEvent as ClaimChange
from dra_mirror.service.model.live import DeviceEvent as DeviceChange
from dra_mirror.service.model.live import DeviceState

from .claims import ClaimMoment, ResourceClaim
from .context import Info
from .devices import Device
from .loaders import Loaders
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


@strawberry.type
class Subscription:
    @strawberry.subscription(
        description="Claims of a cluster (optionally one namespace) as they change."
    )
    async def claim_events(
        self, info: Info, cluster: str, namespace: str | None = None
    ) -> AsyncGenerator[ClaimEvent, None]:
        reader = info.context.reader
        if not reader.scope.allows(cluster, ""):
            return
        async for event in reader.subscribe(cluster):
            if not isinstance(event, ClaimChange):
                continue
            if namespace is not None and event.namespace != namespace:
                continue
            if not reader.scope.allows(event.cluster, event.namespace):
                continue
            info.context.loaders = Loaders(reader)  # nothing cached from an earlier event
            old, new = event.old, event.new
            yield ClaimEvent(
                type=ChangeType(event.type),
                cluster=event.cluster,
                namespace=event.namespace,
                name=event.name,
                old=ResourceClaim(
                    record=old, moment=ClaimMoment(event.old_idle_since, event.old_consumers)
                )
                if old is not None
                else None,
                new=ResourceClaim(
                    record=new, moment=ClaimMoment(event.new_idle_since, event.new_consumers)
                )
                if new is not None
                else None,
            )

    @strawberry.subscription(
        description="Devices of a cluster (optionally one node) as they change: published, changed, allocated, released, withdrawn."
    )
    async def device_events(
        self, info: Info, cluster: str, node: str | None = None
    ) -> AsyncGenerator[DeviceEvent, None]:
        reader = info.context.reader
        if not reader.scope.allows(cluster, ""):
            return
        async for event in reader.subscribe(cluster):
            if not isinstance(event, DeviceChange):
                continue
            nodes = {s.entry.node for s in (event.old, event.new) if s is not None}
            if node is not None and node not in nodes:
                continue
            info.context.loaders = Loaders(reader)  # nothing cached from an earlier event
            yield DeviceEvent(
                type=ChangeType(event.type),
                cluster=event.key.cluster,
                node=event.node,
                old=_snapshot(event.old),
                new=_snapshot(event.new),
            )
