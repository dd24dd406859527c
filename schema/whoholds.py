"""`whoHolds(device, cluster)`: the claims holding the devices a person names; `devicesNamed`:
those devices themselves.

The question is the questions layer's (`service.questions.holders`: uuid, `driver/pool/device`,
`node/device` or a bare name, then the claims holding those devices and their consumer pods);
this resolver asks it over the request's scoped reader and wraps each holding as a `Holding`,
with the claims and pods it read primed into the request's loaders.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import strawberry

from dra_mirror.service.model.records import AllocationRef, ClaimRecord, DeviceKey, PodRecord
from dra_mirror.service.questions.holders import holdings_named, resolve_devices

from .claims import ResourceClaim, device_for
from .context import Info
from .devices import Device
from .loaders import Loaders
from .reader import ScopedReader
from .scalars import JSON, DateTime, to_datetime

if TYPE_CHECKING:
    from .pods import Pod

PodT = Annotated["Pod", strawberry.lazy("dra_mirror.schema.pods")]


@strawberry.type(description="A claim holding a device, with the pods using it.")
class Holding:
    """Built by `whoHolds` with the claim and its consumer pods already loaded (batched), so
    its fields resolve without further awaits."""

    device_key: strawberry.Private[DeviceKey]
    ref: strawberry.Private[AllocationRef]
    claim_record: strawberry.Private[ClaimRecord | None]
    pod_records: strawberry.Private[list[PodRecord]]

    @strawberry.field
    def cluster(self) -> str:
        return self.device_key.cluster

    @strawberry.field
    async def device(self, info: Info) -> Device:
        return await device_for(info, self.device_key)

    @strawberry.field(
        description="The holding claim (null: deleted since the device's holds were read)."
    )
    def claim(self) -> ResourceClaim | None:
        record = self.claim_record
        return ResourceClaim(record=record) if record is not None else None

    @strawberry.field
    def pods(self) -> list[PodT]:
        from .pods import Pod

        return [Pod(record=pod) for pod in self.pod_records]

    @strawberry.field
    def request(self) -> str:
        return self.ref.request

    @strawberry.field(name="shareID")
    def share_id(self) -> str | None:
        return self.ref.share_id

    @strawberry.field
    def consumed_capacity(self) -> JSON:
        return JSON(dict(self.ref.consumed_capacity))

    @strawberry.field(description="When the claim was allocated, where the API server says.")
    def since(self) -> DateTime | None:
        allocation = self.claim_record.allocation if self.claim_record is not None else None
        return to_datetime(allocation.allocated_at) if allocation else None


async def who_holds(info: Info, spec: str, cluster: str | None) -> list[Holding]:
    # The root of a chat-ops hot path: direct batched reads (one store call per step, no
    # loader futures), and the answer's claims and pods loaded up front.
    reader: ScopedReader = info.context.reader
    loaders: Loaders = info.context.loaders
    _, found = await holdings_named(reader, spec, cluster=cluster)
    loaders.records.prime_many(found.records)
    return [
        Holding(device_key=h.device, ref=h.ref, claim_record=h.claim, pod_records=h.pods)
        for h in found.holdings
    ]


async def devices_named(info: Info, spec: str, cluster: str | None) -> list[Device]:
    # Held or free, seen from any scope that sees their cluster: chat answers "held in another
    # namespace" from their status and withheldAllocations when whoHolds shows no holder.
    reader: ScopedReader = info.context.reader
    keys = await resolve_devices(reader, spec, cluster=cluster)
    entries = await reader.devices(keys) if keys else []
    return [Device(entry=e) for e in entries if e is not None]
