"""GraphQL types of Nodes and Clusters.

A Node reaches its slices, devices and pods through the node reverse maps (one batched lookup
each). A Cluster carries the watcher's status (connected, synced, last event, last error) and
counts computed from current state (devices, free devices, claims, pending claims).
"""

from __future__ import annotations

import asyncio

import strawberry

from dra_mirror.service.model.kinds import DEVICE_TAINT_RULE, OPTIONAL
from dra_mirror.service.model.records import (
    FREE,
    NODE,
    PENDING,
    RESOURCE_CLAIM,
    NodeRecord,
    ObjectKey,
    PodRecord,
    SliceRecord,
)
from dra_mirror.service.stores.protocols import DEVICES, Relation, Selection
from dra_mirror.service.stores.protocols import ClusterStatus as ClusterStatusRecord

from . import device_state
from .context import Info
from .devices import Device, ResourceSlice, load_devices
from .identity import ClusterScopedFields
from .pods import Pod
from .scalars import JSON, DateTime, to_datetime


async def load_node(info: Info, cluster: str, name: str | None) -> Node | None:
    """The node of that name in the cluster; null when no node is named (a pending pod, a
    network-attached device) or the named one is not (or no longer) mirrored."""
    if not name:
        return None
    record = await info.context.loaders.records.load(ObjectKey(cluster, NODE, "", name))
    return Node(record=record) if isinstance(record, NodeRecord) else None


@strawberry.type
class Node(ClusterScopedFields):
    record: strawberry.Private[NodeRecord]

    @strawberry.field
    def labels(self) -> JSON:
        return JSON(dict(self.record.meta.labels))

    @strawberry.field
    def ready(self) -> bool:
        return self.record.ready

    @strawberry.field
    def unschedulable(self) -> bool:
        return self.record.unschedulable

    @strawberry.field
    def allocatable(self) -> JSON:
        return JSON(dict(self.record.allocatable))

    @strawberry.field
    def capacity(self) -> JSON:
        return JSON(dict(self.record.capacity))

    def _key(self) -> tuple[str, str]:
        return (self.record.meta.cluster, self.record.meta.name)

    @strawberry.field(description="ResourceSlices published for this node.")
    async def slices(self, info: Info) -> list[ResourceSlice]:
        keys = await info.context.loaders.relation(Relation.NODE_SLICES).load(self._key())
        records = await info.context.loaders.records.load_many(keys)
        found = [r for r in records if isinstance(r, SliceRecord)]
        return [ResourceSlice(record=r) for r in sorted(found, key=lambda r: r.meta.name)]

    @strawberry.field(description="Devices usable on this node (valid pool generations).")
    async def devices(self, info: Info) -> list[Device]:
        keys = await info.context.loaders.relation(Relation.NODE_DEVICES).load(self._key())
        devices = await load_devices(info, sorted(keys))
        await device_state.prefetch(info.context.loaders, [d.entry for d in devices])
        return devices

    @strawberry.field(description="Pods bound to this node.")
    async def pods(self, info: Info) -> list[Pod]:
        keys = await info.context.loaders.relation(Relation.NODE_PODS).load(self._key())
        records = await info.context.loaders.records.load_many(sorted(keys))
        return [Pod(record=r) for r in records if isinstance(r, PodRecord)]


@strawberry.type(
    description="A kind served at versions of its own (DeviceTaintRule), watched where the "
    "cluster serves one of them and mirrored without it where it serves none."
)
class OptionalKind:
    kind: str
    version: str | None = strawberry.field(
        description="The version it is watched at (the newest the cluster serves); null when "
        "the cluster serves none of its versions, or until known."
    )
    served: bool | None = strawberry.field(
        description="Whether the cluster serves one of its versions; null until known."
    )


@strawberry.type(description="The watcher's view of one cluster.")
class ClusterStatus:
    connected: bool
    synced: bool = strawberry.field(description="Every watched kind was listed at least once.")
    last_event_at: DateTime | None
    error: str | None
    api_version: str | None = strawberry.field(description="resource.k8s.io version in use.")
    last_sync_at: DateTime | None
    events: int
    relists: int
    malformed: JSON = strawberry.field(description="Objects skipped as malformed, per kind.")
    stalls: JSON = strawberry.field(
        description="Watch streams ended for silence (no event, no bookmark), per kind."
    )
    resets: int = strawberry.field(
        description="resourceVersion resets seen (each made every kind relist)."
    )
    dra_served: bool | None = strawberry.field(
        description="Whether the cluster serves a resource.k8s.io version the mirror reads "
        "(v1, v1beta2, v1beta1); null until known. When false, pods and nodes are mirrored "
        "and nothing of DRA is."
    )
    dra_versions: list[str] = strawberry.field(
        description="The resource.k8s.io versions the cluster's discovery lists, served or not "
        "(e.g. only v1alpha3 on a cluster too old for the mirror)."
    )
    optional_kinds: list[OptionalKind] = strawberry.field(
        description="Each kind served at versions of its own, with the version it is watched "
        "at: DeviceTaintRule at v1alpha3 from 1.33, v1beta2 from 1.36, v1 from 1.37 (newest "
        "served); a cluster serving none of them is mirrored without it (devices then carry "
        "only their slices' taints)."
    )
    taint_rule_version: str | None = strawberry.field(
        description="The resource.k8s.io version DeviceTaintRules are watched at; null when "
        "the cluster serves none or until known.",
        deprecation_reason="Use optionalKinds (the version of each kind of its own).",
    )


@strawberry.type
class ClusterCounts:
    devices: int
    free_devices: int
    claims: int
    pending_claims: int


@strawberry.type
class Cluster:
    status_record: strawberry.Private[ClusterStatusRecord]

    @strawberry.field
    def name(self) -> str:
        return self.status_record.name

    @strawberry.field
    def status(self) -> ClusterStatus:
        s = self.status_record
        return ClusterStatus(
            connected=s.connected,
            synced=s.synced,
            last_event_at=to_datetime(s.last_event_at),
            error=s.error,
            api_version=s.api_version,
            last_sync_at=to_datetime(s.last_sync_at),
            events=s.events,
            relists=s.relists,
            malformed=JSON(dict(s.malformed)),
            stalls=JSON(dict(s.stalls)),
            resets=s.resets,
            dra_served=s.dra_served,
            dra_versions=list(s.dra_versions),
            optional_kinds=[
                OptionalKind(
                    kind=kind,
                    version=s.optional.get(kind),
                    served=s.optional[kind] is not None if kind in s.optional else None,
                )
                for kind in sorted(OPTIONAL)
            ],
            taint_rule_version=s.optional.get(DEVICE_TAINT_RULE),
        )

    @strawberry.field(description="Counted from current state when asked (the store's counts).")
    async def counts(self, info: Info) -> ClusterCounts:
        reader = info.context.reader
        name = self.status_record.name
        asked = (
            Selection(DEVICES, name),
            Selection(DEVICES, name, status=FREE),
            Selection(RESOURCE_CLAIM, name),
            Selection(RESOURCE_CLAIM, name, state=PENDING),
        )
        pages = await asyncio.gather(*(reader.page(s, cluster=name, first=0) for s in asked))
        devices, free, claims, pending = (p.total for p in pages)
        return ClusterCounts(
            devices=devices, free_devices=free, claims=claims, pending_claims=pending
        )

    @strawberry.field
    async def nodes(self, info: Info) -> list[Node]:
        records = await info.context.reader.list(NODE, cluster=self.status_record.name)
        return [Node(record=r) for r in sorted(records, key=lambda r: r.meta.name)]
