"""`whoHolds(device, cluster)`: the claims holding the devices a person names; `devicesNamed`:
those devices themselves.

The question is the questions layer's (`service.questions.holders`: uuid, `driver/pool/device`,
`node/device` or a bare name, then the claims holding those devices and their consumer pods);
this resolver asks it over the request's scoped reader and wraps each holding as a `Holding`,
with the claims and pods it read primed into the request's loaders.
"""

from __future__ import annotations

from strawberry.types import Info

from dra_mirror.service.questions.holders import holdings_of, resolve_devices

from .claims import Holding
from .devices import Device
from .loaders import Loaders
from .reader import ScopedReader


async def who_holds(info: Info, spec: str, cluster: str | None) -> list[Holding]:
    # The root of a chat-ops hot path: direct batched reads (one store call per step, no
    # loader futures), and the answer's claims and pods loaded up front.
    reader: ScopedReader = info.context.reader
    loaders: Loaders = info.context.loaders
    keys = await resolve_devices(reader, spec, cluster=cluster)
    found = await holdings_of(reader, keys)
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
