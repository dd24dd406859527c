"""Peak pending claims per group and bucket: the one expensive part of `contention`.

"The most claims waiting at once" is a running count over every wait start and end of the
window, sorted per group. `pending_peaks` answers it from the hourly peak cache
(`service.history.peaks`) when the window and buckets are whole hours, else live with one
statement; `warm_peaks` fills the cache ahead of the audits (the history writer runs it).
On PostgreSQL each statement reads only the partitions of `waits` its window can reach
(`service.history.pruning`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Awaitable, Callable

from sqlalchemy.ext.asyncio import AsyncEngine

from dra_mirror.service.history import peaks, pruning
from dra_mirror.service.history.audit_sql import WAIT_GROUP, AuditSql, fetch_all, where_cluster
from dra_mirror.service.history.audit_windows import GROUPS


def _peak_query(sql: AuditSql, group_by: str, cluster: str | None, params: dict) -> str:
    """The running count of waits over [:f, :t), bucketed by :b (`params` may hold the
    waits' floor, `pruning.floor_params`)."""
    wait_group = sql.text_key(WAIT_GROUP[group_by])
    g = sql.greatest
    where = (f"w.start_us < :t AND (w.end_us IS NULL OR w.end_us > :f)"
             f"{pruning.bounded('w', 'waits', params)}{where_cluster('w', cluster)}")  # fmt: skip
    # The running count needs the events sorted per group. On PostgreSQL the group is
    # partitioned by a 64-bit hash of (cluster, group) — sorting integers is several times
    # cheaper than sorting strings; two groups would need a 64-bit collision to mix.
    part = (
        "hashtextextended(w.cluster || '/' || " + WAIT_GROUP[group_by] + ", 0)"
        if sql.postgres
        else f"w.cluster || '/' || {wait_group}"
    )
    # +1 when a wait starts (or at the window's start), -1 when it ends; the count at an
    # instant is after every event of that instant (RANGE: the peers of the same instant
    # summed together), so touching waits never count as overlapping ([start, end)
    # intervals) and waits ending together never leave a count that held at no instant.
    return f"""
        WITH events AS (
            SELECT {part} AS part, w.cluster AS cluster, {wait_group} AS grp,
                   {g}(w.start_us, :f) AS at, 1 AS d
            FROM waits AS w WHERE {where}
            UNION ALL
            SELECT {part}, w.cluster, {wait_group}, w.end_us, -1 FROM waits AS w
            WHERE {where} AND w.end_us IS NOT NULL AND w.end_us < :t
        ),
        running AS (
            SELECT part, cluster, grp, at, d,
                   SUM(d) OVER (PARTITION BY part ORDER BY at
                                RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS pending
            FROM events
        )
        SELECT MIN(cluster), MIN(grp), (at - :f) / :b AS idx, MAX(pending), SUM(d),
               MIN(at) - :f
        FROM running GROUP BY part, (at - :f) / :b
    """


def _peak_values(found: list, count: int, size: int) -> dict[tuple[str, str, int], int]:
    """Per (cluster, group, bucket): the peak, carrying the pending count across buckets
    (a bucket without events keeps the count the previous one ended with; a bucket whose
    first event is at its very start does not: that event changes the count at once)."""
    per_group: dict[tuple[str, str], dict[int, tuple[int, int, bool]]] = defaultdict(dict)
    for c, grp, idx, peak, net, first in found:
        per_group[(c, grp)][idx] = (int(peak), int(net), int(first) == idx * size)
    values: dict[tuple[str, str, int], int] = {}
    for (c, grp), buckets in per_group.items():
        carry = 0
        for idx in range(count):
            peak, net, at_start = buckets.get(idx, (0, 0, False))
            if idx not in buckets:
                best = carry
            else:
                best = peak if at_start else max(carry, peak)
            if best > 0:
                values[(c, grp, idx)] = best
            carry += net
    return values


def _hourly_compute(
    engine: AsyncEngine, sql: AuditSql, group_by: str
) -> Callable[[int, int], Awaitable[peaks.HourlyPeaks]]:
    """The hourly peaks of every cluster's groups over whole hours [a, b), from the waits."""

    async def compute(a: int, b: int) -> peaks.HourlyPeaks:
        hours = (b - a) // peaks.HOUR
        hourly = {"f": a, "t": b, "b": peaks.HOUR, "n": hours}
        hourly.update(await pruning.floor_params(engine, ("waits",), a))
        (found,) = await fetch_all(engine, [_peak_query(sql, group_by, None, hourly)], hourly)
        return {(c, grp, a + idx * peaks.HOUR): v
                for (c, grp, idx), v in _peak_values(found, hours, peaks.HOUR).items()}  # fmt: skip

    return compute


async def warm_peaks(engine: AsyncEngine, *, start_us: int, end_us: int, now_us: int) -> int:
    """Fill the hourly peak cache of every grouping over [start_us, end_us) (complete hours):
    the slow part of a first audit, done ahead of it. Returns the hours computed."""
    sql = AuditSql(engine.dialect.name == "postgresql")
    computed = 0
    for group_by in GROUPS:
        computed += await peaks.warm(engine, group_by=group_by, start_us=start_us,
                                     end_us=end_us, now_us=now_us,
                                     compute=_hourly_compute(engine, sql, group_by))  # fmt: skip
    return computed


async def pending_peaks(
    engine: AsyncEngine, sql: AuditSql, params: dict, *, group_by: str, cluster: str | None,
    size: int, count: int, now_us: int, extent: tuple[int, int] | None = None,
) -> dict[tuple[str, str, int], int]:  # fmt: skip
    """Peak pending per (cluster, group, bucket): from hourly peaks (cached, see
    `service.history.peaks`) when the window and buckets are whole hours, else live. Hours
    outside `extent` (the instants history holds, when known) have nothing pending: they are
    neither read nor computed."""
    start, end = params["f"], params["t"]
    if not peaks.cacheable(start, end, size):
        live = params | await pruning.floor_params(engine, ("waits",), start)
        (found,) = await fetch_all(engine, [_peak_query(sql, group_by, cluster, live)], live)
        return _peak_values(found, count, size)

    compute = _hourly_compute(engine, sql, group_by)
    first_hour, end_hour = start, end
    if extent is not None:
        first_hour = max(start, extent[0] // peaks.HOUR * peaks.HOUR)
        end_hour = min(end, -(-extent[1] // peaks.HOUR) * peaks.HOUR)
        if end_hour <= first_hour:
            return {}
    hourly = await peaks.hourly_peaks(engine, group_by=group_by, start_us=first_hour,
                                      end_us=end_hour, now_us=now_us, compute=compute)  # fmt: skip
    values: dict[tuple[str, str, int], int] = {}
    for (c, grp, hour), peak in hourly.items():
        if peak <= 0 or (cluster is not None and c != cluster):
            continue
        key = (c, grp, (hour - start) // size)
        values[key] = max(values.get(key, 0), peak)
    return values
