"""Who holds a device, answered from a state store: from what a person types to the devices it
names, and from those devices to the claims holding them and the pods using those claims.

What people type (chatops, dashboards, the command line), tried in this order:

1. a hardware uuid (`GPU-21f6a090-…`, `MIG-…`): the `UUID_DEVICES` index, across clusters;
2. `driver/pool/device` (three or more parts: pool names may themselves contain `/`, so the
   first part is the driver and the last the device);
3. `node/device` (two parts): the node's devices with that name;
4. a bare device name (`gpu-3`): the `NAME_DEVICES` index, across clusters.

An ambiguous name (`gpu-0` exists on every node) names every match; `cluster` narrows the
search. A device that exists but is free contributes no holding. Holdings are sorted by device
key, then claim, request and share, so answers are stable. A claim's consumers are the pods of
its `status.reservedFor` (the authoritative "in use" set; an entry whose pod is gone, or was
replaced by a pod with another uid, is not that pod) and the pods of the PodGroups it names
(service.model.consumers).

The GraphQL `whoHolds` (`schema.whoholds`) is these functions over the request's scoped reader;
the who-holds question every front end asks (`service.questions.holdings`) is built on them.

`consumers_of(reader, claims)` gives those consumer pods for any claims (idle holders list them).

Promises: one batched store call per step (devices, allocations, claims, pods), never one per
device; reads only, through `HoldersReader` (four of the `StateReader` reads).
"""

from __future__ import annotations

import builtins
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from dra_mirror.service.model.consumers import GroupKey, group_refs, pod_refs, same_pod
from dra_mirror.service.model.records import (
    AllocationRef,
    ClaimRecord,
    DeviceEntry,
    DeviceKey,
    ObjectKey,
    PodRecord,
    Record,
)
from dra_mirror.service.stores.protocols import ClusterStatus, Relation, UuidHolders

__all__ = [
    "UUID_PREFIXES",
    "HoldersReader",
    "Holding",
    "Holdings",
    "consumer_keys",
    "consumers_of",
    "holdings_of",
    "resolve_devices",
    "same_pod",
]

UUID_PREFIXES = ("GPU-", "MIG-")


class HoldersReader(Protocol):
    """The reads these questions make: part of `StateReader` (a store, or a GraphQL request's
    scoped reader over one)."""

    async def clusters(self) -> builtins.list[ClusterStatus]: ...

    async def get(self, keys: Sequence[ObjectKey]) -> builtins.list[Record | None]: ...

    async def devices(self, keys: Sequence[DeviceKey]) -> builtins.list[DeviceEntry | None]: ...

    async def lookup(
        self, relation: Relation, keys: Sequence[Any]
    ) -> builtins.list[builtins.list[Any]]: ...

    async def holders_by_uuid(self, uuid: str) -> UuidHolders: ...


