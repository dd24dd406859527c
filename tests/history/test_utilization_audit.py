"""The utilisation audit against a naive recount from the raw buckets and allocations, on
SQLite and PostgreSQL; and a hand-checked case (shares, MIG weight, unknown devices)."""

from __future__ import annotations

import random

import pytest
from sqlalchemy import delete

from dra_mirror.service.history.audit_windows import BadAuditRequest
from dra_mirror.service.history.models import AllocationInterval, UtilizationBucket
from dra_mirror.service.history.utilization_audit import GROUPS, utilization_audit
from tests.history.utilization_data import Hold, write_buckets, write_holds
from tests.model.builders import DRIVER

US = 1_000_000
B = 300 * US
T0 = 1_796_083_200 * US  # 2026-12-01T00:00:00Z
HOUR = 3600 * US


def bucket(device: str, start_us: int, busy: float, energy_j: float | None = None,
           equivalents: float = 1.0, node: str = "node-1") -> dict:  # fmt: skip
    return {"cluster": "east", "driver": DRIVER, "pool": node, "device": device,
            "bucket_us": start_us, "uuid": f"GPU-{device}", "gpu_instance": None, "busy": busy,
            "samples": 20, "energy_j": energy_j, "equivalents": equivalents}  # fmt: skip


def key(h: Hold, group_by: str) -> str:
    return {"NAMESPACE": h.namespace, "CLASS": h.class_name, "NODE": h.node,
            "CLUSTER": h.cluster, "CLAIM": f"{h.namespace}/{h.claim}"}[group_by]  # fmt: skip


def recount(holds, buckets, start, end, horizon, group_by) -> dict:
    """Per group: [held, known, busy, energy] in hours and kWh, one overlap at a time."""
    out: dict = {}
    for h in holds:
        s, e = max(h.start_us, start), min(h.end_us if h.end_us is not None else horizon, end)
        if e <= s:
            continue
        row = out.setdefault((h.cluster, key(h, group_by)), [0.0, 0.0, None, None])
        row[0] += h.equivalents * (e - s) / HOUR
        for b in buckets:
            if (b["pool"], b["device"]) != (h.node, h.device):
                continue
            overlap = min(e, b["bucket_us"] + B) - max(s, b["bucket_us"])
            if overlap <= 0:
                continue
            row[1] += h.equivalents * overlap / HOUR
            row[2] = (row[2] or 0.0) + h.equivalents * overlap / HOUR * b["busy"] / 100
            if b["energy_j"] is not None:
                part = b["energy_j"] * overlap / B * h.equivalents / b["equivalents"] / 3.6e6
                row[3] = (row[3] or 0.0) + part
    return out


def as_dict(rows) -> dict:
    return {(r.cluster, r.group): [r.held_hours, r.known_hours, r.busy_hours, r.energy_kwh]
            for r in rows}  # fmt: skip


def approx(found: dict) -> dict:
    return {k: [None if v is None else pytest.approx(v, rel=1e-9, abs=1e-12) for v in values]
            for k, values in found.items()}  # fmt: skip


