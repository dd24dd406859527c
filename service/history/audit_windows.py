"""The windows and buckets an audit may be asked for, and how far a window really reaches.

A client can ask `contention` for any window of years 0001-9999 (the times module bounds
them) and any bucket size. Two promises follow:

* a request that cannot be answered is refused before the database is touched, with
  `BadAuditRequest` and a message fit for the client: an unknown grouping, a window that
  ends before it starts, more than `MAX_BUCKETS` buckets;
* the cost of an answer follows the history that exists, not the window asked: a window
  longer than `CLAMP_AFTER_US` is first narrowed (`narrow`) to the buckets that overlap the
  instants history holds (`history_extent`). Buckets outside hold no row (the audit reports
  only buckets with data), so the answer is the same; what is saved is the per-bucket and
  per-hour work (the hourly peak cache, the bucket series), which over 0001-9999 was
  87 million hours.
"""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from dra_mirror.service.history.times import US_PER_HOUR

GROUPS = ("CLASS", "NAMESPACE", "NODE", "CLUSTER")
MAX_BUCKETS = 10_000
CLAMP_AFTER_US = 400 * 24 * US_PER_HOUR
"""Windows longer than this are first narrowed to the extent of the recorded history (one
more statement: each table's first start is an index probe, the last end a scan); shorter
ones are audited as asked, at no extra cost."""


class BadAuditRequest(ValueError):
    """The client asked for an audit that cannot be answered (unknown grouping, too many
    buckets)."""


def check_request(*, start_us: int, end_us: int, group_by: str, bucket_us: int | None) -> int:
    """The bucket size of an audit request, or `BadAuditRequest` when it cannot be answered
    (unknown grouping, a window that ends before it starts, more than `MAX_BUCKETS` buckets).
    Pure: callers check a request with it before touching the database."""
    if group_by not in GROUPS:
        raise BadAuditRequest(f"groupBy must be one of {', '.join(GROUPS)}")
    if end_us <= start_us:
        raise BadAuditRequest("`to` must be after `from`")
    size = bucket_us or (end_us - start_us)
    count = -(-(end_us - start_us) // size)
    if count > MAX_BUCKETS:
        raise BadAuditRequest(
            f"{count:,} buckets: at most {MAX_BUCKETS:,}; choose a larger bucket or a shorter "
            "window"
        )
    return size


def narrow(
    start_us: int, end_us: int, size: int, extent: tuple[int, int] | None
) -> tuple[int, int] | None:
    """The part of [start_us, end_us) made of the buckets of `size` (counted from
    `start_us`) that overlap `extent`, or None when none does. Bucket boundaries are kept:
    the narrowed window starts on one, and ends on one or at `end_us`."""
    if extent is None:
        return None
    first = max(0, (extent[0] - start_us) // size)
    last = min(-(-(end_us - start_us) // size), -(-(extent[1] - start_us) // size))
    if first >= last:
        return None
    return start_us + first * size, min(end_us, start_us + last * size)


async def history_extent(
    engine: AsyncEngine, *, cluster: str | None, horizon_us: int
) -> tuple[int, int] | None:
    """[first, last) instants the audit's tables hold (intervals still open reach
    `horizon_us`, the audit's now), or None when they hold nothing."""
    where = " WHERE cluster = :cluster" if cluster is not None else ""
    parts = " UNION ALL ".join(
        f"SELECT MIN(start_us) AS lo, MAX(start_us) AS top, MAX(end_us) AS hi FROM {table}{where}"
        for table in ("allocations", "waits", "device_inventory")
    )
    query = f"SELECT MIN(lo), MAX(top), MAX(hi) FROM ({parts}) AS extent"
    params = {"cluster": cluster} if cluster is not None else {}
    async with engine.connect() as conn:
        lo, top, hi = (await conn.execute(text(query), params)).one()
    if lo is None:
        return None
    return int(lo), max(int(top) + 1, int(hi or 0), horizon_us)
