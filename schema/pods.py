"""GraphQL types of Pods: their claims (pod-local name → the resolved ResourceClaim), the
devices those claims hold, their containers (limits included, so pods still asking for
`nvidia.com/gpu` the device-plugin way are visible), and their node.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Annotated

import strawberry

from dra_mirror.service.model.records import (
    POD_GROUP,
    RESOURCE_CLAIM,
    ClaimRecord,
    DeviceHealth,
    DeviceKey,
    ObjectKey,
    PodGroupRecord,
    PodRecord,
)
from dra_mirror.service.model.records import PodClaim as PodClaimRecord
from dra_mirror.service.questions.pods import claim_names

from .claims import ResourceClaim, device_for
from .context import Info
from .devices import Device
from .identity import NamespacedUidFields
from .scalars import JSON, DateTime, to_datetime

if TYPE_CHECKING:
    from .nodes import Node
    from .pod_groups import PodGroup

NodeT = Annotated["Node", strawberry.lazy("dra_mirror.schema.nodes")]
PodGroupT = Annotated["PodGroup", strawberry.lazy("dra_mirror.schema.pod_groups")]


@strawberry.type(description="One pod.spec.resourceClaims entry, resolved.")
class PodClaim:
    pod: strawberry.Private[PodRecord]
    entry: strawberry.Private[PodClaimRecord]

    @strawberry.field(description="The pod-local name.")
    def name(self) -> str:
        return self.entry.name

    @strawberry.field(description="The ResourceClaim's name (generated ones from pod status).")
    def claim_name(self) -> str | None:
        return self.entry.claim_name

    @strawberry.field
    def template_name(self) -> str | None:
        return self.entry.template_name

    @strawberry.field(description="Containers (and init containers) that list this claim.")
    def containers(self) -> list[str]:
        return list(self.entry.containers)

    @strawberry.field
    async def claim(self, info: Info) -> ResourceClaim | None:
        if not self.entry.claim_name:
            return None
        meta = self.pod.meta
        key = ObjectKey(meta.cluster, RESOURCE_CLAIM, meta.namespace, self.entry.claim_name)
        record = await info.context.loaders.records.load(key)
        return ResourceClaim(record=record) if isinstance(record, ClaimRecord) else None


@strawberry.type(
    description="The health the kubelet reports for one device allocated to one of the pod's "
    "containers (containerStatuses[].allocatedResourcesStatus)."
)
class PodDeviceHealth:
    pod: strawberry.Private[PodRecord]
    report: strawberry.Private[DeviceHealth]

    @strawberry.field
    def container(self) -> str:
        return self.report.container

    @strawberry.field(
        description='The status entry\'s name as written: "claim:<claim>[/<request>]".'
    )
    def resource(self) -> str:
        return self.report.resource

    @strawberry.field(description="The ResourceClaim it names, resolved through the pod's claims.")
    def claim_name(self) -> str | None:
        return self.report.claim_name

    @strawberry.field
    def request(self) -> str | None:
        return self.report.request

    @strawberry.field
    def driver(self) -> str:
        return self.report.driver

    @strawberry.field
    def pool(self) -> str:
        return self.report.pool

    @strawberry.field(name="deviceName")
    def device_name(self) -> str:
        return self.report.device

    @strawberry.field(description="Healthy, Unhealthy or Unknown.")
    def health(self) -> str:
        return self.report.health

    @strawberry.field
    def message(self) -> str | None:
        return self.report.message

    @strawberry.field(description="The device (answered from the report's key when unpublished).")
    async def device(self, info: Info) -> Device:
        r = self.report
        return await device_for(info, DeviceKey(self.pod.meta.cluster, r.driver, r.pool, r.device))


@strawberry.type(
    description="Which request of the pod's extended-resource claim serves a container's "
    "extended resource (status.extendedResourceClaimStatus.requestMappings)."
)
class ExtendedResourceRequest:
    container: str
    resource_name: str
    request: str


@strawberry.type
class Container:
    name: str
    init: bool
    requests: JSON
    limits: JSON
    claims: list[str] = strawberry.field(description="Pod-local claim names (request if set).")


@strawberry.type
class Pod(NamespacedUidFields):
    record: strawberry.Private[PodRecord]

    @strawberry.field
    def phase(self) -> str:
        return self.record.phase

    @strawberry.field(description="Why it is not running, when the API says (e.g. Unschedulable).")
    def reason(self) -> str | None:
        return self.record.reason

    @strawberry.field
    def node_name(self) -> str | None:
        return self.record.node_name

    @strawberry.field
    def created_at(self) -> DateTime | None:
        return to_datetime(self.record.meta.created_at)

    @strawberry.field
    async def node(self, info: Info) -> NodeT | None:
        from .nodes import load_node

        return await load_node(info, self.record.meta.cluster, self.record.node_name)

    @strawberry.field
    def claims(self) -> list[PodClaim]:
        return [PodClaim(pod=self.record, entry=c) for c in self.record.claims]

    @strawberry.field(description="The PodGroup its spec.schedulingGroup names, if mirrored.")
    async def pod_group(self, info: Info) -> PodGroupT | None:
        from .pod_groups import PodGroup

        if not self.record.pod_group:
            return None
        meta = self.record.meta
        key = ObjectKey(meta.cluster, POD_GROUP, meta.namespace, self.record.pod_group)
        record = await info.context.loaders.record(PodGroupRecord, key)
        return PodGroup(record=record) if record is not None else None

    @strawberry.field(description="The claim made for its extended-resource requests, if any.")
    async def extended_resource_claim(self, info: Info) -> ResourceClaim | None:
        name = self.record.extended_claim_name
        if not name:
            return None
        meta = self.record.meta
        record = await info.context.loaders.records.load(
            ObjectKey(meta.cluster, RESOURCE_CLAIM, meta.namespace, name)
        )
        return ResourceClaim(record=record) if isinstance(record, ClaimRecord) else None

    @strawberry.field
    def containers(self) -> list[Container]:
        return [
            Container(
                name=c.name,
                init=c.init,
                requests=JSON(dict(c.requests)),
                limits=JSON(dict(c.limits)),
                claims=[f"{cc.claim}/{cc.request}" if cc.request else cc.claim for cc in c.claims],
            )
            for c in self.record.containers
        ]

    @strawberry.field(
        description="spec.schedulingGroup.podGroupName: the PodGroup it belongs to (a claim "
        "reserved for that group is consumed by its pods)."
    )
    def pod_group_name(self) -> str | None:
        return self.record.pod_group

    @strawberry.field
    def extended_resource_requests(self) -> list[ExtendedResourceRequest]:
        return [
            ExtendedResourceRequest(
                container=r.container, resource_name=r.resource, request=r.request
            )
            for r in self.record.extended_requests
        ]

    @strawberry.field(
        description="Per device allocated to its containers, the health the kubelet reports."
    )
    def device_health(self) -> list[PodDeviceHealth]:
        return [PodDeviceHealth(pod=self.record, report=r) for r in self.record.device_health]

    @strawberry.field(description="Devices allocated to the claims this pod uses.")
    async def devices(self, info: Info) -> list[Device]:
        meta = self.record.meta
        keys = [
            ObjectKey(meta.cluster, RESOURCE_CLAIM, meta.namespace, n)
            for n in claim_names(self.record)
        ]
        claims = await info.context.loaders.records.load_many(keys)
        device_keys = []
        for claim in claims:
            if isinstance(claim, ClaimRecord) and claim.allocation is not None:
                for result in claim.allocation.results:
                    device_keys.append((meta.cluster, result.driver, result.pool, result.device))
        unique = [DeviceKey(*k) for k in dict.fromkeys(device_keys)]
        return list(await asyncio.gather(*(device_for(info, key) for key in unique)))
