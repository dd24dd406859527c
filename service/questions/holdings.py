"""Who holds a device: the devices a person names, what each is now, and who holds it.

`who_holds(asker, spec, cluster=None)` answers from the store, through the asker's scope:

* `devices` — every device `spec` names (a uuid, `node/device`, `driver/pool/device` or a
  bare name: `service.questions.holders.resolve_devices`), with its status as the model
  derived it (free, held, shared, blocked; None for a device no slice publishes, known only
  from the claims holding it) and how many of its allocations belong to claims the asker may
  not see (`withheld`: counted, never named);
* `holdings` — one row per claim the asker may see holding one of them: the device (name,
  uuid, model, node), the claim (namespace/name, origin, state), its consumer pods, since when
  it is held (the API server's allocationTimestamp, else when history saw the allocation begin,
  else unknown) and whether it is idle (allocated, no consumer pod Running) and since when.

An unknown cluster raises `UnknownCluster`; a name that names nothing is an answer with no
devices (`unknown`), which each front end words as it should. Rows are sorted by device key,
then claim, request and share.

Promises: one batched store call per step, never one per device; history is asked at most
once, and only when the API server left some `since` unknown.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from dra_mirror.service.model import inventory
from dra_mirror.service.model.physical import entry_product, product_name
from dra_mirror.service.model.records import (
    AllocationRef,
    ClaimRecord,
    DeviceEntry,
    DeviceKey,
    PodRecord,
    key_of,
)
from dra_mirror.service.stores.protocols import StoreUnavailable

from .asker import Asker
from .holders import holdings_named

__all__ = ["HoldingRow", "NamedDevice", "WhoHolds", "device_statuses", "product_name", "who_holds"]


@dataclass
class HoldingRow:
    """One claim holding one device (a share of it, for a shared device)."""

    cluster: str
    node: str | None
    device: str
    driver: str
    pool: str
    uuid: str | None
    model: str | None
    claim: str  # namespace/name
    origin: str  # TEMPLATE, EXTENDED_RESOURCE or MANUAL
    state: str  # PENDING, ALLOCATED, RESERVED or DELETING
    pods: list[str]  # namespace/name (phase) of the consumer pods
    since: str | None  # allocated at (API server), else when history saw it allocated
    idle: bool
    idle_since: str | None
    request: str = ""
    share_id: str | None = None

    @property
    def device_ref(self) -> tuple[str, str, str, str]:
        return (self.cluster, self.driver, self.pool, self.device)


@dataclass
class NamedDevice:
    """A device the name designates, held or not."""

    cluster: str
    node: str | None
    device: str
    driver: str
    pool: str
    uuid: str | None
    model: str | None
    status: str | None  # FREE, HELD, SHARED, BLOCKED (None: gone since it was named)
    withheld: int = 0  # allocations of claims in namespaces the asker may not see

    @property
    def device_ref(self) -> tuple[str, str, str, str]:
        return (self.cluster, self.driver, self.pool, self.device)


@dataclass
class WhoHolds:
    spec: str
    cluster: str | None
    devices: list[NamedDevice] = field(default_factory=list)
    holdings: list[HoldingRow] = field(default_factory=list)

    @property
    def unknown(self) -> bool:
        """No device is named so (in the clusters the asker may see)."""
        return not self.devices

    @property
    def held_devices(self) -> list[tuple[str, str, str, str]]:
        """The devices with a holder the asker sees, in key order."""
        return list(dict.fromkeys(h.device_ref for h in self.holdings))

    @property
    def ambiguous(self) -> bool:
        """The name designates more than one held device."""
        return len(self.held_devices) > 1

    @property
    def withheld(self) -> list[NamedDevice]:
        """The named devices held (also) by claims the asker may not see."""
        return [d for d in self.devices if d.withheld]

    @property
    def held_elsewhere(self) -> int:
        """Allocations of the named devices the asker may not see."""
        return sum(d.withheld for d in self.devices)


async def device_statuses(
    reader: Any, keys: Sequence[DeviceKey], entries: Sequence[DeviceEntry | None]
) -> list[str | None]:
    """FREE, HELD, SHARED or BLOCKED per device, as the model derived it; a device no slice
    publishes (the store keeps no status for it) is held or shared by what holds it — every
    holder, those outside the scope too (`service.model.inventory.device_status`)."""
    statuses: list[str | None] = list(await reader.device_status(keys)) if keys else []
    missing = [i for i, s in enumerate(statuses) if s is None and entries[i] is not None]
    if missing:
        holds = await reader.every_holder([keys[i] for i in missing])
        for i, refs in zip(missing, holds, strict=True):
            entry = entries[i]
            assert entry is not None
            statuses[i] = inventory.device_status(entry, refs)
    return [s.upper() if s else None for s in statuses]


async def who_holds(asker: Asker, spec: str, cluster: str | None = None) -> WhoHolds:
    """The devices `spec` names and the claims (in the asker's scope) holding them."""
    await asker.check_cluster(cluster)
    reader = asker.reader
    # a uuid: its devices, their holds and claims in one store read (holders.holdings_named)
    keys, found = await holdings_named(reader, spec, cluster=cluster)
    answer = WhoHolds(spec=spec.strip(), cluster=cluster)
    if not keys:
        return answer
    entries = await reader.devices(keys)
    statuses = await device_statuses(reader, keys, entries)
    withheld = [0] * len(keys)
    if reader.scope.may_hide():
        every = await reader.every_holder(keys)  # type: ignore[attr-defined]
        scope = reader.scope
        withheld = [
            sum(1 for ref in refs if not scope.allows(ref.claim.cluster, ref.claim.namespace))
            for refs in every
        ]
    by_key: dict[DeviceKey, DeviceEntry] = {}
    for key, entry, status, hidden in zip(keys, entries, statuses, withheld, strict=True):
        if entry is None:
            continue
        by_key[key] = entry
        answer.devices.append(
            NamedDevice(
                cluster=key.cluster, node=entry.node, device=key.device, driver=key.driver,
                pool=key.pool, uuid=entry.device.uuid, model=entry_product(entry),
                status=status, withheld=hidden,
            )
        )  # fmt: skip
    claims = [h.claim for h in found.holdings if h.claim is not None]
    idle = await reader.idle_since([key_of(c) for c in claims]) if claims else []
    idle_of = {id(c): when for c, when in zip(claims, idle, strict=True)}
    for h in found.holdings:
        entry = by_key.get(h.device)
        if h.claim is None or entry is None:
            continue  # the claim was deleted since its holds were read
        answer.holdings.append(_row(h.device, entry, h.claim, h.pods, h.ref, idle_of[id(h.claim)]))
    if any(r.since is None for r in answer.holdings) and asker.sees_history:
        await _since_from_history(asker, spec.strip(), cluster, answer.holdings)
    return answer


def _row(
    key: DeviceKey,
    entry: DeviceEntry,
    claim: ClaimRecord,
    pods: list[PodRecord],
    ref: AllocationRef,
    idle_since: str | None,
) -> HoldingRow:
    allocation = claim.allocation
    return HoldingRow(
        cluster=key.cluster, node=entry.node, device=key.device, driver=key.driver,
        pool=key.pool, uuid=entry.device.uuid, model=entry_product(entry),
        claim=f"{claim.meta.namespace}/{claim.meta.name}",
        origin=claim.origin.upper().replace("-", "_"), state=claim.state.upper(),
        pods=[f"{p.meta.namespace}/{p.meta.name} ({p.phase})" for p in pods],
        since=allocation.allocated_at if allocation is not None else None,
        idle=idle_since is not None, idle_since=idle_since, request=ref.request,
        share_id=ref.share_id,
    )  # fmt: skip


async def _since_from_history(
    asker: Asker, spec: str, cluster: str | None, rows: list[HoldingRow]
) -> None:
    """Fill `since` from history where the API server gave no allocationTimestamp (before
    Kubernetes 1.34 it never does): the start of the allocation history sees open now."""
    from dra_mirror.service.history.times import to_rfc3339, to_us

    history = asker.history_reads()
    try:
        held = await history.who_held(spec, to_us(asker.now()), cluster)
    except StoreUnavailable:  # the history database is down: `since` stays unknown
        return
    seen = {
        (a.cluster, a.driver, a.pool, a.device, f"{a.namespace}/{a.claim}"): a.start_us
        for a in held
    }
    for row in rows:
        if row.since is None:
            start = seen.get((*row.device_ref, row.claim))
            row.since = to_rfc3339(start) if start is not None else None
