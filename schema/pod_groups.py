"""GraphQL types of PodGroups (scheduling.k8s.io, KEP-5729): pods scheduled together that
share the ResourceClaims the group names.

A claim the scheduler reserved for a PodGroup (its `status.reservedFor` names the group) stays
reserved until the group is deleted, even when none of the group's pods is left: `idleHeld`
says that a group holds devices (one of its claims is allocated and reserved for it) while none
of its pods runs — what the claims' own `idle` says of each claim, for the group as a whole.
`ResourceClaim.podGroups` and `Pod.podGroup` lead here from the claims and the pods.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import strawberry

from dra_mirror.service.model.consumers import group_refs
from dra_mirror.service.model.records import (
    POD_GROUP,
    RESOURCE_CLAIM,
    ClaimRecord,
    ObjectKey,
    PodGroupClaim,
    PodGroupRecord,
    PodRecord,
)
from dra_mirror.service.model.relations import Relation

from .claims import ResourceClaim
from .context import Info
from .identity import NamespacedUidFields
from .scalars import DateTime, to_datetime

if TYPE_CHECKING:
    from .pods import Pod

PodT = Annotated["Pod", strawberry.lazy("dra_mirror.schema.pods")]
RUNNING = "Running"


def group_key(record: PodGroupRecord) -> ObjectKey:
    meta = record.meta
    return ObjectKey(meta.cluster, POD_GROUP, meta.namespace, meta.name)


@strawberry.type(name="PodGroupClaim", description="One spec.resourceClaims entry of a PodGroup.")
class PodGroupClaimEntry:
    group: strawberry.Private[PodGroupRecord]
    entry: strawberry.Private[PodGroupClaim]

    @strawberry.field(description="The entry's name, which its pods' own claim entries repeat.")
    def name(self) -> str:
        return self.entry.name

    @strawberry.field(
        description="The claim's name: resourceClaimName, or the name generated for the "
        "template (status.resourceClaimStatuses); null until generated."
    )
    def resource_claim_name(self) -> str | None:
        return self.entry.claim_name

    @strawberry.field
    def resource_claim_template_name(self) -> str | None:
        return self.entry.template_name

    @strawberry.field(description="The claim as mirrored now.")
    async def claim(self, info: Info) -> ResourceClaim | None:
        if not self.entry.claim_name:
            return None
        meta = self.group.meta
        key = ObjectKey(meta.cluster, RESOURCE_CLAIM, meta.namespace, self.entry.claim_name)
        record = await info.context.loaders.record(ClaimRecord, key)
        return ResourceClaim(record=record) if record is not None else None


@strawberry.type(
    description="A PodGroup (scheduling.k8s.io, KEP-5729): pods scheduled together, sharing "
    "the claims it names."
)
class PodGroup(NamespacedUidFields):
    record: strawberry.Private[PodGroupRecord]

    @strawberry.field(description="Basic, or Gang (all or nothing, at least minCount pods).")
    def policy(self) -> str:
        return self.record.policy

    @strawberry.field(description="spec.schedulingPolicy.gang.minCount.")
    def min_count(self) -> int | None:
        return self.record.min_count

    @strawberry.field(description="The Workload it was made from.")
    def workload(self) -> str | None:
        return self.record.workload

    @strawberry.field(description="Whether the scheduler placed it (null: not yet said).")
    def scheduled(self) -> bool | None:
        return self.record.scheduled

    @strawberry.field
    def created_at(self) -> DateTime | None:
        return to_datetime(self.record.meta.created_at)

    @strawberry.field(description="spec.resourceClaims: the claims its pods share.")
    def claims(self) -> list[PodGroupClaimEntry]:
        return [PodGroupClaimEntry(group=self.record, entry=c) for c in self.record.claims]

    @strawberry.field(description="The pods whose spec.schedulingGroup names it, by name.")
    async def pods(self, info: Info) -> list[PodT]:
        from .pods import Pod

        return [Pod(record=p) for p in await _pods(info, self.record)]

    @strawberry.field(description="How many of its pods are Running.")
    async def running_pods(self, info: Info) -> int:
        return sum(1 for p in await _pods(info, self.record) if p.phase == RUNNING)

    @strawberry.field(description="Its claims that are allocated and reserved for it.")
    async def held_claims(self, info: Info) -> list[ResourceClaim]:
        return [ResourceClaim(record=c) for c in await _held(info, self.record)]

    @strawberry.field(
        description="It holds devices (one of its claims is allocated and reserved for it) "
        "and none of its pods is Running: the devices stay held until it is deleted."
    )
    async def idle_held(self, info: Info) -> bool:
        if not await _held(info, self.record):
            return False
        return not any(p.phase == RUNNING for p in await _pods(info, self.record))


async def _pods(info: Info, group: PodGroupRecord) -> list[PodRecord]:
    meta = group.meta
    keys = await info.context.loaders.relation(Relation.GROUP_PODS).load(
        (meta.cluster, meta.namespace, meta.name)
    )
    return await info.context.loaders.records_of(PodRecord, sorted(keys))


async def _held(info: Info, group: PodGroupRecord) -> list[ClaimRecord]:
    meta = group.meta
    keys = sorted(
        {
            ObjectKey(meta.cluster, RESOURCE_CLAIM, meta.namespace, c.claim_name)
            for c in group.claims
            if c.claim_name
        }
    )
    mine = (meta.cluster, meta.namespace, meta.name)
    return [
        c
        for c in await info.context.loaders.records_of(ClaimRecord, keys)
        if c.allocation is not None and mine in group_refs(c)
    ]


async def groups_of_claim(info: Info, claim: ClaimRecord) -> list[PodGroup]:
    """The PodGroups naming the claim, and those it is reserved for, by name."""
    meta = claim.meta
    key = ObjectKey(meta.cluster, RESOURCE_CLAIM, meta.namespace, meta.name)
    keys = set(await info.context.loaders.relation(Relation.CLAIM_GROUPS).load(key))
    keys |= {ObjectKey(c, POD_GROUP, ns, name) for c, ns, name in group_refs(claim)}
    found = await info.context.loaders.records_of(PodGroupRecord, sorted(keys))
    return [PodGroup(record=g) for g in found]