async def resolve_devices(
    reader: HoldersReader, spec: str, *, cluster: str | None
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


consumer_keys = pod_refs  # pod keys (with the uid reserved) of a claim's status.reservedFor


@dataclass(frozen=True)
class Holding:
    """One claim holding one device (a share of it, for a shared device)."""

    device: DeviceKey
    ref: AllocationRef
    claim: ClaimRecord | None  # None: deleted since the device's holds were read
    pods: list[PodRecord]


@dataclass
class Holdings:
    """The holdings of some devices, and every claim and pod read to build them (None: not
    there, or out of scope); a GraphQL request primes its loaders with them, so the fields
    resolve without reading again."""

    holdings: list[Holding] = field(default_factory=list)
    records: dict[ObjectKey, Record | None] = field(default_factory=dict)


async def consumers_of(
    reader: HoldersReader, claims: Mapping[ObjectKey, Record | None]
) -> tuple[dict[ObjectKey, list[PodRecord]], dict[ObjectKey, Record | None]]:
    """Each claim's consumer pods (by name), and every pod record read to find them: the pods
    of its `status.reservedFor` (with the uid reserved) and of the PodGroups it names. One
    batched read for the groups, one for the pods."""
    wanted: dict[ObjectKey, str] = {}
    groups: dict[GroupKey, list[ObjectKey]] = {}
    # each claim's reserved pods and PodGroups, read once
    reserved: dict[ObjectKey, tuple[dict[ObjectKey, str], list[GroupKey]]] = {}
    for key, claim in claims.items():
        if isinstance(claim, ClaimRecord):
            named, named_groups = reserved[key] = (consumer_keys(claim), group_refs(claim))
            for pod_key, uid in named.items():
                wanted.setdefault(pod_key, uid)
            groups.update((g, []) for g in named_groups)
    if groups:
        found_groups = await reader.lookup(Relation.GROUP_PODS, list(groups))
        for group, members in zip(list(groups), found_groups, strict=True):
            groups[group] = members
            for pod_key in members:
                wanted.setdefault(pod_key, "")
    pods: dict[ObjectKey, Record | None] = (
        dict(zip(wanted, await reader.get(list(wanted)), strict=True)) if wanted else {}
    )
    out: dict[ObjectKey, list[PodRecord]] = {}
    for key, (named, named_groups) in reserved.items():
        if named_groups:
            named = dict(named)
            for group in named_groups:
                named.update((k, "") for k in groups.get(group, ()) if k not in named)
        consumers = [
            pod
            for k, uid in named.items()
            if same_pod(pod := pods.get(k), uid) and isinstance(pod, PodRecord)
        ]
        if len(consumers) > 1:
            consumers.sort(key=lambda p: p.meta.name)
        out[key] = consumers
    return out, pods


async def holdings_named(
    reader: HoldersReader, spec: str, *, cluster: str | None
) -> tuple[list[DeviceKey], Holdings]:
    """`resolve_devices` then `holdings_of`. A uuid (a spec without "/") is read with its
    devices' holds and claims in one store call (`holders_by_uuid`: one round trip to Redis
    instead of three); a spec no device has as uuid is resolved as `resolve_devices` does."""
    spec = spec.strip()
    if "/" not in spec:
        found = await reader.holders_by_uuid(spec)
        if found.devices:
            keys = sorted({k for k in found.devices if not cluster or k.cluster == cluster})
            return keys, await holdings_of(reader, keys, read=found)
    keys = await resolve_devices(reader, spec, cluster=cluster)
    return keys, await holdings_of(reader, keys)


async def holdings_of(
    reader: HoldersReader, keys: Sequence[DeviceKey], *, read: UuidHolders | None = None
) -> Holdings:
    """The claims holding each of `keys` (in key order), with their consumer pods. `read`:
    the holds and claims already read (`holders_by_uuid`); what it lacks is read here."""
    if not keys:
        return Holdings()
    holds: list[list[AllocationRef]]
    if read is not None and all(k in read.holds for k in keys):
        holds = [read.holds[k] for k in keys]
    else:
        holds = await reader.lookup(Relation.DEVICE_ALLOCATIONS, keys)
    claim_keys = list(dict.fromkeys(ref.claim for refs in holds for ref in refs))
    known = read.claims if read is not None else {}
    claims: dict[ObjectKey, Record | None] = {k: known[k] for k in claim_keys if k in known}
    missing = [k for k in claim_keys if k not in claims]
    if missing:
        claims.update(zip(missing, await reader.get(missing), strict=True))
    claims = {k: claims[k] for k in claim_keys}  # in the order of the holds
    consumers, pods = await consumers_of(reader, claims)
    found = Holdings(records={**claims, **pods})
    for device, refs in zip(keys, holds, strict=True):
        if len(refs) > 1:
            refs = sorted(refs, key=lambda r: (r.claim, r.request, r.share_id or ""))
        for ref in refs:
            claim = claims.get(ref.claim)
            if not isinstance(claim, ClaimRecord):
                # Deleted since the holds were read (a store read twice is no snapshot; holds
                # of claims outside the request's scope are not read at all): the holding
                # was there, its claim link dangles.
                found.holdings.append(Holding(device=device, ref=ref, claim=None, pods=[]))
                continue
            found.holdings.append(
                Holding(device=device, ref=ref, claim=claim, pods=consumers[ref.claim])
            )
    return found
