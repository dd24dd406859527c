"""How busy held devices are, and which are held but not busy: joined once for every front end.

* `device_utilization(asker, cluster=None, window=3600)` — each GPU and MIG device of the
  cluster(s) over the last `window` seconds: busy (percent, None when unknown), memory used,
  power, energy (`service.model.utilization` joins; this module reads and attributes);
* `claim_utilization(asker, cluster, namespace, name, window=3600)` — a claim's devices, as
  above, with the claim's share of each device's energy; `device_busy(asker, key)` one
  device (None without a source: who-holds adds it when there is one);
* `held_not_busy(asker, cluster=None, window=None)` — claims **held, not busy**: allocated,
  with a consumer pod Running, whose every device with readings has stayed below the
  source's `busy_below` percent for at least `not_busy_after` seconds. Each row says by whom
  (the Running pods), since when (the latest of its devices' runs below the threshold, never
  before the claim was made), how busy over the window, and its share of the energy spent
  since then (with its cost at the source's `pricePerKwh`, when configured).

Attribution: a shared device's busy is the device's, for every claim holding it; its energy
is split evenly between them. A device without readings is unknown: it never makes a claim
"not busy", and the answer counts such claims in `unknown`.

Errors: `UtilizationOff` when no source is configured; `QuestionUnavailable` when the source
cannot answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from dra_mirror.service.model.dcgm import ReadingsUnavailable
from dra_mirror.service.model.identity import DeviceKey
from dra_mirror.service.model.records import (
    RESERVED,
    RESOURCE_CLAIM,
    ClaimRecord,
    DeviceEntry,
    ObjectKey,
    Record,
    key_of,
)
from dra_mirror.service.model.utilization import (
    GPU_DOMAIN,
    Utilization,
    busy_below_since,
    join,
    weighed,
)

from .asker import Asker
from .asking import QuestionError, QuestionUnavailable
from .holders import consumers_of

__all__ = [
    "DeviceUse",
    "HeldNotBusy",
    "NotBusyRow",
    "UtilizationOff",
    "claim_utilization",
    "device_busy",
    "device_utilization",
    "held_not_busy",
]

RUNNING = "Running"
UNKNOWN = "unknown"  # a held GPU claim none of whose devices has readings


class UtilizationOff(QuestionError):
    """No utilisation source is configured (DRA_MIRROR_UTILIZATION_CONFIG)."""

    code = "UTILIZATION_DISABLED"


@dataclass
class DeviceUse:
    cluster: str
    driver: str
    pool: str
    device: str
    uuid: str | None
    node: str | None
    busy: float | None  # percent over the window; None: unknown
    source: str | None
    memory_used_mib: float | None
    power_watts: float | None
    energy_kwh: float | None  # the device's (a claim's answer: its share)
    not_busy_since: str | None  # start of the trailing run below busy_below


@dataclass
class NotBusyRow:
    cluster: str
    claim: str  # namespace/name
    namespace: str
    consumers: list[str]  # Running pods
    node: str | None
    devices: list[str]  # device names with readings
    busy: float  # percent over the window, mean of its devices with readings
    since: str  # held, not busy since
    not_busy_seconds: float
    energy_kwh: float | None  # its share of its devices' energy since `since`
    cost: float | None = None  # energy_kwh at the source's pricePerKwh, when configured


@dataclass
class HeldNotBusy:
    busy_below: float
    not_busy_after: float  # seconds
    window: float  # seconds
    total: int
    claims: list[NotBusyRow]
    unknown: int = 0  # held claims with Running consumers and no readings for any device
    clusters: list[str] = field(default_factory=list)


def _iso(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).isoformat().replace("+00:00", "Z")


async def _joined(
    asker: Asker, cluster: str, window: float
) -> tuple[dict[DeviceKey, Utilization], dict[DeviceKey, DeviceEntry], float]:
    source = asker.utilization
    if source is None:
        raise UtilizationOff(
            "utilisation is not configured (set DRA_MIRROR_UTILIZATION_CONFIG)",
        )
    now = asker.now().timestamp()
    entries = await asker.reader.list_devices(cluster=cluster, driver=GPU_DOMAIN, published=None)
    by_key = {e.key: e for e in entries}
    if not source.covers(cluster):
        return {}, by_key, now
    try:
        found = await source.readings(cluster, now - window, now)
    except ReadingsUnavailable as error:  # the source's, translated for every front end
        raise QuestionUnavailable(f"utilisation of {cluster}: {error}") from None
    return join(weighed(entries, found), found), by_key, now


def _use(
    key: DeviceKey, u: Utilization | None, entry: DeviceEntry | None, threshold: float
) -> DeviceUse:
    u = u or Utilization(key)
    since = busy_below_since(u.busy_points, threshold)
    return DeviceUse(
        cluster=key.cluster,
        driver=key.driver,
        pool=key.pool,
        device=key.device,
        uuid=entry.device.uuid if entry is not None else None,
        node=entry.node if entry is not None else None,
        busy=u.busy,
        source=u.source,
        memory_used_mib=u.memory_used_mib,
        power_watts=u.power_watts,
        energy_kwh=u.energy_kwh,
        not_busy_since=_iso(since) if since is not None else None,
    )


async def device_utilization(
    asker: Asker, cluster: str | None = None, *, window: float = 3600.0
) -> list[DeviceUse]:
    """Every GPU and MIG device of the cluster(s) over the last `window` seconds."""
    out: list[DeviceUse] = []
    for name in await asker.check_cluster(cluster):
        joined, entries, _ = await _joined(asker, name, window)
        threshold = asker.utilization.busy_below if asker.utilization else 0.0
        for key in sorted(entries):
            out.append(_use(key, joined.get(key), entries[key], threshold))
    return out


async def device_busy(asker: Asker, key: DeviceKey, *, window: float = 3600.0) -> DeviceUse | None:
    """One device over the window; None when no utilisation source is configured."""
    if asker.utilization is None:
        return None
    joined, entries, _ = await _joined(asker, key.cluster, window)
    return _use(key, joined.get(key), entries.get(key), asker.utilization.busy_below)


async def claim_utilization(
    asker: Asker, cluster: str, namespace: str, name: str, *, window: float = 3600.0
) -> list[DeviceUse] | None:
    """The claim's devices over the window (None: no such claim the asker may see, or not
    allocated; as a claim outside the asker's scope, a cluster they may not see is none)."""
    if cluster not in await asker.known_clusters():
        return None
    await asker.check_cluster(cluster)  # NotSynced: a cluster still listing
    [claim] = await asker.reader.get([ObjectKey(cluster, RESOURCE_CLAIM, namespace, name)])
    if not isinstance(claim, ClaimRecord) or claim.allocation is None:
        return None
    joined, entries, _ = await _joined(asker, cluster, window)
    holders = await _holders(asker, cluster)
    threshold = asker.utilization.busy_below if asker.utilization else 0.0
    out = []
    for r in claim.allocation.results:
        key = DeviceKey(cluster, r.driver, r.pool, r.device)
        use = _use(key, joined.get(key), entries.get(key), threshold)
        if use.energy_kwh is not None:
            use.energy_kwh /= max(1, holders.get(key, 1))
        out.append(use)
    return out


