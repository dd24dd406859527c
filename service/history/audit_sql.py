"""The SQL the audits share: dialect spellings, the cluster filter, running the statements.

`AuditSql` spells what differs between PostgreSQL and SQLite (GREATEST/MAX, byte-order keys,
splitting spans into buckets); `fetch_all` runs one audit's statements — on PostgreSQL
concurrently, one connection each, with `work_mem` raised and without JIT or parallel
workers (see `service.history.contention`). `WAIT_GROUP` is the grouping expression of the
waits table for each `groupBy`.
"""

from __future__ import annotations

import asyncio

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

# a pending claim has no node yet: under NODE its waits fall in the group ""
WAIT_GROUP = {"CLASS": "w.class_name", "NAMESPACE": "w.namespace", "NODE": "''",
              "CLUSTER": "w.cluster"}  # fmt: skip
AUDIT_WORK_MEM = "256MB"


class AuditSql:
    """The SQL spelled per dialect (PostgreSQL or SQLite)."""

    def __init__(self, postgres: bool) -> None:
        self.postgres = postgres
        self.greatest = "GREATEST" if postgres else "MAX"
        self.least = "LEAST" if postgres else "MIN"

    def text_key(self, expr: str) -> str:
        """A grouping/sorting key: byte order on PostgreSQL ("C"), several times cheaper to
        sort than the database's linguistic collation; SQLite compares bytes already."""
        return f'({expr}) COLLATE "C"' if self.postgres else expr

    def split(self, spans: str, count: int, *, weighted: bool = False) -> str:
        """Per (cluster, grp, idx): the microseconds of `spans` (cluster, grp, s, e) in it;
        `weighted`: also (`wus`) each span's microseconds times its `w` (GPU-equivalents), in
        the same pass."""
        g, lst = self.greatest, self.least
        if count == 1:
            part = "(sp.e - sp.s)"
        else:
            part = f"({lst}(sp.e, :f + (b.idx + 1) * :b, :t) - {g}(sp.s, :f + b.idx * :b))"
        sums = f"SUM({part}) AS us" + (f", SUM(sp.w * {part}) AS wus" if weighted else "")
        if count == 1:
            return f"""
            SELECT sp.cluster, sp.grp, 0 AS idx, {sums}
            FROM ({spans}) AS sp WHERE sp.e > sp.s GROUP BY sp.cluster, sp.grp
            """
        if self.postgres:
            # one row per bucket a span touches (usually one), no join against every bucket
            return f"""
            SELECT sp.cluster, sp.grp, b.idx, {sums}
            FROM ({spans}) AS sp
            CROSS JOIN LATERAL generate_series((sp.s - :f) / :b, (sp.e - 1 - :f) / :b) AS b(idx)
            WHERE sp.e > sp.s
            GROUP BY sp.cluster, sp.grp, b.idx
            """
        return f"""
        WITH RECURSIVE
        buckets(idx) AS (SELECT 0 UNION ALL SELECT idx + 1 FROM buckets WHERE idx < :n - 1)
        SELECT sp.cluster, sp.grp, b.idx, {sums}
        FROM ({spans}) AS sp
        JOIN buckets AS b ON b.idx BETWEEN (sp.s - :f) / :b AND (sp.e - 1 - :f) / :b
        WHERE sp.e > sp.s
        GROUP BY sp.cluster, sp.grp, b.idx
        """


def where_cluster(alias: str, cluster: str | None) -> str:
    return f" AND {alias}.cluster = :cluster" if cluster is not None else ""


async def fetch_all(engine: AsyncEngine, queries: list[str], params: dict) -> list[list]:
    """Run the audit's statements: on PostgreSQL concurrently, one connection each (the
    server works on them in parallel, so no parallel workers within one) with room to sort in
    memory; on SQLite one by one."""
    if engine.dialect.name != "postgresql":
        async with engine.connect() as conn:
            return [list(await conn.execute(text(q), params)) for q in queries]

    async def one(query: str) -> list:
        async with engine.connect() as conn:
            # SET LOCAL lasts until this read-only transaction ends with the connection
            await conn.execute(text(f"SET LOCAL work_mem = '{AUDIT_WORK_MEM}'"))
            # JIT compiling (triggered by the cost estimates, up to ~0.2 s) saves nothing on
            # these aggregations; workers would compete with the other statements for cores
            await conn.execute(text("SET LOCAL jit = off"))
            await conn.execute(text("SET LOCAL max_parallel_workers_per_gather = 0"))
            return list(await conn.execute(text(query), params))

    return list(await asyncio.gather(*(one(q) for q in queries)))
