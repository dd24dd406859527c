"""The contention audit: per group and time bucket, how devices were used and how claims waited.

For a window [from, to) split into buckets of `bucket` (one bucket when None) and grouped by
CLASS, NAMESPACE, NODE or CLUSTER (always within a cluster), each row says:

* `device_hours_available` — device-hours of inventory published in the bucket. NODE and
  CLUSTER group the inventory directly; CLASS counts a device (its uuid, else its key) under
  every class that selected it — the model evaluates each class's CEL when the device or the
  class appears or changes (`device_classified`; a GPU counts for the classes selecting its
  partitions) — or that it has been allocated for; NAMESPACE has no available figure (None),
  nor a utilization.
* `device_hours_allocated` — device-hours of allocation results (a shared device counts once
  per share, so utilization of shared devices can exceed 100 %).
* `device_hours_idle` — the allocated device-hours during which the claim was idle (no
  consumer pod Running).
* `utilization` — allocated / available * 100.
* `claims_waited`, `wait_p50/p95/max` (seconds) — served waits (ended `allocated`) that
  started in the bucket, lasted longer than zero and began while the mirror observed the
  cluster (not `started_before_observation`: their beginning is unknown). A claim waits while
  an unfinished pod references it and it is unallocated (service.model.waiting); waits still
  open are not in the percentiles. Percentiles are nearest-rank (PostgreSQL's
  percentile_disc): the smallest duration with at least p of the waits at or below it.
* `claims_abandoned` — waits that started in the bucket and ended abandoned (the claim
  deleted, or no pod referencing it any more), counted beside the served ones.
* `peak_pending` — the most claims waiting at once at any instant of the bucket.
* `gpu_hours_available`, `gpu_hours_allocated`, `gpu_hours_idle`, `gpu_utilization` — the
  same in GPU-equivalent-hours of GPUs (service.model.physical): a GPU counts once in
  inventory however many partitions it publishes (its whole device counts 1, its partitions
  0); an allocation counts what it takes of its GPU (a whole GPU 1, a MIG partition its share
  of the memory slices, a share its consumed capacity over the GPU's). NICs and other types
  never enter these figures. CLASS availability counts the GPUs the class selects (or selects
  partitions of), allocated or not.

Intervals still open count up to min(to, now). Everything is computed by the database with
integer microseconds; only the per-bucket carry of pending claims and (on SQLite, which has no
percentile_disc) the wait percentiles are finished in Python. On PostgreSQL the statements
(allocated, idle, available, waits — served and abandoned in one pass over the window's
waits) run concurrently on their own connections (`audit_sql.fetch_all`), and each reads
only the partitions its window can reach: the floors of `service.history.pruning` bound the
intervals' starts from below. Peak pending is `service.history.pending`'s.
"""

from __future__ import annotations

import asyncio
import math
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from dra_mirror.service.history import pruning
from dra_mirror.service.history.audit_sql import WAIT_GROUP, AuditSql, fetch_all, where_cluster
from dra_mirror.service.history.audit_windows import (  # noqa: F401  (re-exported)
    CLAMP_AFTER_US,
    GROUPS,
    MAX_BUCKETS,
    BadAuditRequest,
    check_request,
    history_extent,
    narrow,
)
from dra_mirror.service.history.pending import pending_peaks, warm_peaks  # noqa: F401
from dra_mirror.service.history.times import US_PER_HOUR, US_PER_SECOND
from dra_mirror.service.model.physical import GPU
from dra_mirror.service.model.waiting import ABANDONED, SERVED

_ALLOCATION_GROUP = {"CLASS": "a.class_name", "NAMESPACE": "a.namespace",
                     "NODE": "COALESCE(a.node, '')", "CLUSTER": "a.cluster"}  # fmt: skip


