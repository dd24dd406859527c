"""Chargeback: the worked example of docs/history.md ("Chargeback") written through the model,
and every figure against a naive minute-by-minute recount of raw allocation and idle rows —
on SQLite and PostgreSQL; then the graph and the CSV export, through an access scope."""

from __future__ import annotations

import csv
import io
import random
import re
from pathlib import Path
from types import SimpleNamespace

import httpx
import msgspec
import pytest
import yaml
from sqlalchemy import insert
from starlette.applications import Starlette
from starlette.routing import Route

from dra_mirror.schema import build_schema
from dra_mirror.schema.context import make_context
from dra_mirror.schema.reader import Scope
from dra_mirror.service.history.chargeback import by_team, seen_by
from dra_mirror.service.history.models import AllocationInterval, IdleInterval
from dra_mirror.service.history.partitions import create, months_between
from dra_mirror.service.history.prices import UNLABELLED, PriceTable, parse
from dra_mirror.service.history.queries import HistoryQueries
from dra_mirror.service.history.times import US_PER_HOUR, to_rfc3339, to_us
from dra_mirror.service.http.exports import chargeback_csv
from dra_mirror.service.model.index import ClusterIndex, Event
from dra_mirror.service.model.kinds import KINDS
from dra_mirror.service.model.records import Attribute, Device
from dra_mirror.service.stores.memory import MemoryStore
from tests.history.conftest import BACKENDS, recorded
from tests.model.builders import CLUSTER, DRIVER, claim, device, pod, slice_

DOC = Path(__file__).resolve().parents[2] / "docs" / "history.md"
SLICES = {f"memory-slice-{i}": "1" for i in range(8)}


def at(minute: int) -> str:
    return f"2026-12-01T10:{minute:02d}:00Z"


def documented_prices() -> PriceTable:
    """The price table docs/history.md shows (the YAML block after `DRA_MIRROR_HISTORY_PRICES`)."""
    text = DOC.read_text().split("DRA_MIRROR_HISTORY_PRICES", 1)[1]
    return parse(yaml.safe_load(text.split("```yaml\n", 1)[1].split("```", 1)[0]))


def documented() -> dict[str, tuple]:
    """namespace -> (team, held, in use, cost held, cost in use) of the worked example."""
    text = DOC.read_text()
    table = text.split("<!-- chargeback-example -->")[1].split("<!-- /chargeback-example -->")[0]
    rows = re.findall(
        r"^\| `(\w+)` \| ([^|]+) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \|",
        table, re.MULTILINE,
    )  # fmt: skip
    assert len(rows) == 2, "the chargeback example's table"
    return {ns: (team.strip(), *map(float, figures)) for ns, team, *figures in rows}


def product(d: Device, name: str) -> Device:
    attributes = {**d.attributes, f"{DRIVER}/productName": Attribute("string", name)}
    return msgspec.structs.replace(d, attributes=attributes)


def world_batches() -> list:
    """The example's events folded into an index that has listed an empty cluster."""
    index = ClusterIndex(CLUSTER)
    out = [index.resync(kind, [], at=at(0)) for kind in KINDS]
    h200, l4 = "NVIDIA H200", "NVIDIA L4"
    n1 = slice_(
        "n1", pool="n1", node="n1", counters={"cs0": SLICES},
        devices=(
            product(device("gpu-0", uuid="GPU-0", consumes={"cs0": SLICES}), h200),
            product(device("gpu-0-3g", consumes={
                "cs0": {f"memory-slice-{i}": "1" for i in range(4)}}), h200),
            product(device("gpu-0-1g", consumes={"cs0": {"memory-slice-4": "1"}}), h200),
            product(device("gpu-1", uuid="GPU-1"), l4),
        ),
    )  # fmt: skip
    p_train = pod("p-train", namespace="ml", node="n1", claims=(("gpu", "train", None),))
    p_infer = pod("p-infer", namespace="web", node="n1", claims=(("gpu", "infer", None),))
    p_nb = pod("p-nb", namespace="ml", phase="Pending", claims=(("gpu", "nb", None),))
    held = [
        claim("train", namespace="ml", devices=(("n1", "gpu-1"),), node="n1",
              consumers=(("p-train", "uid-p-train"),)),
        claim("infer", namespace="web", devices=(("n1", "gpu-0-3g"),), node="n1",
              consumers=(("p-infer", "uid-p-infer"),)),
    ]  # fmt: skip
    first = [n1, p_train, p_infer, p_nb, *held, claim("nb", namespace="ml")]
    out.append(index.apply([Event("ADDED", r) for r in first], at=at(0)))
    done = pod("p-train", namespace="ml", node="n1", phase="Succeeded", rv="2",
               claims=(("gpu", "train", None),))  # fmt: skip
    served = claim("nb", namespace="ml", devices=(("n1", "gpu-0-1g"),), node="n1",
                   consumers=(("p-nb", "uid-p-nb"),), rv="2")  # fmt: skip
    up = pod("p-nb", namespace="ml", node="n1", rv="2", claims=(("gpu", "nb", None),))
    events = [Event("MODIFIED", done), Event("MODIFIED", served), Event("MODIFIED", up)]
    out.append(index.apply(events, at=at(30)))
    return out


