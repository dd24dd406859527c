"""The utilisation screen, in a real Chromium over the demo (whose Prometheus scrapes the
simulator's dcgm-exporters): every GPU of the cluster, and the held-not-busy answer, as the
graph gives them."""

from __future__ import annotations

import re
from typing import Any

import pytest

from dra_mirror.service.runtime.demo_prometheus import prometheus_binary
from tests.web.conftest import open_screen
from tests.web.harness import Site, eventually

pytestmark = pytest.mark.skipif(prometheus_binary() is None, reason="prometheus is not installed")

DEVICES = '{ deviceUtilization(cluster: "east") { pool device busy } }'


async def test_the_screen_lists_every_gpu_and_the_claims_held_not_busy(
    page: Any, site: Site
) -> None:
    async def read() -> bool:  # the demo's Prometheus has scraped every east exporter
        rows = (await site.graphql(DEVICES))["deviceUtilization"]
        whole = [r for r in rows if re.fullmatch(r"gpu-\d+", r["device"])]
        return bool(whole) and all(r["busy"] is not None for r in whole)

    await eventually(read, "the demo's Prometheus reading every GPU of east", seconds=60)
    truth = (await site.graphql(DEVICES))["deviceUtilization"]
    await open_screen(page, site, "/ui/utilization?cluster=east")
    await page.wait_for_selector("table[data-devices]")
    assert await page.locator("tr[data-device]").count() == len(truth)
    # devices without readings (MIG placements nobody created) read "unknown", never 0 %
    unknown = sum(r["busy"] is None for r in truth)
    assert unknown and await page.locator("tr[data-busy=unknown]").count() == unknown
    assert await page.get_attribute("[data-not-busy]", "data-not-busy") is not None


async def test_a_claims_page_says_how_busy_its_devices_were(page: Any, site: Site) -> None:
    claims = await site.graphql(
        '{ resourceClaims(cluster: "east", namespace: "training", first: 10) '
        "{ nodes { name state } } }"
    )
    name = next(c["name"] for c in claims["resourceClaims"]["nodes"] if c["state"] == "RESERVED")
    busy = (
        f'{{ claimUtilization(cluster: "east", namespace: "training", name: "{name}") {{ busy }} }}'
    )

    async def read() -> bool:
        return any(r["busy"] is not None for r in (await site.graphql(busy))["claimUtilization"])

    await eventually(read, "the demo's Prometheus reading the trainer's GPU", seconds=60)
    await open_screen(page, site, f"/ui/claim?cluster=east&namespace=training&name={name}")
    shown = await page.wait_for_selector("[data-busy]")
    assert "busy 92 %" in (await shown.inner_text())
