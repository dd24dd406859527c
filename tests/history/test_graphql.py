"""The history fields through the real schema, and the CSV export through a real ASGI app."""

from __future__ import annotations

import csv
import io
from types import SimpleNamespace

import httpx
import pytest
from starlette.applications import Starlette
from starlette.routing import Route

from dra_mirror.schema import build_schema
from dra_mirror.schema.context import make_context
from dra_mirror.schema.reader import Scope
from dra_mirror.service.access.scope import AccessScope
from dra_mirror.service.http.exports import contention_csv, idle_holders_csv
from dra_mirror.service.stores.memory import MemoryStore
from tests.history.script import END, at
from tests.history.truth import expected_contention, expected_idle_holders

SCHEMA = build_schema()


class TeamA(Scope):
    def allows(self, cluster: str, namespace: str = "") -> bool:
        return namespace in ("", "team-a")


async def _run(query: str, history, scope: Scope | None = None, **variables):
    context = make_context(MemoryStore(), history=history, scope=scope)
    return await SCHEMA.execute(query, variable_values=variables, context_value=context)


async def test_who_held_over_graphql(loaded):
    result = await _run(
        """query($at: DateTime!) { whoHeld(device: "n1/gpu-5", at: $at) {
             cluster namespace claim device uuid node request shareID since until endReason
             pods { name since until } } }""",
        loaded, at=at(40),
    )  # fmt: skip
    assert result.errors is None
    assert result.data["whoHeld"] == [{
        "cluster": "east", "namespace": "team-b", "claim": "B", "device": "gpu-1",
        "uuid": "GPU-B", "node": "n1", "request": "gpu", "shareID": None,
        "since": "2026-03-02T00:30:00Z", "until": "2026-03-02T02:00:00Z", "endReason": "released",
        "pods": [{"name": "pb", "since": "2026-03-02T00:30:00Z", "until": "2026-03-02T02:00:00Z"}],
    }]  # fmt: skip


async def test_contention_over_graphql_matches_the_truth(loaded):
    result = await _run(
        """query($from: DateTime!, $to: DateTime!) {
             contention(from: $from, to: $to, groupBy: NAMESPACE, bucket: "1h") {
               cluster group since deviceHoursAllocated deviceHoursIdle deviceHoursAvailable
               claimsWaited waitP50Seconds waitP95Seconds waitMaxSeconds peakPending } }""",
        loaded, **{"from": at(0), "to": at(END)},
    )  # fmt: skip
    assert result.errors is None
    expected = [
        {"cluster": r["cluster"], "group": r["group"], "since": at(r["bucket"]),
         "deviceHoursAllocated": r["allocated"], "deviceHoursIdle": r["idle"],
         "deviceHoursAvailable": r["available"], "claimsWaited": r["waited"],
         "waitP50Seconds": r["p50"], "waitP95Seconds": r["p95"], "waitMaxSeconds": r["max"],
         "peakPending": r["peak"]}
        for r in expected_contention("NAMESPACE", 60)
    ]  # fmt: skip
    assert result.data["contention"] == expected


async def test_the_access_scope_filters_history(loaded):
    query = """query($from: DateTime!, $to: DateTime!) {
                 contention(from: $from, to: $to, groupBy: NAMESPACE) { group }
                 idleHolders(from: $from, to: $to) { claim namespace deviceHoursIdle } }"""
    result = await _run(query, loaded, TeamA(), **{"from": at(0), "to": at(END)})
    assert result.errors is None
    assert [r["group"] for r in result.data["contention"]] == ["team-a"]
    assert [h["claim"] for h in result.data["idleHolders"]] == ["A"]
    hidden = await _run('{ claimHistory(cluster: "east", namespace: "team-b", name: "D") { uid } }',
                        loaded, TeamA())  # fmt: skip
    assert hidden.data["claimHistory"] == []


async def test_claim_and_device_history_over_graphql(loaded):
    result = await _run(
        """query($from: DateTime!, $to: DateTime!) {
             claimHistory(cluster: "east", namespace: "team-a", name: "C") {
               uid waits { since until endReason classes } allocations { device } }
             deviceHistory(device: "GPU-C", from: $from, to: $to) {
               uuid inventory { device data until endReason } allocations { claim } }
             historyGaps(from: $from, to: $to) { cluster } }""",
        loaded, **{"from": at(0), "to": at(END)},
    )  # fmt: skip
    assert result.errors is None
    assert result.data["claimHistory"] == [{
        "uid": "uid-c", "allocations": [],
        "waits": [{"since": at(20), "until": at(50), "endReason": "deleted",
                   "classes": ["h200"]}],
    }]  # fmt: skip
    (timeline,) = result.data["deviceHistory"]
    assert timeline["uuid"] == "GPU-C"
    assert [i["endReason"] for i in timeline["inventory"]] == ["changed", "disappeared"]
    assert timeline["allocations"] == [{"claim": "E"}]
    assert result.data["historyGaps"] == []


@pytest.mark.parametrize(
    ("query", "code"),
    [
        ('{ contention(from: "2026-03-02T03:00:00Z", to: "2026-03-02T00:00:00Z") { group } }',
         "BAD_INPUT"),
        ('{ contention(from: "2026-03-02T00:00:00Z", to: "2026-03-02T03:00:00Z", bucket: "fortnight")'
         " { group } }", "BAD_INPUT"),
        ('{ whoHeld(device: "GPU-A", at: "yesterday-ish T") { claim } }', "BAD_INPUT"),
        ('{ contention(from: "2026-03-02T00:00:00Z", to: "2026-03-02T03:00:00Z", bucket: "1s")'
         " { group } }", "BAD_INPUT"),  # 10,800 buckets
    ],
)  # fmt: skip
async def test_bad_input_is_a_clear_graphql_error(loaded, query, code):
    result = await _run(query, loaded)
    assert [e.extensions["code"] for e in result.errors] == [code]


