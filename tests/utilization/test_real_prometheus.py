"""Against a real Prometheus (Debian's, on loopback) scraping the simulator's dcgm-exporters
every second: held, not busy through `PrometheusSource`, and every figure recounted from the
raw samples Prometheus stored."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from dra_mirror.service.questions.asker import Asker
from dra_mirror.service.questions.utilization import device_utilization, held_not_busy
from dra_mirror.service.utilization.config import parse
from dra_mirror.service.utilization.source import PrometheusSource
from tests.infra.prometheus import PrometheusServer, binary

pytestmark = pytest.mark.skipif(binary() is None, reason="prometheus is not installed")

MJ_PER_KWH = 3.6e9


async def instant(url: str, query: str) -> list[dict]:
    async with httpx.AsyncClient(base_url=url, timeout=10) as http:
        answer = await http.get("/api/v1/query", params={"query": query})
    return list(answer.json()["data"]["result"])


@pytest.fixture(scope="module")
async def prometheus(demo, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[str]:
    targets = [demo.sim.url(c) + "/sim/dcgm/targets" for c in ("east", "west")]
    directory: Path = tmp_path_factory.mktemp("prometheus")
    server = PrometheusServer(directory, targets=targets, interval=1.0)
    await asyncio.to_thread(server.start)
    try:
        for _ in range(300):  # until every east exporter gave 6 scrapes (bounded)
            found = await instant(
                server.url, 'count_over_time(DCGM_FI_DEV_POWER_USAGE{cluster="east"}[1m])'
            )
            if len(found) >= 12 and min(int(r["value"][1]) for r in found) >= 6:
                break
            await asyncio.sleep(0.2)
        else:
            raise AssertionError("prometheus never scraped the simulated exporters")
        yield server.url
    finally:
        await asyncio.to_thread(server.stop)


@pytest.fixture
async def source(prometheus) -> AsyncIterator[PrometheusSource]:
    config = parse(
        {
            "busyBelow": 5,
            "notBusyAfterMinutes": 0.05,  # 3 s: the test's exporters are seconds old
            "stepSeconds": 1,
            "clusters": {
                "east": {"url": prometheus, "selector": 'cluster="east"'},
                "west": {"url": prometheus, "selector": 'cluster="west"'},
            },
        }
    )
    async with PrometheusSource(config) as source:
        yield source


async def test_held_not_busy_from_prometheus(demo, source) -> None:
    answer = await held_not_busy(Asker.over(demo.store, utilization=source))
    names = sorted(r.claim.split("/")[1].split("-")[0] for r in answer.claims)
    assert names == ["mig", "notebook"]
    assert all(r.busy == 0.0 and r.cluster == "east" for r in answer.claims)
    assert answer.unknown == 3  # west's MIG claims, on the node without an exporter


async def test_figures_equal_a_recount_of_the_stored_samples(demo, source, prometheus) -> None:
    uses = await device_utilization(Asker.over(demo.store, utilization=source), "east", window=60)
    trainer = next(u for u in uses if u.busy is not None and u.busy > 90)
    raw = await instant(
        prometheus,
        f'DCGM_FI_PROF_GR_ENGINE_ACTIVE{{cluster="east",UUID="{trainer.uuid}"}}[60s]',
    )
    values = [float(v) for series in raw for _, v in series["values"]]
    assert values and trainer.busy == pytest.approx(100 * sum(values) / len(values))
    energy = await instant(
        prometheus,
        f'DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{{cluster="east",UUID="{trainer.uuid}"}}[60s]',
    )
    points = sorted((float(t), float(v)) for s in energy for t, v in s["values"])
    # the range query's points are the latest sample at each second: the same counter
    # readings, the last second's at most apart
    recount = (points[-1][1] - points[0][1]) / MJ_PER_KWH
    per_scrape = max(b[1] - a[1] for a, b in itertools.pairwise(points)) / MJ_PER_KWH
    assert trainer.energy_kwh == pytest.approx(recount, abs=per_scrape)
    # a MIG device's busy is its GPU instance's, whose parent reads 0 % on the exporter
    migs = [u for u in uses if u.source == "gpu-instance" and u.busy]
    assert migs and {round(u.busy or 0) for u in migs} == {85}


async def test_the_demos_prometheus_scrapes_the_simulator(demo, tmp_path: Path) -> None:
    from types import SimpleNamespace

    from dra_mirror.service.runtime.demo_prometheus import DemoPrometheus

    async with DemoPrometheus(SimpleNamespace(simulator=demo.sim), tmp_path) as prometheus:
        assert prometheus.url is not None and prometheus.covers("east")
        assert (prometheus.busy_below, prometheus.not_busy_after) == (5.0, 60.0)
        for _ in range(100):  # its first scrape comes within one interval (bounded)
            found = await instant(prometheus.url, 'count(DCGM_FI_DEV_GPU_UTIL{cluster="east"})')
            if found:
                break
            await asyncio.sleep(0.2)
        assert found, "the demo's prometheus never scraped"
        uses = await device_utilization(
            Asker.over(demo.store, utilization=prometheus), "east", window=60
        )
        assert any(u.busy is not None for u in uses)
    assert prometheus._process is None  # stopped with the demo


async def test_without_prometheus_the_demo_has_no_utilization(demo, tmp_path: Path) -> None:
    from types import SimpleNamespace

    from dra_mirror.service.runtime.demo_prometheus import DemoPrometheus

    async with DemoPrometheus(SimpleNamespace(simulator=demo.sim), tmp_path, binary="") as off:
        assert not off.covers("east")


async def test_five_minute_buckets_equal_a_recount_of_the_stored_samples(
    demo, source, prometheus
) -> None:
    import time

    from dra_mirror.service.model.utilization import GPU_DOMAIN, weighed
    from dra_mirror.service.model.utilization_buckets import BUCKET_SECONDS, buckets

    entries = await demo.store.list_devices(cluster="east", driver=GPU_DOMAIN, published=None)
    now = int(time.time())
    end = now - now % BUCKET_SECONDS + BUCKET_SECONDS  # the current bucket's end
    for _ in range(10):  # until no scrape lands between the recount's two reads (bounded)
        raw = await instant_at(prometheus, 'DCGM_FI_PROF_GR_ENGINE_ACTIVE{cluster="east"}[300s]',
                               end)  # fmt: skip
        found = await source.buckets("east", end - 2 * BUCKET_SECONDS, end)
        if raw == await instant_at(
            prometheus, 'DCGM_FI_PROF_GR_ENGINE_ACTIVE{cluster="east"}[300s]', end
        ):
            break
    rows = [b for b in buckets(weighed(entries, found), found) if b.start == end - BUCKET_SECONDS]
    by_uuid: dict[tuple[str, str | None], list[float]] = {}
    for series in raw:
        labels = series["metric"]
        key = (labels["UUID"], labels.get("GPU_I_ID") or None)
        # one sample per scrape: the copies per pod carry the same value
        by_uuid[key] = [float(v) for _, v in series["values"]]
    trainer = next(b for b in rows if b.busy > 90)
    values = by_uuid[(trainer.uuid or "", None)]
    assert trainer.busy == pytest.approx(100 * sum(values) / len(values))
    assert trainer.samples == len(values) and trainer.gpu_instance is None
    assert trainer.energy_j is not None and trainer.energy_j > 0
    # a MIG device: its GPU instance's samples (the series naming its MIG uuid: a pod's copy)
    by_mig = {
        s["metric"]["dra_mig_device_uuid"]: [float(v) for _, v in s["values"]]
        for s in raw
        if s["metric"].get("dra_mig_device_uuid")
    }
    migs = [b for b in rows if b.gpu_instance is not None]
    assert migs and {round(b.busy) for b in migs if b.busy} == {85}
    checked = [b for b in migs if b.uuid in by_mig]
    assert checked
    for mig in checked:
        values = by_mig[mig.uuid or ""]
        assert mig.busy == pytest.approx(100 * sum(values) / len(values))
        assert mig.samples == len(values)


async def instant_at(url: str, query: str, at: float) -> list[dict]:
    async with httpx.AsyncClient(base_url=url, timeout=10) as http:
        answer = await http.get("/api/v1/query", params={"query": query, "time": f"{at:.3f}"})
    return sorted(answer.json()["data"]["result"], key=lambda s: sorted(s["metric"].items()))