@dataclass
class ContentionRow:
    cluster: str
    group: str
    bucket_start_us: int
    bucket_end_us: int
    device_hours_available: float | None = None
    device_hours_allocated: float = 0.0
    device_hours_idle: float = 0.0
    utilization: float | None = None
    claims_waited: int = 0
    wait_p50: float | None = None
    wait_p95: float | None = None
    wait_max: float | None = None
    peak_pending: int = 0
    claims_abandoned: int = 0
    gpu_hours_available: float | None = None
    gpu_hours_allocated: float = 0.0
    gpu_hours_idle: float = 0.0
    gpu_utilization: float | None = None


def nearest_rank(sorted_values: list[int], fraction: float) -> int:
    """percentile_disc(fraction) of an ascending list."""
    return sorted_values[max(0, math.ceil(fraction * len(sorted_values)) - 1)]


async def contention(
    engine: AsyncEngine,
    *,
    start_us: int,
    end_us: int,
    horizon_us: int,
    group_by: str,
    bucket_us: int | None,
    cluster: str | None = None,
) -> list[ContentionRow]:
    if end_us <= start_us and group_by in GROUPS:
        return []
    size = check_request(start_us=start_us, end_us=end_us, group_by=group_by, bucket_us=bucket_us)
    extent = None
    if end_us - start_us > CLAMP_AFTER_US:
        # A long window costs what its buckets and hours cost (the peak cache is hourly):
        # narrow it to the buckets holding history, so the cost follows the data.
        extent = await history_extent(engine, cluster=cluster, horizon_us=horizon_us)
        narrowed = narrow(start_us, end_us, size, extent)
        if narrowed is None:
            return []
        start_us, end_us = narrowed
    count = -(-(end_us - start_us) // size)
    postgres = engine.dialect.name == "postgresql"
    sql = AuditSql(postgres)
    g, lst = sql.greatest, sql.least
    params: dict[str, int | str] = {
        "f": start_us,
        "t": end_us,
        "h": min(end_us, horizon_us),
        "b": size,
        "n": count,
    }
    if cluster is not None:
        params["cluster"] = cluster
    params.update(await pruning.floor_params(engine, ("allocations", "idle_holds"), start_us))
    rows: dict[tuple[str, str, int], ContentionRow] = {}

    def row(cluster_name: str, group: str, idx: int) -> ContentionRow:
        key = (cluster_name, group, idx)
        if key not in rows:
            lo = start_us + idx * size
            rows[key] = ContentionRow(cluster_name, group, lo, min(lo + size, end_us))
        return rows[key]

    def overlap(alias: str, table: str) -> str:
        return (f"{alias}.start_us < :t AND ({alias}.end_us IS NULL OR {alias}.end_us > :f)"
                + pruning.bounded(alias, table, params))  # fmt: skip

    alloc_group = sql.text_key(_ALLOCATION_GROUP[group_by])

    # w: what each allocation takes of its GPU (GPU-equivalents), 0 for other device types:
    # the GPU-equivalent-hours are summed in the same pass as the device-hours
    weight = f"CASE WHEN a.device_type = '{GPU}' THEN a.equivalents ELSE 0 END AS w"
    allocated = f"""
        SELECT a.cluster AS cluster, {alloc_group} AS grp,
               {g}(a.start_us, :f) AS s, {lst}(COALESCE(a.end_us, :h), :t) AS e, {weight}
        FROM allocations AS a WHERE {overlap("a", "allocations")}{where_cluster("a", cluster)}
    """
    idle = f"""
        SELECT a.cluster AS cluster, {alloc_group} AS grp,
               {g}(a.start_us, i.start_us, :f) AS s,
               {lst}(COALESCE(a.end_us, :h), COALESCE(i.end_us, :h), :t) AS e, {weight}
        FROM allocations AS a
        JOIN idle_holds AS i ON i.cluster = a.cluster AND i.claim_uid = a.claim_uid
        WHERE {overlap("a", "allocations")} AND {overlap("i", "idle_holds")}
              {where_cluster("a", cluster)}
    """
    queries = [
        sql.split(allocated, count, weighted=True),
        sql.split(idle, count, weighted=True),
    ]
    if group_by != "NAMESPACE":
        if group_by == "CLASS":
            inventory_group = "k.class_name"
            # a device is its uuid where published (it survives renames), else its key
            join = """JOIN device_classes AS k ON k.cluster = d.cluster
                      AND k.device = COALESCE(d.uuid, d.driver || '/' || d.pool || '/' || d.device)"""
        else:
            inventory_group = "COALESCE(d.node, '')" if group_by == "NODE" else "d.cluster"
            join = ""
        available = f"""
            SELECT d.cluster AS cluster, {sql.text_key(inventory_group)} AS grp,
                   {g}(d.start_us, :f) AS s, {lst}(COALESCE(d.end_us, :h), :t) AS e,
                   CASE WHEN d.device_type = '{GPU}' THEN d.equivalents ELSE 0 END AS w
            FROM device_inventory AS d {join}
            WHERE {overlap("d", "device_inventory")}{where_cluster("d", cluster)}
        """
        queries.append(sql.split(available, count, weighted=True))
    if not postgres:  # PostgreSQL counts abandoned waits in the waits statement's one pass
        queries.append(_abandoned_query(group_by, cluster))
    queries.append(_waits_query(sql, group_by, cluster))

    results, peaks_found = await asyncio.gather(
        fetch_all(engine, queries, params),
        pending_peaks(engine, sql, params, group_by=group_by, cluster=cluster, size=size,
                      count=count, now_us=horizon_us, extent=extent),
    )  # fmt: skip
    for (hours, gpu_hours), found in (
        (("device_hours_allocated", "gpu_hours_allocated"), results[0]),
        (("device_hours_idle", "gpu_hours_idle"), results[1]),
    ):
        for c, grp, idx, us, wus in found:
            r = row(c, grp, idx)
            setattr(r, hours, int(us) / US_PER_HOUR)
            setattr(r, gpu_hours, float(wus or 0) / US_PER_HOUR)
    if group_by != "NAMESPACE":
        for c, grp, idx, us, wus in results[2]:
            r = row(c, grp, idx)
            r.device_hours_available = int(us) / US_PER_HOUR
            r.gpu_hours_available = float(wus or 0) / US_PER_HOUR
    _waits(results[-1], postgres, row)
    for c, grp, idx, abandoned in [] if postgres else results[-2]:
        row(c, grp, idx).claims_abandoned = int(abandoned)
    for (c, grp, idx), peak in peaks_found.items():
        row(c, grp, idx).peak_pending = peak

    for r in rows.values():
        if r.device_hours_available is None and group_by != "NAMESPACE":
            r.device_hours_available = 0.0
        if r.device_hours_available:
            r.utilization = r.device_hours_allocated / r.device_hours_available * 100.0
        if group_by != "NAMESPACE" and r.gpu_hours_available is None:
            r.gpu_hours_available = 0.0
        if r.gpu_hours_available:
            r.gpu_utilization = r.gpu_hours_allocated / r.gpu_hours_available * 100.0
    return sorted(rows.values(), key=lambda r: (r.cluster, r.group, r.bucket_start_us))


def _abandoned_reasons() -> str:
    return ", ".join(f"'{r}'" for r in sorted(ABANDONED))


def _abandoned_query(group_by: str, cluster: str | None) -> str:
    """Per group and bucket: the waits started in it that ended abandoned (SQLite)."""
    return f"""
        SELECT w.cluster AS cluster, {WAIT_GROUP[group_by]} AS grp,
               (w.start_us - :f) / :b AS idx, COUNT(*) AS abandoned
        FROM waits AS w
        WHERE w.start_us >= :f AND w.start_us < :t
          AND w.end_reason IN ({_abandoned_reasons()}){where_cluster("w", cluster)}
        GROUP BY 1, 2, 3
    """


def _waits_query(sql: AuditSql, group_by: str, cluster: str | None) -> str:
    served = (f"w.end_us > w.start_us AND w.end_reason = '{SERVED}' "
              "AND NOT w.started_before_observation")  # fmt: skip
    if not sql.postgres:  # SQLite has no percentile_disc: finished in Python
        return f"""
            SELECT w.cluster AS cluster, {WAIT_GROUP[group_by]} AS grp,
                   (w.start_us - :f) / :b AS idx, w.claim_uid AS claim_uid,
                   w.end_us - w.start_us AS dur
            FROM waits AS w
            WHERE w.start_us >= :f AND w.start_us < :t AND {served}{where_cluster("w", cluster)}
        """
    # One pass over the window's waits: the served ones (percentiles, distinct claims) and the
    # abandoned ones (a count), told apart by FILTER. Only integers go through the sorts: the
    # group and the claim uid as 64-bit hashes (sorting integers is several times cheaper than
    # sorting strings; a collision needs 2^64 luck), and the lowest wait id of each group, whose
    # row names the group afterwards (by primary key: LIMIT keeps the planner from flattening
    # the lookup into a hash join over the whole table; the window's bounds keep it to the
    # window's partitions).
    return f"""
        SELECT n.cluster, n.grp, s.idx, s.waited, s.percentiles, s.longest, s.abandoned
        FROM (
            SELECT MIN(d.id) AS example, d.idx,
                   COUNT(DISTINCT d.claim) FILTER (WHERE d.served) AS waited,
                   percentile_disc(ARRAY[0.5, 0.95]) WITHIN GROUP (ORDER BY d.dur)
                       FILTER (WHERE d.served) AS percentiles,
                   MAX(d.dur) FILTER (WHERE d.served) AS longest,
                   COUNT(*) FILTER (WHERE NOT d.served) AS abandoned
            FROM (
                SELECT w.id, hashtextextended(w.cluster || '/' || {WAIT_GROUP[group_by]}, 0) AS part,
                       (w.start_us - :f) / :b AS idx, hashtextextended(w.claim_uid, 0) AS claim,
                       w.end_us - w.start_us AS dur, ({served}) AS served
                FROM waits AS w
                WHERE w.start_us >= :f AND w.start_us < :t
                  AND (({served}) OR w.end_reason IN ({_abandoned_reasons()}))
                  {where_cluster("w", cluster)}
            ) AS d
            GROUP BY d.part, d.idx
        ) AS s
        CROSS JOIN LATERAL (SELECT w.cluster, {WAIT_GROUP[group_by]} AS grp
                            FROM waits AS w WHERE w.id = s.example
                              AND w.start_us >= :f AND w.start_us < :t LIMIT 1) AS n
    """


def _waits(found: list[Any], postgres: bool, row: Callable[[str, str, int], ContentionRow]) -> None:
    if postgres:
        for c, grp, idx, waited, percentiles, longest, abandoned in found:
            r = row(c, grp, idx)
            r.claims_abandoned = int(abandoned)
            if not waited:  # only abandoned waits started in the bucket
                continue
            p50, p95 = percentiles
            r.claims_waited = waited
            r.wait_p50, r.wait_p95 = p50 / US_PER_SECOND, p95 / US_PER_SECOND
            r.wait_max = longest / US_PER_SECOND
        return
    collected: dict[tuple[str, str, int], list[int]] = defaultdict(list)
    claims: dict[tuple[str, str, int], set[str]] = defaultdict(set)
    for c, grp, idx, claim_uid, dur in found:
        collected[(c, grp, idx)].append(dur)
        claims[(c, grp, idx)].add(claim_uid)
    for key, values in collected.items():
        values.sort()
        r = row(*key)
        r.claims_waited = len(claims[key])
        r.wait_p50 = nearest_rank(values, 0.5) / US_PER_SECOND
        r.wait_p95 = nearest_rank(values, 0.95) / US_PER_SECOND
        r.wait_max = values[-1] / US_PER_SECOND