async def test_the_audit_equals_a_naive_recount(engine) -> None:
    rng = random.Random(20261204)
    nodes, devices = ["node-1", "node-2"], ["gpu-0", "gpu-1", "gpu-2"]
    for case in range(12):
        async with engine.begin() as conn:
            await conn.execute(delete(AllocationInterval))
            await conn.execute(delete(UtilizationBucket))
        holds = []
        for n in range(rng.randint(0, 8)):
            start = T0 + rng.randrange(0, 3 * HOUR, 7 * US)
            end = None if rng.random() < 0.2 else start + rng.randrange(US, 2 * HOUR, 11 * US)
            holds.append(Hold(device=rng.choice(devices), start_us=start, end_us=end,
                              equivalents=rng.choice([1.0, 0.5, 0.25, 3 / 7]),
                              namespace=rng.choice(["team-a", "team-b"]), claim=f"c{n}",
                              class_name=rng.choice(["gpu", "mig"]), node=rng.choice(nodes)))  # fmt: skip
        buckets = [
            bucket(d, T0 + i * B, rng.choice([0.0, 12.5, 100.0, rng.uniform(0, 100)]),
                   rng.choice([None, rng.uniform(0, 90_000)]), rng.choice([1.0, 0.5]), node)
            for node in nodes for d in devices for i in range(36) if rng.random() < 0.6
        ]  # fmt: skip
        await write_holds(engine, holds, T0, T0 + 6 * HOUR)
        await write_buckets(engine, buckets)
        start = T0 + rng.randrange(-HOUR, 2 * HOUR, 13 * US)
        end = start + rng.randrange(US, 4 * HOUR, 17 * US)
        horizon = T0 + rng.randrange(0, 5 * HOUR, US)
        for group_by in GROUPS:
            rows = await utilization_audit(engine, start_us=start, end_us=end,
                                           horizon_us=horizon, group_by=group_by)  # fmt: skip
            expected = recount(holds, buckets, start, end, min(end, horizon), group_by)
            assert as_dict(rows) == approx(expected), (case, group_by)


