"""The audits against the hand-written script's truth, on SQLite and PostgreSQL."""

from __future__ import annotations

import pytest

from dra_mirror.service.history.times import to_us
from tests.history.script import END, at
from tests.history.truth import expected_contention, expected_idle_holders

FROM, TO = to_us(at(0)), to_us(at(END))


def _as_dicts(rows) -> list[dict]:
    return [
        {
            "cluster": r.cluster,
            "group": r.group,
            "bucket": (r.bucket_start_us - FROM) // 60_000_000,
            "available": r.device_hours_available,
            "allocated": r.device_hours_allocated,
            "idle": r.device_hours_idle,
            "utilization": r.utilization,
            "waited": r.claims_waited,
            "p50": r.wait_p50,
            "p95": r.wait_p95,
            "max": r.wait_max,
            "peak": r.peak_pending,
            "abandoned": r.claims_abandoned,
        }
        for r in rows
    ]


@pytest.mark.parametrize("group_by", ["CLASS", "NAMESPACE", "NODE", "CLUSTER"])
@pytest.mark.parametrize("bucket_minutes", [60, END])
async def test_contention_matches_the_truth_exactly(loaded, group_by, bucket_minutes):
    bucket = None if bucket_minutes == END else bucket_minutes * 60_000_000
    rows = await loaded.contention(FROM, TO, group_by=group_by, bucket_us=bucket)
    assert _as_dicts(rows) == expected_contention(group_by, bucket_minutes)


async def test_contention_spot_figures(loaded):
    # written by hand from the script's table, as a check on the naive truth itself
    rows = await loaded.contention(FROM, TO, group_by="NAMESPACE")
    team_a, team_b = rows
    assert (team_a.group, team_a.device_hours_allocated) == ("team-a", (80 + 100) / 60)
    assert team_a.device_hours_idle == 32 / 60  # A idle [10,12) and [60,90)
    # A and E were served; C was deleted while it waited: abandoned, not in the percentiles
    assert (team_a.claims_waited, team_a.wait_max, team_a.peak_pending) == (2, 600.0, 2)
    assert team_a.claims_abandoned == 1
    assert team_a.device_hours_available is None and team_a.utilization is None
    assert (team_b.device_hours_allocated, team_b.device_hours_idle) == (170 / 60, 20 / 60)
    cluster = (await loaded.contention(FROM, TO, group_by="CLUSTER"))[0]
    assert cluster.device_hours_available == (180 + 70 + 110 + 150) / 60
    assert cluster.peak_pending == 2  # A+B over [5,10), B+C over [20,30), C+E over [35,40)


async def test_contention_of_another_cluster_is_empty(loaded):
    assert await loaded.contention(FROM, TO, group_by="CLASS", cluster="west") == []


async def test_idle_holders_ranked_by_idle_device_hours(loaded):
    holders = await loaded.idle_holders(FROM, TO)
    got = [(h.claim, h.device_hours_idle, h.device_hours_held) for h in holders]
    assert got == expected_idle_holders()
    assert [h.claim for h in holders] == ["A", "D"]


@pytest.mark.parametrize(
    ("device", "minute", "expected"),
    [
        ("GPU-A", 50, [("A", ["pa"])]),
        ("GPU-A", 60, [("A", [])]),  # pa left at 60: intervals are [start, end)
        ("n1/gpu-0", 90, []),  # A released at 90, D allocated at 100
        ("n1/gpu-0", 100, [("D", ["pd"])]),
        ("n1/gpu-5", 40, [("B", ["pb"])]),  # named gpu-5 only from 70: followed by uuid
        ("gpu.nvidia.com/n1/gpu-1", 40, [("B", ["pb"])]),
        ("gpu-0", 50, [("A", ["pa"]), ("E", ["pe"])]),  # a bare name matches every node
        ("GPU-C", 170, []),
        ("GPU-nope", 50, []),
    ],
)
async def test_who_held(loaded, device, minute, expected):
    held = await loaded.who_held(device, to_us(at(minute)))
    assert [(h.claim, [p.name for p in h.pods]) for h in held] == expected


async def test_who_held_returns_the_allocation_details(loaded):
    (held,) = await loaded.who_held("GPU-B", to_us(at(100)))
    assert (held.cluster, held.namespace, held.claim, held.claim_uid) == (
        "east", "team-b", "B", "uid-b")  # fmt: skip
    assert (held.driver, held.pool, held.device, held.node, held.request) == (
        "gpu.nvidia.com", "n1", "gpu-1", "n1", "gpu")  # fmt: skip
    assert (held.start_us, held.end_us, held.end_reason) == (
        to_us(at(30)), to_us(at(120)), "released")  # fmt: skip


async def test_device_history_follows_the_uuid_across_the_rename(loaded):
    (timeline,) = await loaded.device_history("n1/gpu-5", FROM, TO)
    assert timeline.uuid == "GPU-B"
    assert [(d.device, d.start_us, d.end_us) for d in timeline.inventory] == [
        ("gpu-1", FROM, to_us(at(70))),
        ("gpu-5", to_us(at(70)), None),
    ]
    assert [(a.claim, a.device, [p.name for p in a.pods]) for a in timeline.allocations] == [
        ("B", "gpu-1", ["pb"])
    ]


async def test_device_history_records_attribute_changes(loaded):
    (timeline,) = await loaded.device_history("GPU-C", FROM, TO)
    assert [(i.data, i.end_reason) for i in timeline.inventory] == [
        ({"model": "H200"}, "changed"),
        ({"driver": "580", "model": "H200"}, "disappeared"),
    ]
    window = await loaded.device_history("GPU-A", to_us(at(95)), to_us(at(99)))
    assert [a.claim for a in window[0].allocations] == []


async def test_claim_history(loaded):
    (a,) = await loaded.claim_history("east", "team-a", "A")
    assert a.uid == "uid-a"
    assert [(v.resource_version, v.deleted) for v in a.versions] == [
        ("1001", False), ("1002", False), ("1003", False), ("1004", False), ("1004", True)]  # fmt: skip
    assert [(w.start_us, w.end_us, w.end_reason) for w in a.waits] == [
        (FROM, to_us(at(10)), "allocated")]  # fmt: skip
    assert [(x.device, x.end_reason) for x in a.allocations] == [("gpu-0", "released")]
    assert [p.name for p in a.consumers] == ["pa"]
    assert [(i.start_us, i.end_us) for i in a.idle] == [
        (to_us(at(10)), to_us(at(12))), (to_us(at(60)), to_us(at(90)))]  # fmt: skip
    (c,) = await loaded.claim_history("east", "team-a", "C")
    assert [(w.end_us, w.end_reason) for w in c.waits] == [(to_us(at(50)), "deleted")]
    assert await loaded.claim_history("east", "team-a", "missing") == []
