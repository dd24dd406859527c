"""Held, not busy through the front ends: the graph's `heldNotBusy`, `deviceUtilization` and
`claimUtilization`, and `dra-mirror not-busy` run against the app served on loopback — each
the very answer the question gives in-process."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator

import httpx
import orjson
import pytest

from dra_mirror.schema.reader import Scope
from dra_mirror.service.questions.utilization import held_not_busy
from dra_mirror.service.runtime.compose import compose_app
from dra_mirror.service.settings import Settings
from dra_mirror.service.stores.memory import MemoryStore
from tests.cli_client.test_cli_client import cli
from tests.slack.conftest import served


@pytest.fixture(scope="module")
async def url(demo) -> AsyncIterator[str]:
    app = compose_app(
        Settings(),
        store=demo.store,
        scope_for=lambda request: Scope.everything(),
        now=lambda: demo.now,
        utilization=demo.source,
    )
    async with served(app) as base:
        yield base


async def graphql(url: str, query: str, variables: dict | None = None) -> dict:
    async with httpx.AsyncClient(base_url=url, timeout=60) as http:
        answer = await http.post("/graphql", json={"query": query, "variables": variables or {}})
    return answer.json()


async def test_the_cli_gives_the_questions_answer(demo, url) -> None:
    expected = dataclasses.asdict(await held_not_busy(demo.asker()))
    code, out, err = await cli("not-busy", "--server", url, "--json")
    assert code == 0, err
    assert orjson.loads(out) == orjson.loads(orjson.dumps(expected))
    code, out, err = await cli("not-busy", "--server", url)
    assert code == 0, err
    head, columns, *rows = out.splitlines()
    assert head.startswith("2 held, not busy (below 5% for 30 min; 3 without readings)")
    assert columns.split()[:3] == ["CLUSTER", "CLAIM", "PODS"]
    assert any("research/notebook-" in row and " 0% " in row for row in rows)


async def test_the_graph_answers_held_not_busy_and_device_utilization(demo, url) -> None:
    body = await graphql(
        url,
        '{ heldNotBusy(cluster: "east") { total unknown busyBelow claims { claim consumers '
        'busy since } } deviceUtilization(cluster: "west") { pool device busy } }',
    )
    assert "errors" not in body, body
    held = body["data"]["heldNotBusy"]
    assert held["total"] == 2 and held["busyBelow"] == 5
    unknown = [d for d in body["data"]["deviceUtilization"] if d["pool"] == "west-h200-0"]
    assert unknown and {d["busy"] for d in unknown} == {None}
    body = await graphql(
        url,
        "query($c: String!, $n: String!, $name: String!) { claimUtilization(cluster: $c, "
        "namespace: $n, name: $name) { device busy energyKwh } }",
        {"c": "east", "n": "inference", "name": "shared-h200"},
    )
    [device] = body["data"]["claimUtilization"]
    assert device["busy"] == pytest.approx(90.0)


async def test_no_source_is_an_error_with_its_code() -> None:
    app = compose_app(Settings(), store=MemoryStore(), scope_for=lambda request: Scope.everything())
    async with served(app) as base:
        body = await graphql(base, "{ heldNotBusy { total } }")
        code, _, err = await cli("not-busy", "--server", base)
    assert body["errors"][0]["extensions"]["code"] == "UTILIZATION_DISABLED"
    assert code == 1 and "DRA_MIRROR_UTILIZATION_CONFIG" in err


async def test_metrics_count_the_held_not_busy_devices(url) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=60) as http:
        text = (await http.get("/metrics")).text
    lines = [line for line in text.splitlines() if line.startswith("dra_mirror_held_not_busy")]
    # the notebook's A100 and the MIG device of the pod that asks nvidia.com/mig-1g.18gb
    assert lines == ['dra_mirror_held_not_busy_devices{cluster="east",namespace="research"} 2.0']
