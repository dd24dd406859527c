"""A device's utilisation series against a naive read of its bucket rows (gaps unknown, never
0 %), on SQLite and PostgreSQL; and the graph's field, scoped by cluster."""

from __future__ import annotations

import random

import pytest
from sqlalchemy import delete

from dra_mirror.service.history.audit_windows import BadAuditRequest
from dra_mirror.service.history.models import UtilizationBucket
from dra_mirror.service.history.utilization_series import device_series
from tests.history.test_utilization_audit import HOUR, T0, US, B, bucket
from tests.history.utilization_data import write_buckets
from tests.model.builders import DRIVER


def naive(rows: list[dict], node: str, device: str, start: int, end: int) -> list[tuple]:
    """Every bucket start whose bucket meets [start, end), with the row of the device there."""
    out = []
    at = T0 - 10 * B  # before every window the test asks
    while at < end:
        if at + B > start:
            found = [r for r in rows if (r["cluster"], r["pool"], r["device"], r["bucket_us"])
                     == ("east", node, device, at)]  # fmt: skip
            busy = found[0]["busy"] if found else None
            energy = (
                found[0]["energy_j"] / 3.6e6 if found and found[0]["energy_j"] is not None else None
            )
            out.append((at, busy, energy))
        at += B
    return out


async def test_the_series_equals_a_naive_read_of_the_rows(engine) -> None:
    rng = random.Random(20261204)
    for case in range(10):
        async with engine.begin() as conn:
            await conn.execute(delete(UtilizationBucket))
        rows = [
            bucket(d, T0 + i * B, rng.choice([0.0, 12.5, 100.0, rng.uniform(0, 100)]),
                   rng.choice([None, rng.uniform(1, 90_000)]), node=node)
            for node in ("node-1", "node-2") for d in ("gpu-0", "gpu-1") for i in range(24)
            if rng.random() < 0.6
        ]  # fmt: skip
        await write_buckets(engine, rows)
        start = T0 + rng.randrange(-HOUR // 2, HOUR, 7 * US)
        end = start + rng.randrange(US, 2 * HOUR, 11 * US)
        for node, device in (("node-1", "gpu-0"), ("node-2", "gpu-1"), ("node-3", "gpu-0")):
            found = await device_series(engine, cluster="east", driver=DRIVER, pool=node,
                                        device=device, start_us=start, end_us=end)  # fmt: skip
            got = [(p.start_us, p.busy, p.energy_kwh) for p in found]
            expected = naive(rows, node, device, start, end)
            assert got == [(a, b, None if e is None else pytest.approx(e)) for a, b, e in expected]
            assert any(b is None for _, b, _ in got) or node != "node-3", case
    with pytest.raises(BadAuditRequest):
        await device_series(engine, cluster="east", driver=DRIVER, pool="node-1", device="gpu-0",
                            start_us=T0, end_us=T0)  # fmt: skip
    with pytest.raises(BadAuditRequest):
        await device_series(engine, cluster="east", driver=DRIVER, pool="node-1", device="gpu-0",
                            start_us=T0, end_us=T0 + 32 * 24 * HOUR)  # fmt: skip


async def test_over_graphql_scoped_by_cluster(engine, queries) -> None:
    from dra_mirror.schema import build_schema
    from dra_mirror.schema.context import make_context
    from dra_mirror.schema.reader import Scope
    from dra_mirror.service.stores.memory import MemoryStore

    class West(Scope):
        def allows(self, cluster: str, namespace: str = "") -> bool:
            return cluster == "west"

    await write_buckets(engine, [bucket("gpu-0", T0 + i * B, 25.0 * (i % 4), 1_800.0)
                                 for i in range(12) if i != 5])  # fmt: skip
    query = """query($from: DateTime!, $to: DateTime!, $driver: String!) {
      deviceUtilizationHistory(cluster: "east", driver: $driver, pool: "node-1",
                               device: "gpu-0", from: $from, to: $to) { start busy energyKwh } }"""
    variables = {"from": "2026-12-01T00:20:00Z", "to": "2026-12-01T00:35:00Z", "driver": DRIVER}
    schema = build_schema()
    context = make_context(MemoryStore(), history=queries)  # no utilisation source
    result = await schema.execute(query, variable_values=variables, context_value=context)
    assert result.errors[0].extensions["code"] == "UTILIZATION_DISABLED"
    source = object()  # configured: the answer is the history's, never the source's
    context = make_context(MemoryStore(), history=queries, utilization=source)
    result = await schema.execute(query, variable_values=variables, context_value=context)
    assert result.errors is None
    assert result.data["deviceUtilizationHistory"] == [
        {"start": "2026-12-01T00:20:00Z", "busy": 0.0, "energyKwh": 0.0005},
        {"start": "2026-12-01T00:25:00Z", "busy": None, "energyKwh": None},  # unread: unknown
        {"start": "2026-12-01T00:30:00Z", "busy": 50.0, "energyKwh": 0.0005},
    ]
    context = make_context(MemoryStore(), history=queries, scope=West(), utilization=source)
    result = await schema.execute(query, variable_values=variables, context_value=context)
    assert result.errors is None and result.data["deviceUtilizationHistory"] == []
    variables["to"] = variables["from"]
    result = await schema.execute(query, variable_values=variables, context_value=context)
    assert result.errors and result.errors[0].extensions["code"] == "BAD_INPUT"
