"""GraphQL types of the demand side: ResourceClaim, its requests and allocation, templates,
and the Allocation that joins a claim to a device (the Holding that `whoHolds` answers is
`schema.whoholds`'s).

Both directions of every link of the graph: an Allocation reaches its device and its claim; a
claim reaches its template, devices, allocation node and consumer pods; a template reaches
its claims. Derived states (state, origin, idle, idleSince) are the model's, read as-is.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Annotated

import strawberry

from dra_mirror.service.model.consumers import group_refs, pod_refs, same_pod
from dra_mirror.service.model.records import (
    RESOURCE_CLAIM_TEMPLATE,
    AllocationRef,
    AllocationResult,
    ClaimRecord,
    DeviceEntry,
    DeviceKey,
    ObjectKey,
    PodRecord,
    Request,
    SubRequest,
    TemplateRecord,
)
from dra_mirror.service.model.records import DerivedAttribute as DerivedAttributeRecord
from dra_mirror.service.model.records import Device as DeviceRecord
from dra_mirror.service.stores.protocols import Relation

from .context import Info
from .devices import Device
from .identity import NamespacedFields, NamespacedUidFields
from .scalars import JSON, ClaimOrigin, ClaimState, DateTime, to_datetime

if TYPE_CHECKING:
    from .nodes import Node
    from .pod_groups import PodGroup
    from .pods import Pod, PodDeviceHealth

NodeT = Annotated["Node", strawberry.lazy("dra_mirror.schema.nodes")]
PodT = Annotated["Pod", strawberry.lazy("dra_mirror.schema.pods")]
PodGroupT = Annotated["PodGroup", strawberry.lazy("dra_mirror.schema.pod_groups")]
HealthT = Annotated["PodDeviceHealth", strawberry.lazy("dra_mirror.schema.pods")]


async def load_claims(info: Info, keys: list[ObjectKey]) -> list[ResourceClaim]:
    records = await info.context.loaders.records.load_many(keys)
    return [ResourceClaim(record=r) for r in records if isinstance(r, ClaimRecord)]


async def consumer_pods(info: Info, claim_keys: list[ObjectKey]) -> list[Pod]:
    """The pods consuming the claims (service.model.consumers), deduplicated, by name: those of
    status.reservedFor (the authoritative "in use" set; an entry whose pod is gone, or was
    replaced by a pod with another uid, is not that pod), and the pods of the PodGroups it
    names."""
    from .pods import Pod

    loaders = info.context.loaders
    claims = await loaders.records.load_many(claim_keys)
    wanted: dict[ObjectKey, str] = {}
    groups = []
    for claim in claims:
        if isinstance(claim, ClaimRecord):
            for key, uid in pod_refs(claim).items():
                wanted.setdefault(key, uid)
            groups += group_refs(claim)
    if groups:
        members = await loaders.relation(Relation.GROUP_PODS).load_many(groups)
        for keys in members:
            for key in keys:
                wanted.setdefault(key, "")
    pods = await loaders.records.load_many(list(wanted))
    found = [
        pod
        for pod, uid in zip(pods, wanted.values(), strict=True)
        if same_pod(pod, uid) and isinstance(pod, PodRecord)
    ]
    return [Pod(record=pod) for pod in sorted(found, key=lambda p: (p.meta.namespace, p.meta.name))]


async def device_for(info: Info, key: DeviceKey) -> Device:
    """The device of an allocation result: the allocation result alone names it (driver, pool,
    device). A device no slice publishes answers with what its holders say (the model's
    unpublished entry); one the store does not know at all (a claim read after its holds
    changed) answers with its key, unpublished, so the holder stays visible."""
    entry = await info.context.loaders.devices.load(key)
    if entry is None:
        entry = DeviceEntry(
            key=key,
            device=DeviceRecord(name=key.device),
            slice=None,
            node=None,
            pool_complete=False,
            published=False,
        )
    return Device(entry=entry)


@strawberry.type(description="One claim's hold on one device (an allocation result).")
class Allocation:
    device_key: strawberry.Private[DeviceKey]
    claim_key: strawberry.Private[ObjectKey]
    request: str
    share_id: str | None = strawberry.field(name="shareID")
    consumed_capacity: JSON
    admin_access: bool

    @classmethod
    def from_ref(cls, device: DeviceKey, ref: AllocationRef) -> Allocation:
        return cls(
            device_key=device,
            claim_key=ref.claim,
            request=ref.request,
            share_id=ref.share_id,
            consumed_capacity=JSON(dict(ref.consumed_capacity)),
            admin_access=ref.admin_access,
        )

    @classmethod
    def from_result(cls, claim: ClaimRecord, result: AllocationResult) -> Allocation:
        meta = claim.meta
        return cls(
            device_key=DeviceKey(meta.cluster, result.driver, result.pool, result.device),
            claim_key=ObjectKey(meta.cluster, "ResourceClaim", meta.namespace, meta.name),
            request=result.request,
            share_id=result.share_id,
            consumed_capacity=JSON(dict(result.consumed_capacity)),
            admin_access=result.admin_access,
        )

    @strawberry.field
    async def device(self, info: Info) -> Device:
        return await device_for(info, self.device_key)

    async def _result(self, info: Info) -> AllocationResult | None:
        claim, key = await info.context.loaders.records.load(self.claim_key), self.device_key
        allocation = claim.allocation if isinstance(claim, ClaimRecord) else None
        wanted = (self.request, key.driver, key.pool, key.device, self.share_id)
        return next((r for r in allocation.results if (r.request, r.driver, r.pool, r.device, r.share_id) == wanted), None) if allocation else None  # fmt: skip

    @strawberry.field(description="Conditions the device must reach before the pod binds (from the slice, 1.34+).")  # fmt: skip
    async def binding_conditions(self, info: Info) -> list[str]:
        return list(r.binding_conditions) if (r := await self._result(info)) else []

    @strawberry.field
    async def binding_failure_conditions(self, info: Info) -> list[str]:
        return list(r.binding_failure_conditions) if (r := await self._result(info)) else []

    @strawberry.field(description="Node operations the kubelet skips for it (1.37).")
    async def skip_node_operations(self, info: Info) -> list[str]:
        return list(r.skip_node_operations) if (r := await self._result(info)) else []

    @strawberry.field(
        description="The device's compatibility groups per counter set, as the scheduler "
        "recorded them at allocation (KEP-5963, alpha): counter set -> group names."
    )
    async def compatibility_groups(self, info: Info) -> JSON:
        found = await self._result(info)
        return JSON({k: list(v) for k, v in found.compatibility_groups.items()} if found else {})

    @strawberry.field(description="The health the kubelets of the claim's consumer pods report "
                      "for this device (containerStatuses[].allocatedResourcesStatus).")  # fmt: skip
    async def health(self, info: Info) -> list[HealthT]:
        from .pods import PodDeviceHealth

        key, claim = self.device_key, self.claim_key.name
        return [
            PodDeviceHealth(pod=pod.record, report=r)
            for pod in await consumer_pods(info, [self.claim_key])
            for r in pod.record.device_health
            if (r.driver, r.pool, r.device) == (key.driver, key.pool, key.device)
            and r.claim_name in (None, claim)
        ]

    @strawberry.field(
        description="The holding claim (null: deleted since the device's holds were read, "
        "or outside your access)."
    )
    async def claim(self, info: Info) -> ResourceClaim | None:
        record = await info.context.loaders.records.load(self.claim_key)
        return ResourceClaim(record=record) if isinstance(record, ClaimRecord) else None


@strawberry.type(
    description="A virtual attribute computed per candidate device by a CEL expression, for "
    "the claim's matchAttribute/distinctAttribute constraints (KEP-6080, alpha). A run-time "
    "CEL error aborts scheduling: the pod stays Pending."
)
class DerivedAttribute:
    name: str
    expression: str

    @classmethod
    def all_of(cls, found: tuple[DerivedAttributeRecord, ...]) -> list[DerivedAttribute]:
        return [cls(name=d.name, expression=d.expression) for d in found]


@strawberry.type
class DeviceSubRequest:
    name: str
    device_class_name: str
    allocation_mode: str
    count: int
    selectors: list[str]
    capacity: JSON
    tolerations: JSON
    derived_attributes: list[DerivedAttribute]

    @classmethod
    def of(cls, sub: SubRequest) -> DeviceSubRequest:
        return cls(
            name=sub.name,
            device_class_name=sub.device_class_name,
            allocation_mode=sub.allocation_mode,
            count=sub.count,
            selectors=list(sub.selectors),
            capacity=JSON(dict(sub.capacity)),
            tolerations=JSON(list(sub.tolerations)),
            derived_attributes=DerivedAttribute.all_of(sub.derived_attributes),
        )


@strawberry.type
class DeviceRequest:
    name: str
    device_class_name: str | None
    allocation_mode: str
    count: int
    selectors: list[str]
    admin_access: bool
    capacity: JSON = strawberry.field(description="capacity.requests: name -> quantity")
    tolerations: JSON
    first_available: list[DeviceSubRequest]
    derived_attributes: list[DerivedAttribute] = strawberry.field(
        description="derivedAttributes of `exactly` (KEP-6080)."
    )

    @classmethod
    def of(cls, request: Request) -> DeviceRequest:
        return cls(
            name=request.name,
            device_class_name=request.device_class_name,
            allocation_mode=request.allocation_mode,
            count=request.count,
            selectors=list(request.selectors),
            admin_access=request.admin_access,
            capacity=JSON(dict(request.capacity)),
            tolerations=JSON(list(request.tolerations)),
            first_available=[DeviceSubRequest.of(s) for s in request.first_available],
            derived_attributes=DerivedAttribute.all_of(request.derived_attributes),
        )


@strawberry.type(description="status.allocation of a claim.")
class ClaimAllocation:
    claim: strawberry.Private[ClaimRecord]
    node_name: str | None
    allocated_at: DateTime | None

    @strawberry.field
    async def node(self, info: Info) -> NodeT | None:
        from .nodes import load_node

        return await load_node(info, self.claim.meta.cluster, self.node_name)

    @strawberry.field
    def devices(self) -> list[Allocation]:
        allocation = self.claim.allocation
        results = allocation.results if allocation is not None else ()
        return [Allocation.from_result(self.claim, r) for r in results]


def claim_key(record: ClaimRecord) -> ObjectKey:
    meta = record.meta
    return ObjectKey(meta.cluster, "ResourceClaim", meta.namespace, meta.name)


def _seconds_since(now: datetime, stamp: str | None) -> float | None:
    if not stamp:
        return None
    then = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    return max(0.0, (now - then).total_seconds())


@dataclass(frozen=True)
class ClaimMoment:
    """A claim's derived fields as one live event carries them (service.model.live): a
    subscriber is answered from the event's own moment, not from whatever the store holds
    when the event is resolved."""

    idle_since: str | None
    consumers: tuple[PodRecord, ...]


@strawberry.type
class ResourceClaim(NamespacedUidFields):
    record: strawberry.Private[ClaimRecord]
    moment: strawberry.Private[ClaimMoment | None] = None

    @strawberry.field
    def state(self) -> ClaimState:
        return ClaimState(self.record.state)

    @strawberry.field
    def origin(self) -> ClaimOrigin:
        return ClaimOrigin(self.record.origin)

    @strawberry.field(description="The template it was generated from (template claims).")
    async def template(self, info: Info) -> ResourceClaimTemplate | None:
        name = self.record.template_name
        if not name:
            return None
        meta = self.record.meta
        key = ObjectKey(meta.cluster, RESOURCE_CLAIM_TEMPLATE, meta.namespace, name)
        record = await info.context.loaders.records.load(key)
        return ResourceClaimTemplate(record=record) if isinstance(record, TemplateRecord) else None

    @strawberry.field
    def template_name(self) -> str | None:
        return self.record.template_name

    @strawberry.field
    def requests(self) -> list[DeviceRequest]:
        return [DeviceRequest.of(r) for r in self.record.requests]

    @strawberry.field
    def allocation(self) -> ClaimAllocation | None:
        allocation = self.record.allocation
        if allocation is None:
            return None
        return ClaimAllocation(
            claim=self.record,
            node_name=allocation.node_name,
            allocated_at=to_datetime(allocation.allocated_at),
        )

    @strawberry.field(
        description="Pods in status.reservedFor, and the pods of the PodGroups it names."
    )
    async def consumers(self, info: Info) -> list[PodT]:
        if self.moment is not None:
            from .pods import Pod

            return [Pod(record=pod) for pod in self.moment.consumers]
        return await consumer_pods(info, [claim_key(self.record)])

    @strawberry.field(
        description="The PodGroups naming it in spec.resourceClaims (or their status) and "
        "those its status.reservedFor names, by name."
    )
    async def pod_groups(self, info: Info) -> list[PodGroupT]:
        from .pod_groups import groups_of_claim

        return await groups_of_claim(info, self.record)

    @strawberry.field(description="Allocated, and no consumer pod Running.")
    async def idle(self, info: Info) -> bool:
        return await self._idle_since(info) is not None

    @strawberry.field(description="When it last became idle (null when not idle).")
    async def idle_since(self, info: Info) -> DateTime | None:
        return to_datetime(await self._idle_since(info))

    async def _idle_since(self, info: Info) -> str | None:
        if self.moment is not None:
            return self.moment.idle_since
        return await info.context.loaders.idle_since.load(claim_key(self.record))

    @strawberry.field
    def created_at(self) -> DateTime | None:
        return to_datetime(self.record.meta.created_at)

    @strawberry.field(description="Seconds since creation while PENDING (null otherwise).")
    def pending_seconds(self, info: Info) -> float | None:
        if self.record.state != "pending":
            return None
        return _seconds_since(info.context.now(), self.record.meta.created_at)


@strawberry.type
class ResourceClaimTemplate(NamespacedFields):
    record: strawberry.Private[TemplateRecord]

    @strawberry.field
    def requests(self) -> list[DeviceRequest]:
        return [DeviceRequest.of(r) for r in self.record.requests]

    @strawberry.field(description="Claims generated from this template.")
    async def claims(self, info: Info) -> list[ResourceClaim]:
        meta = self.record.meta
        key = ObjectKey(meta.cluster, RESOURCE_CLAIM_TEMPLATE, meta.namespace, meta.name)
        keys = await info.context.loaders.relation(Relation.TEMPLATE_CLAIMS).load(key)
        return await load_claims(info, keys)
