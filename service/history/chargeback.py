"""Chargeback: GPU-equivalent-hours held and in use per namespace (and team), times a price.

For a window [from, to) and each (cluster, namespace) that held GPUs in it:

* `gpu_hours_held` — GPU-equivalent-hours of its allocations of GPUs (`device_type` gpu): a
  whole GPU 1 per hour, a MIG partition its share of the GPU's memory slices, a share its
  consumed capacity over the GPU's (the `equivalents` the model recorded per hold,
  service.model.physical) — the `gpu_hours_allocated` of the contention audit by NAMESPACE;
* `gpu_hours_in_use` — held minus idle-held: the GPU-equivalent-hours during which the claim
  had a consumer pod running (or starting within its grace) — held minus `gpu_hours_idle`;
* `cost_held`, `cost_in_use` — the same hours, each hold's priced by the price table
  (service.history.prices: its device's model, else its class, else the default) and summed,
  in the table's `currency`; None without a price table;
* `team` — the namespace's team label where the price table knows the namespace's labels,
  else `(unlabelled)` (the mirror does not watch Namespaces). `by_team` sums namespaces into
  (cluster, team) rows; `seen_by` keeps the namespaces a reader sees, then groups.

NICs and other device types are not charged. Intervals still open count up to min(to, now).
The database sums integer microseconds times `equivalents` per (cluster, namespace, model,
class) — two statements, run as `audit_sql.fetch_all` runs the audit's — and Python prices
those sums; on PostgreSQL the floors of `service.history.pruning` keep the reads to the
partitions the window reaches.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncEngine

from dra_mirror.service.history import pruning
from dra_mirror.service.history.audit_sql import AuditSql, fetch_all, where_cluster
from dra_mirror.service.history.db import sql_errors
from dra_mirror.service.history.prices import UNLABELLED, PriceTable
from dra_mirror.service.history.times import US_PER_HOUR
from dra_mirror.service.model.physical import GPU

GROUPS = ("NAMESPACE", "TEAM")


@dataclass
class ChargeRow:
    """One namespace's (or, from `by_team`, one team's) charge over the window."""

    cluster: str
    group: str  # the namespace, or the team
    team: str
    gpu_hours_held: float = 0.0
    gpu_hours_in_use: float = 0.0
    cost_held: float | None = None
    cost_in_use: float | None = None
    currency: str | None = None


class ChargebackReads:
    """`HistoryQueries.chargeback`: the reads' engine and clock, and the price table the
    process was started with (`prices`, None without one)."""

    engine: AsyncEngine
    now_us: Callable[[], int]
    prices: PriceTable | None = None

    async def chargeback(
        self, start_us: int, end_us: int, *, cluster: str | None = None
    ) -> list[ChargeRow]:
        with sql_errors("chargeback"):
            return await chargeback(self.engine, start_us=start_us, end_us=end_us,
                                    horizon_us=self.now_us(), prices=self.prices,
                                    cluster=cluster)  # fmt: skip


async def chargeback(
    engine: AsyncEngine,
    *,
    start_us: int,
    end_us: int,
    horizon_us: int,
    prices: PriceTable | None,
    cluster: str | None = None,
) -> list[ChargeRow]:
    """Per (cluster, namespace), sorted: see the module docstring."""
    if end_us <= start_us:
        return []
    sql = AuditSql(engine.dialect.name == "postgresql")
    g, lst = sql.greatest, sql.least
    params: dict[str, int | str] = {"f": start_us, "t": end_us, "h": min(end_us, horizon_us)}
    if cluster is not None:
        params["cluster"] = cluster
    params.update(await pruning.floor_params(engine, ("allocations", "idle_holds"), start_us))

    def overlap(alias: str, table: str) -> str:
        return (f"{alias}.start_us < :t AND ({alias}.end_us IS NULL OR {alias}.end_us > :f)"
                + pruning.bounded(alias, table, params))  # fmt: skip

    keys = "a.cluster, a.namespace, a.device_model, a.class_name"
    held_s, held_e = f"{g}(a.start_us, :f)", f"{lst}(COALESCE(a.end_us, :h), :t)"
    held = f"""
        SELECT {keys}, SUM(a.equivalents * ({held_e} - {held_s})) AS wus
        FROM allocations AS a
        WHERE {overlap("a", "allocations")} AND a.device_type = '{GPU}'
              AND {held_e} > {held_s}{where_cluster("a", cluster)}
        GROUP BY {keys}
    """
    idle_s = f"{g}(a.start_us, i.start_us, :f)"
    idle_e = f"{lst}(COALESCE(a.end_us, :h), COALESCE(i.end_us, :h), :t)"
    idle = f"""
        SELECT {keys}, SUM(a.equivalents * ({idle_e} - {idle_s})) AS wus
        FROM allocations AS a
        JOIN idle_holds AS i ON i.cluster = a.cluster AND i.claim_uid = a.claim_uid
        WHERE {overlap("a", "allocations")} AND {overlap("i", "idle_holds")}
              AND a.device_type = '{GPU}' AND {idle_e} > {idle_s}{where_cluster("a", cluster)}
        GROUP BY {keys}
    """
    found_held, found_idle = await fetch_all(engine, [held, idle], params)
    idle_us = {(c, ns, m, k): float(w or 0) for c, ns, m, k, w in found_idle}
    rows: dict[tuple[str, str], ChargeRow] = {}
    costs: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0.0, 0.0])
    for c, ns, model, class_name, wus in found_held:
        held_h = float(wus or 0) / US_PER_HOUR
        in_use_h = held_h - idle_us.get((c, ns, model, class_name), 0.0) / US_PER_HOUR
        key = (c, ns)
        if key not in rows:
            team = prices.team(c, ns) if prices is not None else UNLABELLED
            rows[key] = ChargeRow(c, ns, team)
        row = rows[key]
        row.gpu_hours_held += held_h
        row.gpu_hours_in_use += in_use_h
        if prices is not None:
            price = prices.price(model or "", class_name or "")
            costs[key][0] += held_h * price
            costs[key][1] += in_use_h * price
    if prices is not None:
        for key, row in rows.items():
            row.cost_held, row.cost_in_use = costs[key]
            row.currency = prices.currency
    return sorted(rows.values(), key=lambda r: (r.cluster, r.group))


def seen_by(
    rows: list[ChargeRow], group_by: str, allows: Callable[[str, str], bool]
) -> list[ChargeRow]:
    """The namespace rows `allows(cluster, namespace)` keeps; under TEAM summed per team over
    those namespaces only (a team's figure says nothing of namespaces the reader cannot see)."""
    seen = [r for r in rows if allows(r.cluster, r.group)]
    return by_team(seen) if group_by == "TEAM" else seen


def by_team(rows: list[ChargeRow]) -> list[ChargeRow]:
    """Namespace rows summed per (cluster, team), sorted."""
    teams: dict[tuple[str, str], ChargeRow] = {}
    for r in rows:
        t = teams.setdefault((r.cluster, r.team),
                             ChargeRow(r.cluster, r.team, r.team, currency=r.currency))  # fmt: skip
        t.gpu_hours_held += r.gpu_hours_held
        t.gpu_hours_in_use += r.gpu_hours_in_use
        if r.cost_held is not None and r.cost_in_use is not None:
            t.cost_held = (t.cost_held or 0.0) + r.cost_held
            t.cost_in_use = (t.cost_in_use or 0.0) + r.cost_in_use
    return sorted(teams.values(), key=lambda r: (r.cluster, r.group))
