"""GraphQL types of the inventory side: DeviceClass, ResourceSlice (with its pool), Device.

Each type wraps one record (or `DeviceEntry`) as a private field and resolves its links through
the request's loaders, so walking `class → devices → allocations → claim` makes one batched
store call per relation, never one per object. Every link of the graph can be walked both
ways (classes → slices → devices → claims → pods → nodes, and back): a device knows its slice,
node, classes, holders and pods; a slice knows its devices and node; a class knows its devices
(by CEL) and the claims that ask for it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated

import strawberry

from dra_mirror.service.model import taint_rules
from dra_mirror.service.model.live import DeviceState
from dra_mirror.service.model.records import (
    AllocationRef,
    DeviceClassRecord,
    DeviceEntry,
    DeviceKey,
    ObjectKey,
    SliceRecord,
)
from dra_mirror.service.stores.protocols import Relation

from . import classes, device_state
from .capacities import Capacity, capacity_list
from .context import Info
from .identity import ClusterScopedFields
from .scalars import JSON, DeviceStatus

if TYPE_CHECKING:
    from .claims import Allocation, ResourceClaim
    from .nodes import Node
    from .pods import Pod

ClaimT = Annotated["ResourceClaim", strawberry.lazy("dra_mirror.schema.claims")]
AllocationT = Annotated["Allocation", strawberry.lazy("dra_mirror.schema.claims")]
NodeT = Annotated["Node", strawberry.lazy("dra_mirror.schema.nodes")]
PodT = Annotated["Pod", strawberry.lazy("dra_mirror.schema.pods")]


@strawberry.type(description="One taint of a device (DeviceTaint) and where it comes from.")
class DeviceTaint:
    key: str
    value: str
    effect: str = strawberry.field(
        description="None, NoSchedule or NoExecute (an effect this version does not know: as "
        "written, treated like None)."
    )
    time_added: str | None = strawberry.field(description="timeAdded, as written (RFC 3339).")
    rule: str | None = strawberry.field(
        description="The DeviceTaintRule that puts it there; null: the device's slice."
    )
    unavailable: bool = strawberry.field(
        description="NoSchedule or NoExecute: the device is unavailable to claims that do not "
        "tolerate it (KEP-5677 counts it unavailable)."
    )

    @classmethod
    def of(cls, taint: Mapping[str, object], rule: str | None) -> DeviceTaint:
        added = taint.get("timeAdded")
        return cls(
            key=str(taint.get("key") or ""),
            value=str(taint.get("value") or ""),
            effect=str(taint.get("effect") or ""),
            time_added=str(added) if added else None,
            rule=rule,
            unavailable=taint.get("effect") in taint_rules.UNAVAILABLE_EFFECTS,
        )


@strawberry.type
class Device:
    entry: strawberry.Private[DeviceEntry]
    # A live event's side: status and holders are the ones of that moment, not the store's now.
    moment: strawberry.Private[DeviceState | None] = None

    @strawberry.field
    def cluster(self) -> str:
        return self.entry.key.cluster

    @strawberry.field
    def driver(self) -> str:
        return self.entry.key.driver

    @strawberry.field
    def pool(self) -> str:
        return self.entry.key.pool

    @strawberry.field
    def name(self) -> str:
        return self.entry.key.device

    @strawberry.field(description="Hardware identity (GPU-…/MIG-…) where the driver publishes one.")
    def uuid(self) -> str | None:
        return self.entry.device.uuid

    @strawberry.field(
        description="Attribute values by name as the slice writes it (`productName`, "
        "`resource.kubernetes.io/pcieRoot`); a name without a domain is in the driver's."
    )
    def attributes(self) -> JSON:
        device = self.entry.device
        return JSON({device.written(name): a.value for name, a in device.attributes.items()})

    @strawberry.field(description="Attribute values by fully qualified name.")
    def qualified_attributes(self) -> JSON:
        return JSON({name: attr.value for name, attr in self.entry.device.attributes.items()})

    @strawberry.field
    def capacity(self) -> list[Capacity]:
        return capacity_list(self.entry.device.capacity, self.entry.device)

    @strawberry.field(description="allowMultipleAllocations: several claims may share it.")
    def shareable(self) -> bool:
        return self.entry.device.shareable

    @strawberry.field(description="The node a node-local device is on (null: network-attached).")
    def node_name(self) -> str | None:
        return self.entry.node

    @strawberry.field(description="Counters this partition consumes from its pool's counter sets.")
    def consumes_counters(self) -> JSON:
        return JSON(
            [
                {"counterSet": c.counter_set, "counters": c.counters}
                | (
                    {"compatibilityGroups": list(c.compatibility_groups)}
                    if c.compatibility_groups
                    else {}
                )  # KEP-5963, as the driver wrote them
                for c in self.entry.device.consumes_counters
            ]
        )

    @strawberry.field(
        description="Every DeviceTaint on it, as written: its slice's, then one per "
        "DeviceTaintRule selecting it (those carry `rule`, the rule's name). NoSchedule and "
        "NoExecute keep it from claims that do not tolerate them; None (and unknown "
        "effects) do nothing."
    )
    def taints(self) -> JSON:
        return JSON(taint_rules.shown(self.entry))

    @strawberry.field(
        description="Its taints, each with where it comes from: the slice, or a "
        "DeviceTaintRule (by name)."
    )
    def taint_sources(self) -> list[DeviceTaint]:
        entry = self.entry
        return [DeviceTaint.of(t, None) for t in entry.device.taints] + [
            DeviceTaint.of(t.taint, t.rule) for t in entry.rule_taints
        ]

    @strawberry.field
    async def status(self, info: Info) -> DeviceStatus:
        if self.moment is not None and self.moment.status:
            return DeviceStatus(self.moment.status)
        return DeviceStatus(await device_state.status(info.context.loaders, self.entry))

    @strawberry.field(description="Every claim holding it, one per allocation result.")
    async def allocations(self, info: Info) -> list[AllocationT]:
        from .claims import Allocation

        holds: list[AllocationRef] = await _holders(info, self)
        return [Allocation.from_ref(self.entry.key, ref) for ref in holds]

    @strawberry.field(
        description="Allocation results held by claims in namespaces outside your access: "
        "the device is held (status and capacity count them), the holder is withheld."
    )
    async def withheld_allocations(self, info: Info) -> int:
        from .withheld import withheld

        return await withheld(info, self.entry.key, self.moment)

    @strawberry.field(description="Capacity left after every share's consumedCapacity.")
    async def remaining_capacity(self, info: Info) -> list[Capacity]:
        left = await device_state.remaining_capacity(info.context.loaders, self.entry)
        return capacity_list(left, self.entry.device)

    @strawberry.field(
        description="Whether a slice of its pool's valid generation publishes it; false: it is "
        "known only from the allocation results that hold it (the driver withdrew it, its node "
        "went, or the claim was seen before the slices)."
    )
    def published(self) -> bool:
        return self.entry.published

    @strawberry.field(
        name="slice",
        description="The slice that publishes it (null: none does now — see `published`).",
    )
    async def slice_(self, info: Info) -> ResourceSlice | None:
        if self.entry.slice is None:
            return None
        record = await info.context.loaders.records.load(self.entry.slice)
        return ResourceSlice(record=record) if isinstance(record, SliceRecord) else None

    @strawberry.field
    async def node(self, info: Info) -> NodeT | None:
        from .nodes import load_node

        return await load_node(info, self.entry.key.cluster, self.entry.node)

    @strawberry.field(description="Device classes whose CEL selectors accept this device.")
    async def classes(self, info: Info) -> list[DeviceClass]:
        found = await classes.classes_of(info.context.loaders, self.entry)
        return [DeviceClass(record=c) for c in found]

    @strawberry.field(description="Consumer pods of the claims holding this device.")
    async def pods(self, info: Info) -> list[PodT]:
        from .claims import consumer_pods

        holds = await _holders(info, self)
        claim_keys = list(dict.fromkeys(ref.claim for ref in holds))
        return await consumer_pods(info, claim_keys)


async def _holders(info: Info, device: Device) -> list[AllocationRef]:
    """The device's holders the asker may see: at the event's moment, or now."""
    if device.moment is None:
        return await device_state.holders(info.context.loaders, device.entry.key)
    scope = info.context.reader.scope
    return [h for h in device.moment.holders if scope.allows(h.claim.cluster, h.claim.namespace)]


async def load_devices(info: Info, keys: list[DeviceKey]) -> list[Device]:
    entries = await info.context.loaders.devices.load_many(keys)
    return [Device(entry=e) for e in entries if e is not None]


@strawberry.type(description="A pool as its driver publishes it, at its valid generation.")
class PoolInfo:
    name: str
    generation: int
    resource_slice_count: int
    complete: bool = strawberry.field(
        description="All resourceSliceCount slices of the pool's highest generation are present."
    )


@strawberry.type
class ResourceSlice(ClusterScopedFields):
    record: strawberry.Private[SliceRecord]

    @strawberry.field
    def driver(self) -> str:
        return self.record.driver

    @strawberry.field
    async def pool(self, info: Info) -> PoolInfo:
        pool = self.record.pool
        facts = await info.context.loaders.pools.load(
            (self.record.meta.cluster, self.record.driver, pool.name, self.record.node_name)
        )
        current = facts is not None and facts.generation == pool.generation
        return PoolInfo(
            name=pool.name,
            generation=pool.generation,
            resource_slice_count=pool.resource_slice_count,
            complete=bool(current and facts is not None and facts.complete),
        )

    @strawberry.field
    def node_name(self) -> str | None:
        return self.record.node_name

    @strawberry.field
    async def node(self, info: Info) -> NodeT | None:
        from .nodes import load_node

        return await load_node(info, self.record.meta.cluster, self.record.node_name)

    @strawberry.field
    def all_nodes(self) -> bool:
        return self.record.all_nodes

    @strawberry.field(
        description="Devices of this slice (none when the slice is of an old generation)."
    )
    async def devices(self, info: Info) -> list[Device]:
        keys = await info.context.loaders.relation(Relation.SLICE_DEVICES).load(
            _slice_key(self.record)
        )
        return await load_devices(info, keys)

    @strawberry.field
    def shared_counters(self) -> JSON:
        return JSON(
            [{"name": cs.name, "counters": cs.counters} for cs in self.record.shared_counters]
        )


def _slice_key(record: SliceRecord) -> ObjectKey:
    return ObjectKey(record.meta.cluster, "ResourceSlice", "", record.meta.name)


@strawberry.type
class DeviceClass(ClusterScopedFields):
    record: strawberry.Private[DeviceClassRecord]

    @strawberry.field(description="CEL expressions; a device must match all of them.")
    def selectors(self) -> list[str]:
        return list(self.record.selectors)

    @strawberry.field
    def config(self) -> JSON:
        return JSON(list(self.record.config))

    @strawberry.field
    def extended_resource_name(self) -> str | None:
        return self.record.extended_resource_name

    @strawberry.field(description="Devices of the class's cluster its selectors accept.")
    async def devices(self, info: Info) -> list[Device]:
        entries = await info.context.reader.list_devices(cluster=self.record.meta.cluster)
        found = classes.devices_of(info.context.loaders, self.record, entries)
        return [Device(entry=e) for e in sorted(found, key=lambda e: e.key)]

    @strawberry.field(description="Claims with a request for this class.")
    async def claims(self, info: Info) -> list[ClaimT]:
        from .claims import load_claims

        keys = await info.context.loaders.relation(Relation.CLASS_CLAIMS).load(
            (self.record.meta.cluster, self.record.meta.name)
        )
        return await load_claims(info, keys)
