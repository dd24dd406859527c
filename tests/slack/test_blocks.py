"""Replies stay inside Slack's Block Kit limits however big the answer, and say what they cut."""

from __future__ import annotations

from datetime import UTC, datetime

from dra_mirror.service.questions.claims import ClaimRow, Claims
from dra_mirror.service.questions.free import DeviceRow, Free
from dra_mirror.service.questions.holdings import HoldingRow, WhoHolds
from dra_mirror.service.slack import blocks, replies


def within_limits(message: dict) -> None:
    assert len(message["blocks"]) <= 50
    for block in message["blocks"]:
        if "text" in block:
            assert len(block["text"]["text"]) <= 3000
        assert len(block.get("fields", [])) <= 10
        assert all(len(f["text"]) <= 2000 for f in block.get("fields", []))


def test_a_device_shared_by_hundreds_of_claims():
    holdings = [
        HoldingRow(
            cluster="east", node="n1", device="eth1", driver="nic", pool="n1", uuid=None,
            model=None, claim=f"team/share-{i}", origin="MANUAL", state="RESERVED",
            pods=[f"team/pod-{i}-{j} (Running)" for j in range(256)], since=None, idle=False,
            idle_since=None, share_id=f"s{i}",
        )
        for i in range(300)
    ]  # fmt: skip
    message = replies.render_who_holds(WhoHolds("n1/eth1", None, holdings=holdings))
    within_limits(message)
    assert message["blocks"][-1]["elements"][0]["text"].startswith("…and 280 more holdings")
    assert message["blocks"][1]["fields"][2]["text"].endswith("…")  # 256 pods cut


def test_long_lists_are_packed_and_counted():
    devices = [DeviceRow("east", f"node-{i}", "gpu-0", "gpu", f"node-{i}", f"GPU-{i:032d}", "H200")
               for i in range(50)]  # fmt: skip
    message = replies.render_free(Free(None, None, 5000, devices))
    within_limits(message)
    assert len([b for b in message["blocks"] if b["type"] == "section"]) > 2  # packed in chunks
    assert message["blocks"][-1]["elements"][0]["text"] == "…and 4950 more"
    claims = [
        ClaimRow("east", f"ns/claim-{i}", "TEMPLATE", ["gpu"], None, 7200.0) for i in range(3)
    ]
    waiting = replies.render_waiting(Claims(None, "gpu", 3, claims))
    assert waiting["text"] == "3 claims waiting of class `gpu`"
    assert waiting["blocks"][1]["text"]["text"].count("waiting 2h 0m") == 3


def test_times_and_markup():
    now = datetime(2026, 1, 2, 0, 0, tzinfo=UTC)
    assert blocks.when("2026-01-01T00:00:00Z", now) == "2026-01-01 00:00 UTC (1d 0h ago)"
    assert blocks.when(None, now) == "unknown"
    assert blocks.duration(59) == "59s" and blocks.duration(3600 * 5 + 120) == "5h 2m"
    assert blocks.escape("<@U1> & <!here>") == "&lt;@U1&gt; &amp; &lt;!here&gt;"


def test_an_ambiguous_name_lists_forty_candidates_and_counts_the_rest():
    holdings = [
        HoldingRow(
            cluster="scale", node=f"node-{i:05d}", device="gpu-0", driver="gpu", pool=f"node-{i:05d}",
            uuid=f"GPU-{i:032d}", model=None, claim=f"team/train-{i}", origin="", state="",
            pods=[], since=None, idle=False, idle_since=None,
        )
        for i in range(5000)
    ]  # fmt: skip
    message = replies.render_who_holds(WhoHolds("gpu-0", None, holdings=holdings))
    within_limits(message)
    lines = [line for b in message["blocks"][1:-1] for line in b["text"]["text"].split("\n")]
    assert len(lines) == 40 and lines[0].startswith("• scale · `node-00000/gpu-0`")
    assert message["blocks"][-1]["elements"][0]["text"] == "…and 4960 more"
    assert message["text"] == "gpu-0 is ambiguous: 5000 held devices"
