"""`whoHolds(device, cluster)`: from what a person types to the claims holding a device.

What people type (chatops, dashboards), tried in this order:

1. a hardware uuid (`GPU-21f6a090-…`, `MIG-…`): the `UUID_DEVICES` index, across clusters;
2. `driver/pool/device` (three or more parts: pool names may themselves contain `/`, so the
   first part is the driver and the last the device);
3. `node/device` (two parts): the node's devices with that name;
4. a bare device name (`gpu-3`): the `NAME_DEVICES` index, across clusters.

An ambiguous name (`gpu-0` exists on every node) returns the holders of every match; `cluster`
narrows the search. A device that exists but is free contributes no holding. Results are sorted
by device key, then claim, so answers are stable.
"""

from __future__ import annotations

from strawberry.types import Info

from dra_mirror.service.model.records import AllocationRef, ClaimRecord, DeviceKey, ObjectKey
from dra_mirror.service.stores.protocols import Relation

from .claims import Holding, consumer_keys, same_pod
from .loaders import Loaders
from .reader import ScopedReader

UUID_PREFIXES = ("GPU-", "MIG-")


async def resolve_devices(
    reader: ScopedReader, spec: str, *, cluster: str | None
) -> list[DeviceKey]:
    """The device keys `spec` names, restricted to `cluster` when given."""
    spec = spec.strip()
    keys: list[DeviceKey] = []
    parts = spec.split("/")
    if "/" not in spec:
        # A uuid first (any string may be one: drivers other than NVIDIA publish their own).
        (keys,) = await reader.lookup(Relation.UUID_DEVICES, [spec])
        if not keys and not spec.startswith(UUID_PREFIXES):
            (keys,) = await reader.lookup(Relation.NAME_DEVICES, [spec])
    else:
        wanted = [cluster] if cluster else [s.name for s in await reader.clusters()]
        if len(parts) >= 3:
            driver, pool, device = parts[0], "/".join(parts[1:-1]), parts[-1]
            candidates = [DeviceKey(c, driver, pool, device) for c in wanted]
            entries = await reader.devices(candidates)
            keys = [k for k, e in zip(candidates, entries, strict=True) if e is not None]
        else:
            node, device = parts
            found = await reader.lookup(Relation.NODE_DEVICES, [(c, node) for c in wanted])
            keys = [k for node_keys in found for k in node_keys if k.device == device]
    if cluster:
        keys = [k for k in keys if k.cluster == cluster]
    return sorted(set(keys))


async def who_holds(info: Info, spec: str, cluster: str | None) -> list[Holding]:
    # The root of a chat-ops hot path: direct batched reads (one store call per step, no
    # loader futures), and the answer's claims and pods loaded up front.
    reader: ScopedReader = info.context.reader
    loaders: Loaders = info.context.loaders
    keys = await resolve_devices(reader, spec, cluster=cluster)
    holds: list[list[AllocationRef]] = (
        await reader.lookup(Relation.DEVICE_ALLOCATIONS, keys) if keys else []
    )
    claim_keys = list(dict.fromkeys(ref.claim for refs in holds for ref in refs))
    claims = dict(zip(claim_keys, await reader.get(claim_keys), strict=True)) if claim_keys else {}
    wanted: dict[ObjectKey, str] = {}
    for claim in claims.values():
        if isinstance(claim, ClaimRecord):
            for key, uid in consumer_keys(claim).items():
                wanted.setdefault(key, uid)
    pods = dict(zip(wanted, await reader.get(list(wanted)), strict=True)) if wanted else {}
    loaders.records.prime_many({**claims, **pods})  # type: ignore[dict-item]
    holdings: list[Holding] = []
    for key, refs in zip(keys, holds, strict=True):
        for ref in sorted(refs, key=lambda r: (r.claim, r.request, r.share_id or "")):
            claim = claims.get(ref.claim)
            if not isinstance(claim, ClaimRecord):
                continue  # out of the request's scope, or deleted since the index answered
            consumers = [
                pods[k] for k, uid in consumer_keys(claim).items() if same_pod(pods.get(k), uid)
            ]
            holdings.append(
                Holding(device_key=key, ref=ref, claim_record=claim, pod_records=consumers)
            )  # type: ignore[arg-type]
    return holdings