@pytest.mark.parametrize("backend", BACKENDS)
async def test_the_worked_example_is_what_chargeback_answers(backend, request, tmp_path) -> None:
    async with recorded(backend, request, tmp_path, world_batches()) as engine:
        queries = HistoryQueries(engine, now_us=lambda: to_us("2026-12-02T00:00:00Z"))
        queries.prices = documented_prices()
        rows = await queries.chargeback(to_us(at(0)), to_us("2026-12-01T11:00:00Z"))
    answered = {r.group: (r.team, r.gpu_hours_held, r.gpu_hours_in_use, r.cost_held,
                          r.cost_in_use) for r in rows}  # fmt: skip
    expected = documented()
    assert answered.keys() == expected.keys()
    for namespace, (team, *figures) in expected.items():
        assert answered[namespace][0] == team, namespace
        assert answered[namespace][1:] == pytest.approx(tuple(figures)), namespace
    assert {r.currency for r in rows} == {"EUR"}
    teams = {r.group: r.gpu_hours_held for r in by_team(rows)}
    assert teams == pytest.approx({"research": 1.0625, UNLABELLED: 0.5})


# --- the oracle: random raw rows, recounted minute by minute ----------------------------------

BASE = to_us("2026-11-30T20:00:00Z")  # the windows cross a month: two partitions on PostgreSQL
MINUTE = 60_000_000
NOW = 500  # minutes after BASE: open intervals count up to here
PRICES = PriceTable(
    currency="EUR", default=0.75, models={"NVIDIA H200": 4.0}, classes={"mig.nvidia.com": 1.5},
    namespace_labels={"a": {"team": "x"}, "west/b": {"team": "y"}, "c": {"owner": "z"}},
)  # fmt: skip
WINDOWS = [(0, 600), (30, 90), (200, 499), (450, 560), (0, 1), (480, 520)]


def raw_rows(seed: int) -> tuple[list[dict], list[dict]]:
    """Allocations and idle spells on whole minutes (claims with several devices, open
    intervals, fractions, NICs, rows without type or model), and per claim disjoint idle
    spells, as the writer keeps them."""
    rnd = random.Random(seed)
    allocations, idle = [], []
    for n in range(60):
        cluster, namespace = rnd.choice(("east", "west")), rnd.choice("abc")
        uid = f"uid-{seed}-{n}"
        start = rnd.randrange(0, 480)
        for d in range(rnd.choice((1, 1, 2, 3))):
            begin = start + rnd.randrange(0, 30)
            end = None if rnd.random() < 0.2 else begin + rnd.randrange(1, 200)
            allocations.append({
                "cluster": cluster, "driver": DRIVER, "pool": "p", "device": f"d{n}-{d}",
                "uuid": None, "node": "n", "namespace": namespace, "claim": f"c{n}",
                "claim_uid": uid, "request": "r", "share_id": "", "consumed_capacity": "{}",
                "class_name": rnd.choice(("gpu.nvidia.com", "mig.nvidia.com", "")),
                "start_us": BASE + begin * MINUTE,
                "end_us": None if end is None else BASE + end * MINUTE,
                "equivalents": rnd.choice((1.0, 0.5, 0.125, 0.25, 0.1, 0.0)),
                "device_type": rnd.choice(("gpu", "gpu", "gpu", "nic", "")),
                "device_model": rnd.choice(("NVIDIA H200", "NVIDIA L4", "")),
            })  # fmt: skip
        cursor = start - rnd.randrange(0, 20)
        for _ in range(rnd.randrange(0, 3)):
            begin = cursor + rnd.randrange(0, 60)
            end = None if rnd.random() < 0.3 else begin + rnd.randrange(1, 90)
            idle.append({"cluster": cluster, "namespace": namespace, "claim": f"c{n}",
                         "claim_uid": uid, "start_us": BASE + begin * MINUTE,
                         "end_us": None if end is None else BASE + end * MINUTE})  # fmt: skip
            if end is None:
                break
            cursor = end
    return allocations, idle