async def _holders(asker: Asker, cluster: str) -> dict[DeviceKey, int]:
    """How many claims hold each device (a shared device's energy is split between them)."""
    counts: dict[DeviceKey, int] = {}
    for claim in await _claims(asker, cluster):
        if claim.allocation is not None:
            for r in claim.allocation.results:
                key = DeviceKey(cluster, r.driver, r.pool, r.device)
                counts[key] = counts.get(key, 0) + 1
    return counts


async def _claims(asker: Asker, cluster: str) -> list[ClaimRecord]:
    records: Sequence[Record] = await asker.reader.list(RESOURCE_CLAIM, cluster=cluster)
    return [r for r in records if isinstance(r, ClaimRecord)]


async def held_not_busy(
    asker: Asker, cluster: str | None = None, *, window: float | None = None, limit: int = 50
) -> HeldNotBusy:
    """Claims held with a consumer Running and not busy long enough, longest first."""
    source = asker.utilization
    if source is None:
        raise UtilizationOff("utilisation is not configured (set DRA_MIRROR_UTILIZATION_CONFIG)")
    threshold, after = source.busy_below, source.not_busy_after
    price = getattr(source, "price_per_kwh", None)
    window = window or max(3600.0, 2 * after)
    clusters = await asker.check_cluster(cluster)
    rows: list[NotBusyRow] = []
    unknown = 0
    for name in clusters:
        joined, _, now = await _joined(asker, name, window)
        claims = await _claims(asker, name)
        holders: dict[DeviceKey, int] = {}
        held = []
        for claim in claims:
            if claim.allocation is None:
                continue
            for r in claim.allocation.results:
                key = DeviceKey(name, r.driver, r.pool, r.device)
                holders[key] = holders.get(key, 0) + 1
            if claim.state == RESERVED:
                held.append(claim)
        records: dict[ObjectKey, Record | None] = {key_of(c): c for c in held}
        consumers, _ = await consumers_of(asker.reader, records)
        for claim in held:
            running = [p for p in consumers.get(key_of(claim), []) if p.phase == RUNNING]
            if not running:
                continue  # idle, not this question's
            row = _not_busy(claim, running, joined, holders, threshold, after, now, price)
            if isinstance(row, NotBusyRow):
                rows.append(row)
            elif row == UNKNOWN:
                unknown += 1
    rows.sort(key=lambda r: (-r.not_busy_seconds, r.cluster, r.claim))
    return HeldNotBusy(threshold, after, window, len(rows), rows[:limit], unknown, clusters)


