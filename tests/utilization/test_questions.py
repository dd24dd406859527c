"""Held, not busy — and each device's utilisation — over the mirrored demo, every figure
recounted from the simulated exporters' own samples."""

from __future__ import annotations

from datetime import datetime

import pytest

from dra_mirror.service.model.dcgm import ReadingsUnavailable
from dra_mirror.service.questions.asker import Asker
from dra_mirror.service.questions.asking import QuestionUnavailable
from dra_mirror.service.questions.utilization import (
    UtilizationOff,
    claim_utilization,
    device_utilization,
    held_not_busy,
)

MJ_PER_KWH = 3.6e9


async def test_held_not_busy_names_the_idle_notebook_and_whom(demo) -> None:
    answer = await held_not_busy(demo.asker())
    claims = {
        r.claim.split("/")[0] + "/" + r.claim.split("/")[1].split("-")[0] for r in answer.claims
    }
    # the notebook's A100 at 0 %, and the pod asking nvidia.com/mig-1g.18gb with no work at all
    assert claims == {"research/notebook", "research/mig"}
    notebook = next(r for r in answer.claims if "notebook" in r.claim)
    assert notebook.cluster == "east" and notebook.busy == 0.0
    assert [c.split("-")[0] for c in notebook.consumers] == ["notebook"]
    assert notebook.not_busy_seconds >= answer.not_busy_after
    # the energy its A100 spent since it stopped being busy, recounted from the samples
    end = demo.now.timestamp()
    since = datetime.fromisoformat(notebook.since.replace("Z", "+00:00")).timestamp()
    samples = demo.source.scraped("east", end - answer.window, end)
    claim = notebook.claim.split("/")[1]
    counter = sorted(
        {
            (at, value)
            for labels, series in samples["DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"].items()
            if dict(labels).get("dra_claim_name") == claim  # its device's copies: one counter
            for at, value in series
            if at >= since
        }
    )
    spent = (counter[-1][1] - counter[0][1]) / MJ_PER_KWH
    assert notebook.energy_kwh == pytest.approx(spent)
    assert notebook.cost == pytest.approx(spent * 0.25)
    # the busy trainer, the shared inference GPU and the MIG worker are not listed
    assert not [r for r in answer.claims if r.namespace in ("training", "inference")]
    # west's MIG claims sit on the node without an exporter: unknown, never "not busy"
    assert answer.unknown == 3
    assert (answer.busy_below, answer.not_busy_after) == (5.0, 1800.0)


async def test_device_figures_equal_a_recount_of_the_samples(demo) -> None:
    window = 600.0
    uses = await device_utilization(demo.asker(), "east", window=window)
    end = demo.now.timestamp()
    samples = demo.source.scraped("east", end - window, end)
    trainer = next(
        u for u in uses if u.busy is not None and u.busy > 90 and u.source == "gr-engine-active"
    )
    # recount: every GR_ENGINE_ACTIVE sample of the trainer's GPU, pod copies counted once
    points = {
        at: value
        for labels, series in samples["DCGM_FI_PROF_GR_ENGINE_ACTIVE"].items()
        if dict(labels)["UUID"] == trainer.uuid and "GPU_I_ID" not in dict(labels)
        for at, value in series
    }
    assert trainer.busy == pytest.approx(100 * sum(points.values()) / len(points))
    energy = {
        at: value
        for labels, series in samples["DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"].items()
        if dict(labels)["UUID"] == trainer.uuid
        for at, value in series
    }
    ordered = [energy[t] for t in sorted(energy)]
    assert trainer.energy_kwh == pytest.approx((ordered[-1] - ordered[0]) / MJ_PER_KWH)
    # a NIC is no GPU: only the GPU driver's devices are listed
    assert {u.driver for u in uses} == {"gpu.nvidia.com"}


async def test_a_gpu_three_pods_share_is_busy_for_their_claim_with_its_energy(demo) -> None:
    [use] = await claim_utilization(demo.asker(), "east", "inference", "shared-h200") or []
    assert use.busy == pytest.approx(90.0)
    [device] = [
        u
        for u in await device_utilization(demo.asker(), "east")
        if (u.pool, u.device) == (use.pool, use.device)
    ]
    assert use.energy_kwh == pytest.approx(device.energy_kwh or 0)  # one claim holds it


async def test_unknown_is_not_zero(demo) -> None:
    uses = await device_utilization(demo.asker(), "west")
    unknown = [u for u in uses if u.pool == "west-h200-0"]
    assert unknown and all(u.busy is None and u.energy_kwh is None for u in unknown)


async def test_without_a_source_the_question_says_so(demo) -> None:
    with pytest.raises(UtilizationOff, match="DRA_MIRROR_UTILIZATION_CONFIG"):
        await held_not_busy(Asker.over(demo.store, now=lambda: demo.now))


async def test_a_failing_source_is_unavailable_not_a_crash(demo) -> None:
    class Down:
        busy_below, not_busy_after = 5.0, 1800.0

        def covers(self, cluster: str) -> bool:
            return True

        async def readings(self, cluster: str, start: float, end: float):
            raise ReadingsUnavailable("connection refused")

    asker = Asker.over(demo.store, now=lambda: demo.now, utilization=Down())
    with pytest.raises(QuestionUnavailable, match="utilisation of east: connection refused"):
        await device_utilization(asker, "east")


async def test_a_claim_in_a_cluster_nobody_mirrors_is_none(demo) -> None:
    assert await claim_utilization(demo.asker(), "nowhere", "research", "notebook") is None
    assert await claim_utilization(demo.asker(), "east", "research", "no-such-claim") is None