def _covers(row: dict, minute: int) -> bool:
    end = NOW if row["end_us"] is None else (row["end_us"] - BASE) // MINUTE
    return (row["start_us"] - BASE) // MINUTE <= minute < end


def recount(allocations: list[dict], idle: list[dict], lo: int, hi: int) -> dict[tuple, list]:
    """(cluster, namespace) -> [held h, in use h, cost held, cost in use, team], minute by
    minute: a GPU allocation covering a minute counts its equivalents / 60, priced by model,
    class, default; in use unless an idle spell of its claim covers the minute too."""
    out: dict[tuple, list] = {}
    for a in allocations:
        if a["device_type"] != "gpu":
            continue
        model, klass = a["device_model"], a["class_name"]
        price = (PRICES.models.get(model) if model in PRICES.models
                 else PRICES.classes.get(klass, PRICES.default))  # fmt: skip
        for m in range(lo, hi):
            if not _covers(a, m):
                continue
            row = out.setdefault((a["cluster"], a["namespace"]), [0.0, 0.0, 0.0, 0.0, None])
            share = a["equivalents"] / 60
            row[0] += share
            row[2] += share * price
            idle_now = any(i["cluster"] == a["cluster"] and i["claim_uid"] == a["claim_uid"]
                           and _covers(i, m) for i in idle)  # fmt: skip
            if not idle_now:
                row[1] += share
                row[3] += share * price
    for (cluster, namespace), row in out.items():
        labels = {**PRICES.namespace_labels.get(namespace, {}),
                  **PRICES.namespace_labels.get(f"{cluster}/{namespace}", {})}  # fmt: skip
        row[4] = labels.get("team", UNLABELLED)
    return out


async def test_chargeback_equals_a_naive_recount_of_the_raw_rows(engine) -> None:
    allocations, idle = [], []
    for seed in range(3):
        a, i = raw_rows(seed)
        allocations += a
        idle += i
    months = months_between(BASE - 60 * MINUTE, BASE + 700 * MINUTE)
    await create(engine, {"allocations": months, "idle_holds": months})
    async with engine.begin() as conn:
        await conn.execute(insert(AllocationInterval), allocations)
        await conn.execute(insert(IdleInterval), idle)
    queries = HistoryQueries(engine, now_us=lambda: BASE + NOW * MINUTE)
    queries.prices = PRICES
    assert sum(a["device_type"] == "gpu" and a["end_us"] is None for a in allocations) > 3
    for lo, hi in WINDOWS:
        expected = recount(allocations, idle, lo, hi)
        rows = await queries.chargeback(BASE + lo * MINUTE, BASE + hi * MINUTE)
        got = {(r.cluster, r.group): [r.gpu_hours_held, r.gpu_hours_in_use, r.cost_held,
                                      r.cost_in_use] for r in rows}  # fmt: skip
        assert got.keys() == expected.keys(), (lo, hi)
        for key, row in expected.items():
            assert got[key] == pytest.approx(row[:4], abs=1e-9), (lo, hi, key)
        assert {(r.cluster, r.group): r.team for r in rows} == {
            k: v[4] for k, v in expected.items()
        }
        one = await queries.chargeback(BASE + lo * MINUTE, BASE + hi * MINUTE, cluster="west")
        assert [(r.cluster, r.group) for r in one] == sorted(k for k in expected if k[0] == "west")
        teams: dict[tuple, float] = {}
        for (cluster, _), row in expected.items():
            teams[(cluster, row[4])] = teams.get((cluster, row[4]), 0.0) + row[2]
        grouped = {(r.cluster, r.group): r.cost_held for r in by_team(rows)}
        assert grouped == pytest.approx(teams), (lo, hi)
    # without a price table: the same hours, no costs
    queries.prices = None
    rows = await queries.chargeback(BASE, BASE + 600 * MINUTE)
    assert rows and all(r.cost_held is None and r.currency is None for r in rows)
    assert {r.team for r in rows} == {UNLABELLED}


# --- the graph and the CSV export -----------------------------------------------------------


class OnlyA(Scope):
    def allows(self, cluster: str, namespace: str = "") -> bool:
        return namespace in ("", "a")


@pytest.fixture
async def priced(engine) -> HistoryQueries:
    allocations, idle = raw_rows(7)
    months = months_between(BASE - 60 * MINUTE, BASE + 700 * MINUTE)
    await create(engine, {"allocations": months, "idle_holds": months})
    async with engine.begin() as conn:
        await conn.execute(insert(AllocationInterval), allocations)
        await conn.execute(insert(IdleInterval), idle)
    queries = HistoryQueries(engine, now_us=lambda: BASE + NOW * MINUTE)
    queries.prices = PRICES
    return queries


