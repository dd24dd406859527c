"""The utilisation screen, in a real Chromium over the demo (whose Prometheus scrapes the
simulator's dcgm-exporters): every GPU of the cluster, and the held-not-busy answer, as the
graph gives them."""

from __future__ import annotations

from typing import Any

import pytest

from dra_mirror.service.runtime.demo_prometheus import prometheus_binary
from tests.web.conftest import open_screen
from tests.web.harness import Site, eventually

pytestmark = pytest.mark.skipif(prometheus_binary() is None, reason="prometheus is not installed")

DEVICES = '{ deviceUtilization(cluster: "east") { device busy } }'


async def test_the_screen_lists_every_gpu_and_the_claims_held_not_busy(
    page: Any, site: Site
) -> None:
    async def read() -> bool:  # the demo's Prometheus has scraped east's exporters once
        rows = (await site.graphql(DEVICES))["deviceUtilization"]
        return any(r["busy"] is not None for r in rows)

    await eventually(read, "the demo's Prometheus reading east's GPUs", seconds=60)
    truth = (await site.graphql(DEVICES))["deviceUtilization"]
    await open_screen(page, site, "/ui/utilization?cluster=east")
    await page.wait_for_selector("table[data-devices]")
    assert await page.locator("tr[data-device]").count() == len(truth)
    # devices without readings (MIG placements nobody created) read "unknown", never 0 %
    unknown = sum(r["busy"] is None for r in truth)
    assert unknown and await page.locator("tr[data-busy=unknown]").count() == unknown
    assert await page.get_attribute("[data-not-busy]", "data-not-busy") is not None
