"""GraphQL subscriptions (graphql-transport-ws over WebSocket at `/graphql`): live changes.

    subscription { claimEvents(cluster: "east", namespace: "ml") { id type old { state } new { state } } }
    subscription { deviceEvents(cluster: "east", node: "n17", after: "3f1c9a2e-41") {
      id type old { status device { allocations { claim { name } } } } new { status } } }

Each event carries its id, the change type (ADDED, MODIFIED, DELETED) and the old and new
state, typed as the queries type them (`ResourceClaim`, `Device` with its status). Events come
from the state store's `subscribe(cluster)` (a Redis stream, or the in-process bus of the
embedded store), published only once the batch is visible to queries. Promises:

* each event is answered from its own moment: a claim's idle mark and consumers, a device's
  status and holders (`allocations`, `withheldAllocations`, `pods`) are the ones the event
  carries (its old and new side each), and every other field is read through DataLoaders made
  fresh for the event (a subscription lives long; values cached while answering an earlier
  event would be stale);
* every change of a device's holders is an event, a device released and allocated again in
  one batch too; a change of a derived field alone is an event: a consumer pod starting to
  run sends its claims' MODIFIED with equal records and the new idle mark and consumers;
* resuming: a client that reconnects passes the `id` of the last event it saw as `after` and
  receives every later event once, in order; when that cannot be done (the id is no longer
  kept, the embedded mirror started again, the client fell behind, or a
  batch was too large to carry per-object events) it receives one `RESYNC` event instead
  (`old` and `new` null): re-read with a query, then go on from the RESYNC's id;
* only what the request's scope may see is sent (claims by namespace, devices by cluster); a
  subscription to a cluster outside the scope ends at once, with nothing sent; a cluster the
  mirror does not know is an `UNKNOWN_CLUSTER` error at once (the known names listed);
* a store that cannot be reached answers "state store unavailable" and ends the subscription.
"""

from __future__ import annotations

import enum
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Annotated

import strawberry

from dra_mirror.service.model.live import ClaimEvent as ClaimChange
from dra_mirror.service.model.live import DeviceEvent as DeviceChange
from dra_mirror.service.model.live import DeviceState, Resync
from dra_mirror.service.questions.asking import UnknownCluster
from dra_mirror.service.stores.bus import Delivery

from .asked import graphql_error
from .claims import ClaimMoment, ResourceClaim
from .context import Info
from .devices import Device
from .loaders import Loaders
from .scalars import DeviceStatus

AFTER = Annotated[
    str | None,
    strawberry.argument(
        description="The id of the last event a client saw: resume just after it (or RESYNC)."
    ),
]


@strawberry.enum
class ChangeType(enum.Enum):
    ADDED = "ADDED"
    MODIFIED = "MODIFIED"
    DELETED = "DELETED"
    RESYNC = strawberry.enum_value(
        "RESYNC", description="Events were left out here: re-read with a query."
    )


@strawberry.type
class ClaimEvent:
    id: str = strawberry.field(description="Pass the last one seen as `after` to resume.")
    type: ChangeType
    cluster: str
    namespace: str = strawberry.field(description="Empty for a RESYNC.")
    name: str = strawberry.field(description="Empty for a RESYNC.")
    old: ResourceClaim | None = strawberry.field(description="Before the change (null: added).")
    new: ResourceClaim | None = strawberry.field(description="After the change (null: deleted).")


@strawberry.type
class DeviceSnapshot:
    device: Device
    status: DeviceStatus | None


@strawberry.type
class DeviceEvent:
    id: str = strawberry.field(description="Pass the last one seen as `after` to resume.")
    type: ChangeType
    cluster: str
    node: str | None = strawberry.field(description="The device's node (null: network-attached).")
    old: DeviceSnapshot | None
    new: DeviceSnapshot | None


def _snapshot(state: DeviceState | None) -> DeviceSnapshot | None:
    if state is None:
        return None
    status = DeviceStatus(state.status) if state.status else None
    return DeviceSnapshot(device=Device(entry=state.entry, moment=state), status=status)


@strawberry.type
class Subscription:
    @strawberry.subscription(
        description="Claims of a cluster (optionally one namespace) as they change."
    )
    async def claim_events(
        self, info: Info, cluster: str, namespace: str | None = None, after: AFTER = None
    ) -> AsyncGenerator[ClaimEvent, None]:
        reader = info.context.reader
        if not reader.scope.allows(cluster, ""):
            return
        async for delivery in await _deliveries(info, cluster, after):
            event = delivery.event
            if isinstance(event, Resync):
                yield ClaimEvent(
                    id=delivery.id, type=ChangeType.RESYNC, cluster=cluster, namespace="",
                    name="", old=None, new=None,
                )  # fmt: skip
                continue
            if not isinstance(event, ClaimChange):
                continue
            if namespace is not None and event.namespace != namespace:
                continue
            if not reader.scope.allows(event.cluster, event.namespace):
                continue
            info.context.loaders = Loaders(reader)  # nothing cached from an earlier event
            old, new = event.old, event.new
            yield ClaimEvent(
                id=delivery.id,
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
        self, info: Info, cluster: str, node: str | None = None, after: AFTER = None
    ) -> AsyncGenerator[DeviceEvent, None]:
        reader = info.context.reader
        if not reader.scope.allows(cluster, ""):
            return
        async for delivery in await _deliveries(info, cluster, after):
            event = delivery.event
            if isinstance(event, Resync):
                yield DeviceEvent(
                    id=delivery.id, type=ChangeType.RESYNC, cluster=cluster, node=None,
                    old=None, new=None,
                )  # fmt: skip
                continue
            if not isinstance(event, DeviceChange):
                continue
            nodes = {s.entry.node for s in (event.old, event.new) if s is not None}
            if node is not None and node not in nodes:
                continue
            info.context.loaders = Loaders(reader)  # nothing cached from an earlier event
            yield DeviceEvent(
                id=delivery.id,
                type=ChangeType(event.type),
                cluster=event.key.cluster,
                node=event.node,
                old=_snapshot(event.old),
                new=_snapshot(event.new),
            )


async def _deliveries(info: Info, cluster: str, after: str | None) -> AsyncIterator[Delivery]:
    """The cluster's deliveries, once the cluster is known to be one the mirror watches."""
    known = await info.context.asker.known_clusters()
    if cluster not in known:
        raise graphql_error(UnknownCluster(cluster, known))
    return info.context.reader.subscribe(cluster, after=after)
