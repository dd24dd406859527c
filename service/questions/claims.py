"""Claims waiting for devices, and idle holders: the on-call lists, answered from the store.

* `waiting(asker, class_name=None, cluster=None)` — Pending claims (not allocated, not being
  deleted), longest waiting first, with the classes they ask for (each request's and each
  `firstAvailable` alternative's) and how long they have waited (the asker's clock minus
  their creation);
* `idle(asker, cluster=None)` — claims holding devices with no consumer pod Running, the
  ones others wait behind first: each says how many Pending claims ask for one of its
  classes, its node, its devices (`name (uuid)`) and its consumer pods (`name (phase)`).

Both read through the asker's scope (a claim outside it does not exist, nor counts), refuse
an unknown cluster (`UnknownCluster`), and return every row counted in `total` but at most
`limit` of them. Idleness is the model's (`idle_since` as the store keeps it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from dra_mirror.service.model.records import (
    PENDING,
    RESOURCE_CLAIM,
    ClaimRecord,
    DeviceKey,
    ObjectKey,
    Record,
    key_of,
)

from .asker import Asker
from .holders import consumers_of

__all__ = ["ClaimRow", "Claims", "claim_classes", "duration", "idle", "waiting"]


def duration(seconds: float) -> str:
    """`59s`, `12m`, `5h 2m`, `3d 4h`: a wait or an age, to the two largest units."""
    seconds = max(0, int(seconds))
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes = rest // 60
    if days:
        return f"{days}d {hours}h"
    if hours:
        return f"{hours}h {minutes}m"
    return f"{minutes}m" if minutes else f"{seconds}s"


@dataclass
class ClaimRow:
    cluster: str
    claim: str  # namespace/name
    origin: str  # TEMPLATE, EXTENDED_RESOURCE or MANUAL
    classes: list[str]
    created_at: str | None
    pending_seconds: float | None = None
    idle_since: str | None = None
    node: str | None = None
    devices: list[str] = field(default_factory=list)  # name (uuid)
    consumers: list[str] = field(default_factory=list)  # name (phase)
    waiting_for_class: int = 0  # pending claims asking for one of its classes (idle answers)


@dataclass
class Claims:
    """Pending (`waiting`) or idle claims; `total` counts all, `claims` may be cut."""

    cluster: str | None
    class_name: str | None
    total: int
    claims: list[ClaimRow]


def claim_classes(claim: ClaimRecord) -> list[str]:
    """The classes a claim asks for: each request's, then its alternatives', once each."""
    names: list[str] = []
    for r in claim.requests:
        found = [r.device_class_name] + [s.device_class_name for s in r.first_available]
        names += [n for n in found if n and n not in names]
    return names


def _seconds_since(now: datetime, stamp: str | None) -> float | None:
    if not stamp:
        return None
    then = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    return max(0.0, (now - then).total_seconds())


def _row(claim: ClaimRecord, now: datetime) -> ClaimRow:
    meta = claim.meta
    return ClaimRow(
        cluster=meta.cluster,
        claim=f"{meta.namespace}/{meta.name}",
        origin=claim.origin.upper().replace("-", "_"),
        classes=claim_classes(claim),
        created_at=meta.created_at or None,
        pending_seconds=_seconds_since(now, meta.created_at) if claim.state == PENDING else None,
    )


async def _claims(asker: Asker, clusters: Sequence[str]) -> list[ClaimRecord]:
    out: list[ClaimRecord] = []
    for name in clusters:
        records: Sequence[Record] = await asker.reader.list(RESOURCE_CLAIM, cluster=name)
        out.extend(r for r in records if isinstance(r, ClaimRecord))
    return out


async def waiting(
    asker: Asker, class_name: str | None = None, cluster: str | None = None, *, limit: int = 50
) -> Claims:
    """Pending claims (of a class), longest waiting first."""
    clusters = await asker.check_cluster(cluster)
    now = asker.now()
    rows = [_row(c, now) for c in await _claims(asker, clusters) if c.state == PENDING]
    if class_name:
        rows = [r for r in rows if class_name in r.classes]
    rows.sort(key=lambda r: (-(r.pending_seconds or 0.0), r.cluster, r.claim))
    return Claims(cluster=cluster, class_name=class_name, total=len(rows), claims=rows[:limit])


async def idle(asker: Asker, cluster: str | None = None, *, limit: int = 50) -> Claims:
    """Idle holders, those most claims wait behind first, then longest idle."""
    clusters = await asker.check_cluster(cluster)
    reader = asker.reader
    now = asker.now()
    claims = await _claims(asker, clusters)
    waiting_for: dict[tuple[str, str], int] = {}
    allocated: list[ClaimRecord] = []
    for claim in claims:
        if claim.state == PENDING:
            for name in claim_classes(claim):
                key = (claim.meta.cluster, name)
                waiting_for[key] = waiting_for.get(key, 0) + 1
        elif claim.allocation is not None:
            allocated.append(claim)
    since = await reader.idle_since([key_of(c) for c in allocated]) if allocated else []
    held = [(c, s) for c, s in zip(allocated, since, strict=True) if s is not None]
    records: dict[ObjectKey, Record | None] = {key_of(c): c for c, _ in held}
    consumers, _pods = await consumers_of(reader, records)
    device_keys = list(
        dict.fromkeys(
            DeviceKey(c.meta.cluster, r.driver, r.pool, r.device)
            for c, _ in held
            for r in c.allocation.results  # type: ignore[union-attr]
        )
    )
    entries = dict(zip(device_keys, await reader.devices(device_keys), strict=True))
    rows = []
    for claim, when in held:
        row = _row(claim, now)
        allocation = claim.allocation
        assert allocation is not None
        row.idle_since = when
        row.node = allocation.node_name
        for result in allocation.results:
            entry = entries.get(DeviceKey(claim.meta.cluster, result.driver, result.pool,
                                          result.device))  # fmt: skip
            uuid = entry.device.uuid if entry is not None else None
            row.devices.append(result.device + (f" ({uuid})" if uuid else ""))
        row.consumers = [f"{p.meta.name} ({p.phase})" for p in consumers.get(key_of(claim), [])]
        row.waiting_for_class = sum(waiting_for.get((row.cluster, n), 0) for n in row.classes)
        rows.append(row)
    rows.sort(key=lambda r: (-r.waiting_for_class, r.idle_since or "", r.cluster, r.claim))
    return Claims(cluster=cluster, class_name=None, total=len(rows), claims=rows[:limit])