async def test_the_worked_example_of_the_docs(engine) -> None:
    """docs/utilization.md's table: shares, a MIG partition, a node without an exporter."""
    holds = [
        # two halves of one shared GPU, busy 80 % for the hour: each 0.4 busy-hours
        Hold("gpu-0", T0, T0 + HOUR, 0.5, namespace="team-a", claim="a"),
        Hold("gpu-0", T0, T0 + HOUR, 0.5, namespace="team-b", claim="b"),
        # a MIG partition (3/7 of its GPU) idle for half an hour
        Hold("mig-1", T0, T0 + HOUR // 2, 3 / 7, namespace="team-b", claim="m"),
        # a GPU whose node has no exporter: held, unknown
        Hold("gpu-9", T0, T0 + HOUR, 1.0, namespace="team-c", claim="u"),
    ]
    buckets = [bucket("gpu-0", T0 + i * B, 80.0, 36_000.0) for i in range(12)]
    buckets += [bucket("mig-1", T0 + i * B, 0.0, 3_600.0, equivalents=3 / 7) for i in range(12)]
    await write_holds(engine, holds, T0, T0 + HOUR)
    await write_buckets(engine, buckets)
    rows = await utilization_audit(engine, start_us=T0, end_us=T0 + HOUR, horizon_us=T0 + HOUR,
                                   group_by="NAMESPACE")  # fmt: skip
    by = {r.group: r for r in rows}
    assert by["team-a"].busy_hours == pytest.approx(0.4)
    assert by["team-a"].busy_percent == pytest.approx(80.0)
    assert by["team-a"].energy_kwh == pytest.approx(12 * 36_000 / 2 / 3.6e6)  # half of 0.12
    assert by["team-b"].held_hours == pytest.approx(0.5 + 3 / 14)
    assert by["team-b"].busy_hours == pytest.approx(0.4)  # the partition adds 0
    assert by["team-b"].busy_percent == pytest.approx(56.0)
    assert by["team-b"].energy_kwh == pytest.approx(0.06 + 6 * 3_600 / 3.6e6)
    unknown = by["team-c"]
    assert (unknown.held_hours, unknown.known_hours, unknown.unknown_hours) == (1.0, 0.0, 1.0)
    assert unknown.busy_hours is None and unknown.busy_percent is None
    assert unknown.energy_kwh is None


async def test_a_request_that_cannot_be_answered(engine) -> None:
    with pytest.raises(BadAuditRequest):
        await utilization_audit(engine, start_us=T0, end_us=T0, horizon_us=T0)
    with pytest.raises(BadAuditRequest):
        await utilization_audit(engine, start_us=T0, end_us=T0 + 1, horizon_us=T0,
                                group_by="POD")  # fmt: skip


async def test_over_graphql_scoped_by_namespace(engine, queries) -> None:
    from dra_mirror.schema import build_schema
    from dra_mirror.schema.context import make_context
    from dra_mirror.schema.reader import Scope
    from dra_mirror.service.stores.memory import MemoryStore

    class TeamA(Scope):
        def allows(self, cluster: str, namespace: str = "") -> bool:
            return namespace in ("", "team-a")

    await write_holds(engine, [Hold("gpu-0", T0, T0 + HOUR, 1.0, claim="a"),
                               Hold("gpu-1", T0, T0 + HOUR, 1.0, namespace="team-b")],
                      T0, T0 + HOUR)  # fmt: skip
    await write_buckets(engine, [bucket("gpu-0", T0 + i * B, 25.0, 1_000.0) for i in range(12)])
    query = """query($from: DateTime!, $to: DateTime!) {
      utilizationAudit(from: $from, to: $to, groupBy: CLAIM) {
        cluster group heldHours knownHours unknownHours busyHours busyPercent energyKwh } }"""
    variables = {"from": "2026-12-01T00:00:00Z", "to": "2026-12-01T02:00:00Z"}
    schema = build_schema()
    for scope, groups in ((None, ["team-a/a", "team-b/c1"]), (TeamA(), ["team-a/a"])):
        context = make_context(MemoryStore(), history=queries, scope=scope)
        result = await schema.execute(query, variable_values=variables, context_value=context)
        assert result.errors is None
        assert [r["group"] for r in result.data["utilizationAudit"]] == groups
    first = result.data["utilizationAudit"][0]
    assert first == {"cluster": "east", "group": "team-a/a", "heldHours": 1.0,
                     "knownHours": 1.0, "unknownHours": 0.0, "busyHours": 0.25,
                     "busyPercent": 25.0, "energyKwh": pytest.approx(12_000 / 3.6e6)}  # fmt: skip


async def test_the_cli_gives_the_questions_answer(engine) -> None:
    import orjson

    from dra_mirror.service.history.runtime import History
    from dra_mirror.service.questions.asker import Asker
    from dra_mirror.service.questions.local import LocalQuestions
    from dra_mirror.service.runtime.compose import compose_app
    from dra_mirror.service.runtime.lifespan import opened
    from dra_mirror.service.settings import Settings
    from dra_mirror.service.stores.memory import MemoryStore
    from tests.cli_client.test_cli_client import cli, parse_table
    from tests.slack.conftest import served

    await write_holds(engine, [Hold("gpu-0", T0, T0 + HOUR, 0.5, claim="a"),
                               Hold("gpu-1", T0, None, 1.0, namespace="team-b")],
                      T0, T0 + HOUR)  # fmt: skip
    await write_buckets(engine, [bucket("gpu-0", T0 + i * B, 50.0, 2_000.0) for i in range(12)])
    history = History(engine)  # its writer never started: reads only
    window = ["--from", "2026-12-01T00:00:00Z", "--to", "2026-12-01T02:00:00Z"]
    store = MemoryStore()
    expected = await LocalQuestions(Asker.over(store, history=history)).utilization_audit(
        *window[1::2], "claim"
    )
    assert [r["group"] for r in expected] == ["team-a/a", "team-b/c1"]
    async with served(compose_app(Settings(), store=store, history=opened(history))) as url:
        code, out, err = await cli("utilization-audit", "--server", url, "--group-by", "claim",
                                   *window, "--json")  # fmt: skip
        assert (code, err) == (0, "")
        assert orjson.loads(out) == expected
        code, out, _ = await cli("utilization-audit", "--server", url, *window)
    assert code == 0
    lines = out.splitlines()
    assert (
        lines[0]
        == "2026-12-01T00:00:00Z to 2026-12-01T02:00:00Z, GPU-equivalent-hours by namespace"
    )
    rows = parse_table("\n".join(lines[1:]))
    assert [(r["GROUP"], r["HELD-H"], r["BUSY-H"], r["BUSY"], r["KWH"]) for r in rows] == [
        ("team-a", "0.5", "0.2", "50%", "0.00"), ("team-b", "2.0", "-", "-", "-"),
    ]  # fmt: skip
