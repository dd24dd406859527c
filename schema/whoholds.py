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

from collections.abc import Sequence

from strawberry.types import Info

from service.model.records import AllocationRef, ClaimRecord, DeviceKey, ObjectKey
from service.stores.protocols import Relation

from .claims import Holding, consumer_keys, same_pod
from .loaders import Loaders

UUID_PREFIXES = ("GPU-", "MIG-")


async def resolve_devices(
    loaders: Loaders, clusters: Sequence[str], spec: str, *, cluster: str | None
) -> list[DeviceKey]:
    """The device keys `spec` names, restricted to `cluster` when given."""
    spec = spec.strip()
    wanted = [cluster] if cluster else list(clusters)
    keys: list[DeviceKey] = []
    parts = spec.split("/")
    if "/" not in spec:
        # A uuid first (any string may be one: drivers other than NVIDIA publish their own).
        keys = list(await loaders.relation(Relation.UUID_DEVICES).load(spec))
        if not keys and not spec.startswith(UUID_PREFIXES):
            keys = list(await loaders.relation(Relation.NAME_DEVICES).load(spec))
    elif len(parts) >= 3:
        driver, pool, device = parts[0], "/".join(parts[1:-1]), parts[-1]
        candidates = [DeviceKey(c, driver, pool, device) for c in wanted]
        entries = await loaders.devices.load_many(candidates)
        keys = [k for k, e in zip(candidates, entries, strict=True) if e is not None]
    else:
        node, device = parts
        found = await loaders.relation(Relation.NODE_DEVICES).load_many([(c, node) for c in wanted])
        keys = [k for node_keys in found for k in node_keys if k.device == device]
    if cluster:
        keys = [k for k in keys if k.cluster == cluster]
    return sorted(set(keys))


async def who_holds(info: Info, spec: str, cluster: str | None) -> list[Holding]:
    loaders: Loaders = info.context.loaders
    clusters = [s.name for s in await info.context.reader.clusters()]
    keys = await resolve_devices(loaders, clusters, spec, cluster=cluster)
    holds: list[list[AllocationRef]] = await loaders.relation(
        Relation.DEVICE_ALLOCATIONS
    ).load_many(keys)
    # The holders' claims, then all their consumer pods: two batched loads for the answer.
    claim_keys = list(dict.fromkeys(ref.claim for refs in holds for ref in refs))
    claims = dict(zip(claim_keys, await loaders.records.load_many(claim_keys), strict=True))
    wanted: dict[ObjectKey, str] = {}
    for claim in claims.values():
        if isinstance(claim, ClaimRecord):
            for key, uid in consumer_keys(claim).items():
                wanted.setdefault(key, uid)
    pods = dict(zip(wanted, await loaders.records.load_many(list(wanted)), strict=True))
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