QUERY = """query($from: DateTime!, $to: DateTime!, $g: ChargebackGroup!) {
  chargeback(from: $from, to: $to, groupBy: $g) {
    cluster group team gpuHoursHeld gpuHoursInUse costHeld costInUse currency } }"""


async def test_chargeback_over_graphql_and_csv_through_a_scope(priced) -> None:
    window = {"from": to_rfc3339(BASE), "to": to_rfc3339(BASE + 600 * MINUTE)}
    everything = await priced.chargeback(BASE, BASE + 600 * MINUTE)
    schema = build_schema()
    for scope, allows in ((None, lambda c, n: True), (OnlyA(), OnlyA().allows)):
        context = make_context(MemoryStore(), history=priced, scope=scope)
        for group in ("NAMESPACE", "TEAM"):
            result = await schema.execute(QUERY, variable_values={**window, "g": group},
                                          context_value=context)  # fmt: skip
            assert result.errors is None
            expected = seen_by(everything, group, allows)
            assert [(r["cluster"], r["group"], r["team"]) for r in result.data["chargeback"]] == [
                (r.cluster, r.group, r.team) for r in expected]  # fmt: skip
            assert [r["costHeld"] for r in result.data["chargeback"]] == pytest.approx(
                [r.cost_held for r in expected])  # fmt: skip
    # a team sums only the namespaces the reader sees: under OnlyA, team x is namespace a
    seen = seen_by(everything, "TEAM", OnlyA().allows)
    assert {r.group for r in seen} == {"x"}
    assert sum(r.gpu_hours_held for r in seen) == pytest.approx(
        sum(r.gpu_hours_held for r in everything if r.group == "a"))  # fmt: skip

    app = Starlette(routes=[Route("/export/chargeback.csv", chargeback_csv)])
    app.state.mirror = SimpleNamespace(history=priced, scope_for=lambda _r: OnlyA())
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://history") as client:
        response = await client.get("/export/chargeback.csv", params=window)
        assert response.status_code == 200
        rows = list(csv.DictReader(io.StringIO(response.text)))
        expected = seen_by(everything, "NAMESPACE", OnlyA().allows)
        assert [(r["cluster"], r["group"], r["currency"]) for r in rows] == [
            (r.cluster, r.group, "EUR") for r in expected]  # fmt: skip
        assert [float(r["gpu_equivalent_hours_in_use"]) for r in rows] == pytest.approx(
            [r.gpu_hours_in_use for r in expected])  # fmt: skip
        bad = await client.get("/export/chargeback.csv", params={**window, "groupBy": "CLASS"})
        assert (bad.status_code, "groupBy" in bad.text) == (400, True)
    assert US_PER_HOUR == 60 * MINUTE


@pytest.mark.parametrize("slices_later", [None, "batch", "apart"])
async def test_every_gpu_hold_of_the_demo_carries_its_model(tmp_path: Path, slices_later) -> None:
    # a hold recorded before its device's slice was seen has no model until the slice comes:
    # then history writes the model with the hold's real weight (hold_weighed)
    from sqlalchemy import text

    from tests.contract.worlds import LOADED_AT, demo_with_history

    loaded = await demo_with_history(tmp_path, slices_later=slices_later)
    try:
        async with loaded.history.engine.connect() as conn:
            models = dict((await conn.execute(text(
                "SELECT device_model, COUNT(*) FROM allocations WHERE device_type = 'gpu' "
                "GROUP BY device_model"))).all())  # fmt: skip
        assert models and "" not in models, models
        assert set(models) <= {"NVIDIA H200", "NVIDIA H100 80GB HBM3", "NVIDIA A100 80GB PCIe"}
        start = to_us(LOADED_AT)
        loaded.history.prices = parse(
            {"currency": "EUR", "default": 0, "models": {"NVIDIA H200": 1}}
        )
        rows = await loaded.history.chargeback(start, start + US_PER_HOUR)
        held = await loaded.history.contention(start, start + US_PER_HOUR, group_by="NAMESPACE")
        assert {(r.cluster, r.group): r.gpu_hours_held for r in rows} == pytest.approx(
            {(r.cluster, r.group): r.gpu_hours_allocated for r in held if r.gpu_hours_allocated}
        )
        assert sum(r.cost_held for r in rows) > 0  # the H200s' holds, priced by their model
    finally:
        await loaded.history.close()
