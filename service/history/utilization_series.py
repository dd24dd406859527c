"""One device's utilisation over a window: its five-minute buckets as a series with gaps.

`device_series(engine, cluster=, driver=, pool=, device=, start_us=, end_us=)` reads the
device's rows of `utilization_buckets` (`service.history.utilization_recorder`) whose bucket
overlaps [start, end) and answers one `SeriesPoint` per bucket start from the bucket holding
`start` up to `end`, in time order: its mean busy percent and its energy (kWh), both None
where no bucket was recorded (the device unread: unknown, never 0 %), energy None as well
where the exporter has no energy counter. At most `MAX_POINTS` buckets (31 days); a longer
or empty window is `BadAuditRequest`. One statement, a range of the primary key.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from dra_mirror.service.history.audit_windows import BadAuditRequest
from dra_mirror.service.history.models import UtilizationBucket
from dra_mirror.service.history.times import US_PER_SECOND
from dra_mirror.service.model.utilization_buckets import BUCKET_SECONDS

J_PER_KWH = 3.6e6
BUCKET_US = BUCKET_SECONDS * US_PER_SECOND
MAX_POINTS = 31 * 24 * 12


@dataclass(frozen=True)
class SeriesPoint:
    start_us: int  # the bucket's start
    busy: float | None  # percent; None: unknown
    energy_kwh: float | None


async def device_series(
    engine: AsyncEngine,
    *,
    cluster: str,
    driver: str,
    pool: str,
    device: str,
    start_us: int,
    end_us: int,
) -> list[SeriesPoint]:
    """The device's buckets over [start, end), unknown ones included (see the docstring)."""
    if end_us <= start_us:
        raise BadAuditRequest("`to` must be after `from`")
    first = start_us // BUCKET_US * BUCKET_US
    if (end_us - first + BUCKET_US - 1) // BUCKET_US > MAX_POINTS:
        raise BadAuditRequest(f"a window of at most {MAX_POINTS // 288} days")
    u = UtilizationBucket
    query = select(u.bucket_us, u.busy, u.energy_j).where(
        u.cluster == cluster, u.driver == driver, u.pool == pool, u.device == device,
        u.bucket_us >= first, u.bucket_us < end_us,
    )  # fmt: skip
    async with engine.connect() as conn:
        rows = {at: (busy, energy) for at, busy, energy in (await conn.execute(query)).all()}
    out = []
    for at in range(first, end_us, BUCKET_US):
        busy, energy = rows.get(at, (None, None))
        out.append(SeriesPoint(at, None if busy is None else float(busy),
                               None if energy is None else float(energy) / J_PER_KWH))  # fmt: skip
    return out
