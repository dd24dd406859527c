"""History rows about devices that a batch completes: the uuid of allocations recorded before
their device's slice (`fill_uuids`), and the classes devices were allocated for
(`record_classes`, read by the contention audit by CLASS)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import bindparam, select, text, update
from sqlalchemy.ext.asyncio import AsyncConnection

from dra_mirror.service.history.models import AllocationInterval


async def fill_uuids(
    conn: AsyncConnection, identified: dict[tuple[str, str, str, str], str]
) -> int:
    """Give open allocations recorded without a uuid the one their device now has: one
    SELECT of the open rows without a uuid (few: those held before their slice), one
    UPDATE per device among them. The number of devices named."""
    a = AllocationInterval
    clusters = sorted({device[0] for device in identified})
    query = (
        select(a.cluster, a.driver, a.pool, a.device)
        .distinct()
        .where(a.uuid.is_(None), a.end_us.is_(None), a.cluster.in_(clusters))
    )
    rows = [
        {"c": c, "d": d, "p": p, "n": n, "u": identified[(c, d, p, n)]}
        for c, d, p, n in await conn.execute(query)
        if (c, d, p, n) in identified
    ]
    if not rows:
        return 0
    stmt = (
        update(a)
        .where(a.cluster == bindparam("c"), a.driver == bindparam("d"))
        .where(a.pool == bindparam("p"), a.device == bindparam("n"))
        .where(a.uuid.is_(None), a.end_us.is_(None))
        .values(uuid=bindparam("u"))
    )
    await conn.execute(stmt, rows)
    return len(rows)


async def record_classes(
    conn: AsyncConnection, found: list[tuple[str, str, str]], insert: Any
) -> None:
    """Classes devices were allocated for: most are known already (ON CONFLICT); on
    PostgreSQL one statement for the batch, not one per row (`insert`: the dialect's INSERT
    of device_classes, elsewhere)."""
    if conn.dialect.name == "postgresql":
        await conn.execute(
            text(
                "INSERT INTO device_classes (cluster, device, class_name) "
                "SELECT * FROM unnest(CAST(:clusters AS text[]), CAST(:devices AS text[]), "
                "CAST(:classes AS text[])) ON CONFLICT DO NOTHING"
            ),
            {"clusters": [f[0] for f in found], "devices": [f[1] for f in found],
             "classes": [f[2] for f in found]},
        )  # fmt: skip
        return
    rows = [{"cluster": c, "device": d, "class_name": k} for c, d, k in found]
    await conn.execute(insert.on_conflict_do_nothing(), rows)
