"""The busy line over the holders' timeline, in a real Chromium over the demo (whose Prometheus
makes it a server with a utilisation source): the device page and a claim's page draw the
points `deviceUtilizationHistory` answers — buckets written into the demo's history, unknown
ones as gaps (null), never 0 %."""

from __future__ import annotations

import calendar
import json
import time
from typing import Any

import pytest
from sqlalchemy import insert

from dra_mirror.service.history.db import open_engine
from dra_mirror.service.history.models import UtilizationBucket
from dra_mirror.service.runtime.demo_prometheus import prometheus_binary
from tests.web.conftest import open_screen
from tests.web.harness import Site, eventually

pytestmark = pytest.mark.skipif(prometheus_binary() is None, reason="prometheus is not installed")

US, B = 1_000_000, 300
CLAIMS = """{ resourceClaims(cluster: "east", namespace: "training", first: 10) { nodes {
  name state createdAt allocation { devices { device { driver pool name } } } } } }"""
FIELD = """query($driver: String!, $pool: String!, $device: String!, $from: DateTime!,
  $to: DateTime!) { deviceUtilizationHistory(cluster: "east", driver: $driver, pool: $pool,
  device: $device, from: $from, to: $to) { start busy } }"""


def iso(seconds: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


async def held_device(site: Site) -> tuple[str, dict]:
    """A Running trainer's claim and its first device, once the history holds it, with buckets
    written since before it began: 40 % and 60 % alternately, every third one left unread
    (unknown) but the last two."""
    nodes = (await site.graphql(CLAIMS))["resourceClaims"]["nodes"]
    claim = next(c for c in nodes if c["state"] == "RESERVED")
    device = claim["allocation"]["devices"][0]["device"]
    now = int(time.time())
    first = (now - 3 * 3600) // B * B
    rows = [{"cluster": "east", "driver": device["driver"], "pool": device["pool"],
             "device": device["name"], "bucket_us": at * US, "uuid": None, "gpu_instance": None,
             "busy": 40.0 if n % 2 else 60.0, "samples": 60, "energy_j": None,
             "equivalents": 1.0}
            for n, at in enumerate(range(first, now // B * B + B, B))
            if n % 3 or at >= now // B * B - B]  # fmt: skip
    engine = open_engine(str(site.demo.kubeconfig.parent / "history.db"))
    try:  # a bucket the demo's recorder wrote first stays its own
        async with engine.begin() as conn:
            await conn.execute(insert(UtilizationBucket).prefix_with("OR IGNORE"), rows)
    finally:
        await engine.dispose()
    name = claim["name"]

    async def held() -> bool:  # the history writer has recorded the hold
        query = '{ deviceHistory(device: "%s/%s/%s", from: "%s", to: "%s", cluster: "east") ' \
                "{ allocations { claim } } }"  # fmt: skip
        spec = (device["driver"], device["pool"], device["name"])
        found = await site.graphql(query % (*spec, iso(now - 86400), iso(now + 3600)))
        return any(a["claim"] == name for t in found["deviceHistory"] for a in t["allocations"])

    await eventually(held, "the history holding the trainer's device", seconds=30)
    return name, device


async def line_of(page: Any, selector: str, device: str) -> list[dict]:
    canvas = await page.wait_for_selector(f"{selector} canvas[data-utilization]")
    await page.wait_for_selector(f"{selector} canvas[data-drawn=true]")
    lines = json.loads(await canvas.get_attribute("data-utilization"))
    return next(line["points"] for line in lines if line["label"] == device)


def seconds(text: str) -> int:
    return calendar.timegm(time.strptime(text, "%Y-%m-%dT%H:%M:%SZ"))


async def same_as_the_field(site: Site, device: dict, points: list[dict]) -> None:
    start, end = seconds(points[0]["start"]), seconds(points[-1]["start"])
    answer = await site.graphql(FIELD, driver=device["driver"], pool=device["pool"],
                                device=device["name"], **{"from": iso(int(start)),
                                                          "to": iso(int(end) + B)})  # fmt: skip
    assert points == answer["deviceUtilizationHistory"]
    assert {40.0, 60.0} & {p["busy"] for p in points}  # what was written is drawn


async def test_the_device_page_draws_the_busy_line(page: Any, site: Site) -> None:
    _, device = await held_device(site)
    await open_screen(page, site, f"/ui/device?cluster=east&driver={device['driver']}"
                      f"&pool={device['pool']}&device={device['name']}&window=1d")  # fmt: skip
    points = await line_of(page, "[data-history=loaded]", device["name"])
    assert len(points) == 24 * 12 + 1 or len(points) == 24 * 12  # a day of five-minute buckets
    await same_as_the_field(site, device, points)
    assert None in {p["busy"] for p in points}  # the unread buckets are gaps


async def test_a_claims_page_draws_its_devices_lines_over_its_life(page: Any, site: Site) -> None:
    name, device = await held_device(site)
    await open_screen(page, site, f"/ui/claim?cluster=east&namespace=training&name={name}")
    points = await line_of(page, "[data-incarnation]", device["name"])
    await same_as_the_field(site, device, points)
