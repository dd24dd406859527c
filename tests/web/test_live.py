"""A change made in the simulator reaches an open screen without a reload: the screens listen
to claimEvents / deviceEvents over graphql-transport-ws and re-read what changed."""

from __future__ import annotations

from typing import Any

from tests.web.conftest import open_screen
from tests.web.harness import Site, eventually

ROW = "tr[data-claim='west/batch/h100-pair']"
FREE_H100 = """{ devices(cluster: "west", className: "gpu.nvidia.com", status: FREE, first: 100) {
  nodes { pool name nodeName attributes } } }"""


async def two_free_h100s(site: Site) -> tuple[str, list[str]]:
    devices = (await site.graphql(FREE_H100))["devices"]["nodes"]
    by_node: dict[str, list[str]] = {}
    for d in devices:
        if d["attributes"].get("gpu.nvidia.com/productName") == "NVIDIA H100 80GB HBM3":
            by_node.setdefault(d["nodeName"], []).append(d["name"])
    node, names = next((n, names) for n, names in sorted(by_node.items()) if len(names) >= 2)
    return node, names[:2]


async def test_a_claim_allocated_in_the_simulator_appears_without_reload(
    page: Any, site: Site
) -> None:
    west = site.demo.simulator.clusters["west"]
    await open_screen(page, site, "/ui/claims?cluster=west")
    assert await page.get_attribute(ROW, "data-state") == "PENDING"
    await page.wait_for_selector("[data-live=live]")
    await page.evaluate("window.__sameDocument = true")
    node, devices = await two_free_h100s(site)
    # an admin allocates the hand-made claim (no pod uses it, no finalizer: it stays allocated)
    allocation = {
        "devices": {
            "results": [
                {"request": "gpus", "driver": "gpu.nvidia.com", "pool": node, "device": d}
                for d in devices
            ]
        },
        "nodeSelector": {
            "nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
            ]
        },
    }
    west.patch(
        "resourceclaims",
        "batch",
        "h100-pair",
        {"status": {"allocation": allocation}},
        subresource="status",
    )

    async def allocated() -> bool:
        return await page.get_attribute(ROW, "data-state") == "ALLOCATED"

    await eventually(allocated, "west/batch/h100-pair Allocated on the claims screen", seconds=20)
    shown = await page.inner_text(ROW)
    assert all(d in shown for d in devices) and node in shown
    assert await page.evaluate("window.__sameDocument") is True  # no reload happened

    # back to Pending: the overview's pending count follows, again without a reload
    await page.click("nav.menu >> text=Overview")
    await page.wait_for_selector("section.cluster-card[data-cluster=west][data-complete=true]")
    before = int(await page.inner_text("[data-cluster=west] [data-count=claims-pending]"))
    west.patch(
        "resourceclaims",
        "batch",
        "h100-pair",
        {"status": {"allocation": None}},
        subresource="status",
    )
    truth = await site.graphql('{ cluster(name: "west") { counts { pendingClaims } } }')

    async def counted() -> bool:
        text = await page.inner_text("[data-cluster=west] [data-count=claims-pending]")
        return int(text) == before + 1

    await eventually(counted, "the overview's pending count of west going up", seconds=20)
    assert truth["cluster"]["counts"]["pendingClaims"] in {before, before + 1}
    assert await page.evaluate("window.__sameDocument") is True
