"""Audits over absurd windows, on SQLite and PostgreSQL: requests that cannot be answered are
refused up front with a clear client error (GraphQL code, 400 on the CSV export); the others
cost what the recorded history costs, not what the window spans (~130 years by week, years
0001-9999 in one bucket), and give the same figures as the window around the data."""

from __future__ import annotations

import httpx
from sqlalchemy import func, select

from dra_mirror.service.history.models import PendingPeakHour
from dra_mirror.service.history.queries import HistoryQueries
from dra_mirror.service.history.times import to_us
from tests.history.script import END
from tests.history.test_audit import FROM, TO
from tests.history.test_graphql import _export_app, _run
from tests.history.test_writer import _load
from tests.history.truth import expected_contention

WEEK = 7 * 24 * 3_600_000_000
FIGURES = ("available", "allocated", "idle", "utilization", "waited", "p50", "p95", "max", "peak")


def _figures(rows) -> list[tuple]:
    return [
        (r.group, r.device_hours_available, r.device_hours_allocated, r.device_hours_idle,
         r.utilization, r.claims_waited, r.wait_p50, r.wait_p95, r.wait_max, r.peak_pending)
        for r in rows
    ]  # fmt: skip


def _expected(group_by: str) -> list[tuple]:
    return [
        (e["group"], *(e[name] for name in FIGURES)) for e in expected_contention(group_by, END)
    ]


async def _cached_hours(engine) -> int:
    async with engine.connect() as conn:
        return await conn.scalar(select(func.count()).select_from(PendingPeakHour))


async def test_130_years_by_week_cost_the_history_not_the_window(engine, pipeline):
    await _load(pipeline)
    queries = HistoryQueries(engine, now_us=lambda: TO)  # the script's end is "now"
    start, end = to_us("1970-01-01T00:00:00Z"), to_us("2100-01-01T00:00:00Z")  # 6,784 weeks
    for group_by in ("CLASS", "NAMESPACE", "NODE", "CLUSTER"):
        rows = await queries.contention(start, end, group_by=group_by, bucket_us=WEEK)
        # the script's three hours fall in one week (Thursday to Thursday, from 1970-01-01)
        assert {(r.bucket_start_us - start) % WEEK for r in rows} == {0}
        assert {r.bucket_end_us - r.bucket_start_us for r in rows} == {WEEK}
        assert all(r.bucket_start_us <= FROM and TO <= r.bucket_end_us for r in rows)
        assert _figures(rows) == _expected(group_by)
    # the hourly peak cache holds the hours of the history, not 1.1 million hours
    assert 0 < await _cached_hours(engine) <= 4 * 3


async def test_years_0001_to_9999_in_one_bucket(engine, pipeline):
    await _load(pipeline)
    queries = HistoryQueries(engine, now_us=lambda: TO)
    start, end = to_us("0001-01-01T00:00:00Z"), to_us("9999-12-31T00:00:00Z")
    for group_by in ("CLASS", "NAMESPACE"):
        rows = await queries.contention(start, end, group_by=group_by)
        assert {(r.bucket_start_us, r.bucket_end_us) for r in rows} == {(start, end)}
        assert _figures(rows) == _expected(group_by)
    assert 0 < await _cached_hours(engine) <= 2 * 3
    # and through the graph, with RFC 3339 years of four digits
    result = await _run(
        '{ contention(from: "0001-01-01T00:00:00Z", to: "9999-12-31T00:00:00Z") '
        "{ since until deviceHoursAllocated } }",
        queries,
    )
    assert result.errors is None
    assert [(r["since"], r["until"]) for r in result.data["contention"]] == [
        ("0001-01-01T00:00:00Z", "9999-12-31T00:00:00Z")
    ]


async def test_empty_history_over_any_window_is_empty(queries):
    start, end = to_us("0001-01-01T00:00:00Z"), to_us("9999-12-31T00:00:00Z")
    assert await queries.contention(start, end, group_by="CLASS", bucket_us=1000 * WEEK) == []


BAD_WINDOWS = [
    # (from, to, bucket, what the message says)
    ("0001-01-01T00:00:00Z", "9999-12-31T00:00:00Z", "1h", "buckets: at most 10,000"),
    ("1970-01-01T00:00:00Z", "2100-01-01T00:00:00Z", "1d", "buckets: at most 10,000"),
    ("0001-01-01T00:00:00+01:00", "2026-01-01T00:00:00Z", None, "outside years 0001-9999"),
    ("2026-01-01T00:00:00Z", "9999-12-31T23:59:59-14:00", None, "outside years 0001-9999"),
    ("2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z", "9" * 5000 + "h", "bucket must look like"),
    ("2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z", "0h", "bucket must look like"),
    ("x" * 30_000, "2026-01-02T00:00:00Z", None, "RFC 3339"),
    ("2026-01-02T00:00:00Z", "2026-01-01T00:00:00Z", None, "`to` must be after `from`"),
]


async def test_bad_windows_are_client_errors_in_the_graph(loaded):
    query = """query($from: DateTime!, $to: DateTime!, $bucket: String) {
                 contention(from: $from, to: $to, bucket: $bucket) { group } }"""
    for start, end, bucket, message in BAD_WINDOWS:
        result = await _run(query, loaded, **{"from": start, "to": end, "bucket": bucket})
        (error,) = result.errors
        assert error.extensions["code"] == "BAD_INPUT", (start, end, bucket, error)
        assert message in error.message and len(error.message) < 200


async def test_bad_windows_and_numbers_are_400_on_the_csv_export(loaded):
    transport = httpx.ASGITransport(app=_export_app(loaded))
    async with httpx.AsyncClient(transport=transport, base_url="http://history") as client:
        for start, end, bucket, message in BAD_WINDOWS:
            params = {"from": start, "to": end, **({"bucket": bucket} if bucket else {})}
            response = await client.get("/export/contention.csv", params=params)
            assert response.status_code == 400, (start, end, bucket, response.text)
            assert message in response.text and len(response.text) < 200
        for first in ("9" * 5000, "many", "\u00b2"):
            response = await client.get("/export/idle-holders.csv", params={
                "from": "2026-01-01T00:00:00Z", "to": "2026-01-02T00:00:00Z", "first": first})  # fmt: skip
            assert (response.status_code, response.text) == (400, "`first` must be a number\n")


async def test_a_nul_character_is_a_client_error_not_an_unavailable_store(loaded):
    # PostgreSQL text cannot hold NUL: a value with one can match nothing, and must not be
    # reported as "history store unavailable" (503)
    queries = [
        '{ whoHeld(device: "GPU-\\u0000A", at: "2026-03-02T00:40:00Z") { claim } }',
        '{ claimHistory(cluster: "east", namespace: "team-a", name: "C\\u0000") { uid } }',
        '{ historyGaps(from: "2026-03-02T00:00:00Z", to: "2026-03-03T00:00:00Z",'
        ' cluster: "e\\u0000") { cluster } }',
    ]
    for query in queries:
        result = await _run(query, loaded)
        assert [e.extensions["code"] for e in result.errors] == ["BAD_INPUT"], result.errors
    transport = httpx.ASGITransport(app=_export_app(loaded))
    async with httpx.AsyncClient(transport=transport, base_url="http://history") as client:
        response = await client.get("/export/contention.csv", params={
            "from": "2026-03-02T00:00:00Z", "to": "2026-03-03T00:00:00Z", "cluster": "e\x00"})  # fmt: skip
        assert response.status_code == 400, response.text