def _not_busy(
    claim: ClaimRecord,
    running: list,
    joined: dict[DeviceKey, Utilization],
    holders: dict[DeviceKey, int],
    threshold: float,
    after: float,
    now: float,
    price: float | None = None,
) -> NotBusyRow | str | None:
    assert claim.allocation is not None
    cluster = claim.meta.cluster
    if not any(r.driver == GPU_DOMAIN for r in claim.allocation.results):
        return None  # no GPU: not this question's
    known: list[tuple[str, Utilization, DeviceKey]] = []
    for r in claim.allocation.results:
        key = DeviceKey(cluster, r.driver, r.pool, r.device)
        u = joined.get(key)
        if u is not None and u.known:
            known.append((r.device, u, key))
    if not known:
        return UNKNOWN
    starts = [busy_below_since(u.busy_points, threshold) for _, u, _ in known]
    if any(s is None for s in starts):
        return None  # a device is busy now
    since = max(s for s in starts if s is not None)
    if claim.meta.created_at:
        made = datetime.fromisoformat(claim.meta.created_at.replace("Z", "+00:00")).timestamp()
        since = max(since, made)
    if now - since < after:
        return None
    # the energy of the not-busy run: what holding without working cost
    spent = [(u.energy_since(since), key) for _, u, key in known]
    energies = [kwh / max(1, holders.get(key, 1)) for kwh, key in spent if kwh is not None]
    busy = [u.busy for _, u, _ in known if u.busy is not None]
    return NotBusyRow(
        cluster=cluster,
        claim=f"{claim.meta.namespace}/{claim.meta.name}",
        namespace=claim.meta.namespace or "",
        consumers=[p.meta.name for p in running],
        node=claim.allocation.node_name,
        devices=[d for d, _, _ in known],
        busy=sum(busy) / len(busy),
        since=_iso(since),
        not_busy_seconds=now - since,
        energy_kwh=sum(energies) if energies else None,
        cost=sum(energies) * price if energies and price is not None else None,
    )
