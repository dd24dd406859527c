"""The utilisation audit: busy-hours against held-hours, and energy, per group over a window.

For a window [from, to) and a grouping — NAMESPACE, CLASS, NODE, CLUSTER (always within a
cluster) or CLAIM (`namespace/claim`) — each row says, over the GPU allocations
(`allocations` of device type `gpu`, service.model.physical) of the group:

* `held_hours` — GPU-equivalent-hours held: Σ equivalents * |hold ∩ window| (a whole GPU 1,
  a MIG partition its share of the GPU, a share its consumed capacity over the GPU's);
* `known_hours` — the part of those covered by a utilisation bucket
  (`utilization_buckets`, `service.history.utilization_recorder`);
* `busy_hours` — Σ over holds and the buckets of their device: equivalents * busy/100 *
  |hold ∩ bucket ∩ window|. None when no held hour is covered: a device without an exporter
  is unknown, never 0 %. `busy_percent` = busy / known * 100; `unknown_hours` = held - known;
* `energy_kwh` — Σ over the same overlaps: the bucket's energy * the overlap's part of the
  bucket * equivalents / the device's GPU-equivalents (a share its part, a whole GPU or a MIG
  partition all of it). None when no bucket read an energy counter.

Intervals still open count up to min(to, now). Two statements, computed by the database in
integer microseconds (`audit_sql`); each hold reads its device's buckets by a range of the
primary key (on PostgreSQL a LATERAL subquery, so that the planner never hashes every
bucket of a device to filter it per hold).
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncEngine

from dra_mirror.service.history.audit_sql import AuditSql, fetch_all, where_cluster
from dra_mirror.service.history.audit_windows import BadAuditRequest
from dra_mirror.service.history.times import US_PER_HOUR, US_PER_SECOND
from dra_mirror.service.model.physical import GPU
from dra_mirror.service.model.utilization_buckets import BUCKET_SECONDS

GROUPS = ("NAMESPACE", "CLASS", "NODE", "CLUSTER", "CLAIM")
_GROUP = {"NAMESPACE": "a.namespace", "CLASS": "a.class_name", "NODE": "COALESCE(a.node, '')",
          "CLUSTER": "a.cluster", "CLAIM": "a.namespace || '/' || a.claim"}  # fmt: skip
J_PER_KWH = 3.6e6
BUCKET_US = BUCKET_SECONDS * US_PER_SECOND


@dataclass
class UtilizationAuditRow:
    cluster: str
    group: str
    held_hours: float = 0.0
    known_hours: float = 0.0
    busy_hours: float | None = None
    energy_kwh: float | None = None

    @property
    def unknown_hours(self) -> float:
        return max(0.0, self.held_hours - self.known_hours)

    @property
    def busy_percent(self) -> float | None:
        if self.busy_hours is None or self.known_hours <= 0:
            return None
        return self.busy_hours / self.known_hours * 100.0


def _statements(sql: AuditSql, group_by: str, cluster: str | None) -> list[str]:
    g, lst = sql.greatest, sql.least
    spans = f"""
    WITH sp AS (
      SELECT a.cluster AS cluster, {sql.text_key(_GROUP[group_by])} AS grp, a.driver AS driver,
             a.pool AS pool, a.device AS device, a.equivalents AS w,
             {g}(a.start_us, :f) AS s, {lst}(COALESCE(a.end_us, :h), :t) AS e
      FROM allocations AS a
      WHERE a.start_us < :t AND (a.end_us IS NULL OR a.end_us > :f) AND a.device_type = :gpu
        AND a.equivalents > 0{where_cluster("a", cluster)}
    )"""
    overlap = f"({lst}(sp.e, u.bucket_us + :b) - {g}(sp.s, u.bucket_us))"
    on = """u.cluster = sp.cluster AND u.driver = sp.driver AND u.pool = sp.pool
       AND u.device = sp.device AND u.bucket_us < sp.e AND u.bucket_us > sp.s - :b"""
    if sql.postgres:
        # each hold walks the primary key from its first bucket (a nested loop: OFFSET 0 keeps
        # the planner from hashing every bucket of a device and filtering it per hold)
        buckets = f"""CROSS JOIN LATERAL (
      SELECT u.bucket_us, u.busy, u.energy_j, u.equivalents FROM utilization_buckets AS u
      WHERE {on} OFFSET 0) AS u"""
    else:  # SQLite walks the primary key from each hold's first bucket
        buckets = f"JOIN utilization_buckets AS u ON {on}"
    held = f"""{spans}
    SELECT sp.cluster, sp.grp, SUM(sp.w * (sp.e - sp.s)) FROM sp WHERE sp.e > sp.s
    GROUP BY sp.cluster, sp.grp"""
    busy = f"""{spans}
    SELECT sp.cluster, sp.grp, SUM(sp.w * {overlap}), SUM(sp.w * {overlap} * u.busy),
           SUM(CASE WHEN u.energy_j IS NOT NULL AND u.equivalents > 0
                    THEN u.energy_j * {overlap} * sp.w / u.equivalents END)
    FROM sp {buckets}
    WHERE sp.e > sp.s
    GROUP BY sp.cluster, sp.grp"""
    return [held, busy]


async def utilization_audit(
    engine: AsyncEngine,
    *,
    start_us: int,
    end_us: int,
    horizon_us: int,
    group_by: str = "NAMESPACE",
    cluster: str | None = None,
) -> list[UtilizationAuditRow]:
    """The rows of the window, sorted by cluster and group (see the module docstring)."""
    if group_by not in GROUPS:
        raise BadAuditRequest(f"groupBy must be one of {', '.join(GROUPS)}")
    if end_us <= start_us:
        raise BadAuditRequest("`to` must be after `from`")
    sql = AuditSql(engine.dialect.name == "postgresql")
    params: dict = {"f": start_us, "t": end_us, "h": min(end_us, horizon_us), "b": BUCKET_US,
                    "gpu": GPU, "cluster": cluster}  # fmt: skip
    held, busy = await fetch_all(engine, _statements(sql, group_by, cluster), params)
    rows: dict[tuple[str, str], UtilizationAuditRow] = {}
    for name, grp, us in held:
        rows[(name, grp)] = UtilizationAuditRow(name, grp, held_hours=float(us) / US_PER_HOUR)
    for name, grp, known, weighted, energy in busy:
        row = rows.setdefault((name, grp), UtilizationAuditRow(name, grp))
        row.known_hours = float(known) / US_PER_HOUR
        row.busy_hours = float(weighted) / 100.0 / US_PER_HOUR
        if energy is not None:
            row.energy_kwh = float(energy) / BUCKET_US / J_PER_KWH
    return [rows[k] for k in sorted(rows)]