async def test_no_history_configured_is_a_clear_graphql_error():
    result = await _run('{ whoHeld(device: "GPU-A", at: "2026-03-02T00:00:00Z") { claim } }', None)
    assert [e.extensions["code"] for e in result.errors] == ["HISTORY_DISABLED"]


def _export_app(history, scope=None) -> Starlette:
    app = Starlette(routes=[Route("/export/contention.csv", contention_csv),
                            Route("/export/idle-holders.csv", idle_holders_csv)])  # fmt: skip
    app.state.mirror = SimpleNamespace(history=history, scope_for=lambda _r: scope or Scope())
    return app


async def test_contention_csv(loaded):
    transport = httpx.ASGITransport(app=_export_app(loaded))
    async with httpx.AsyncClient(transport=transport, base_url="http://history") as client:
        response = await client.get("/export/contention.csv", params={
            "from": at(0), "to": at(END), "groupBy": "node", "bucket": "1h"})  # fmt: skip
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/csv")
        rows = list(csv.DictReader(io.StringIO(response.text)))
        expected = expected_contention("NODE", 60)
        assert [(r["group"], r["from"], float(r["device_hours_allocated"]), int(r["peak_pending"]))
                for r in rows] == [(e["group"], at(e["bucket"]), e["allocated"], e["peak"])
                                   for e in expected]  # fmt: skip
        bad = await client.get("/export/contention.csv", params={"from": at(0)})
        assert bad.status_code == 400
        bad_group = await client.get("/export/contention.csv", params={
            "from": at(0), "to": at(END), "groupBy": "TEAM"})  # fmt: skip
        assert (bad_group.status_code, "groupBy" in bad_group.text) == (400, True)
        idle = await client.get("/export/idle-holders.csv", params={"from": at(0), "to": at(END)})
        got = [(r["claim"], float(r["device_hours_idle"]), float(r["device_hours_held"]))
               for r in csv.DictReader(io.StringIO(idle.text))]  # fmt: skip
        assert got == expected_idle_holders()


async def test_csv_without_history_is_404():
    transport = httpx.ASGITransport(app=_export_app(None))
    async with httpx.AsyncClient(transport=transport, base_url="http://history") as client:
        response = await client.get("/export/contention.csv", params={"from": at(0), "to": at(1)})
    assert response.status_code == 404


class TeamB(Scope):
    def allows(self, cluster: str, namespace: str = "") -> bool:
        return namespace in ("", "team-b")


IDLE_FIRST = """query($from: DateTime!, $to: DateTime!, $cluster: String) {
  idleHolders(from: $from, to: $to, first: 1, cluster: $cluster) { claim namespace } }"""


@pytest.mark.parametrize(
    "scope",
    [
        AccessScope.parse(["east/team-b"], history=True),
        AccessScope.parse(["*/team-b"], history=True),
        TeamB(),
    ],
    ids=["grants", "any-cluster", "allows-only"],
)
async def test_a_narrow_scope_gets_first_rows_of_what_it_sees(loaded, scope):
    # A (team-a) is idle longest, D (team-b) next: the team-b asker's first row is D, not none.
    window = {"from": at(0), "to": at(END)}
    result = await _run(IDLE_FIRST, loaded, scope, **window)
    assert result.errors is None and result.data["idleHolders"] == [
        {"claim": "D", "namespace": "team-b"}
    ]
    transport = httpx.ASGITransport(app=_export_app(loaded, scope))
    async with httpx.AsyncClient(transport=transport, base_url="http://history") as client:
        csv_text = (await client.get("/export/idle-holders.csv",
                                     params={**window, "first": "1"})).text  # fmt: skip
    assert [r["claim"] for r in csv.DictReader(io.StringIO(csv_text))] == ["D"]


async def test_idle_holders_of_one_cluster_and_of_a_scope_seeing_no_namespace(loaded):
    window = {"from": at(0), "to": at(END)}
    west = await _run(IDLE_FIRST, loaded, None, cluster="west", **window)
    assert west.errors is None and west.data["idleHolders"] == []
    east = await _run(IDLE_FIRST, loaded, None, cluster="east", **window)
    assert [h["claim"] for h in east.data["idleHolders"]] == ["A"]
    only_devices = AccessScope.parse([], clusters=["east"], history=True)
    nothing = await _run(IDLE_FIRST, loaded, only_devices, **window)
    assert nothing.errors is None and nothing.data["idleHolders"] == []


async def test_a_scope_without_history_is_forbidden_everywhere(loaded):
    scope = AccessScope.parse(["east/*"], history=False)
    window = {"from": at(0), "to": at(END)}
    for query in (IDLE_FIRST,
                  'query($from: DateTime!, $to: DateTime!) { contention(from: $from, to: $to)'
                  " { group } historyGaps(from: $from, to: $to) { cluster } }",
                  '{ whoHeld(device: "GPU-A", at: "2026-03-02T00:00:00Z") { claim } }',
                  '{ claimHistory(cluster: "east", namespace: "team-a", name: "A") { uid } }'):  # fmt: skip
        result = await _run(query, loaded, scope, **window)
        assert {e.extensions["code"] for e in result.errors} == {"FORBIDDEN"}, query
    transport = httpx.ASGITransport(app=_export_app(loaded, scope))
    async with httpx.AsyncClient(transport=transport, base_url="http://history") as client:
        for path in ("/export/idle-holders.csv", "/export/contention.csv"):
            assert (await client.get(path, params=window)).status_code == 403
