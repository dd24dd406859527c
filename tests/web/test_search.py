"""The search box of every screen goes to a device's page from its uuid, `node/device` or
`driver/pool/device`, and to a claim's page from its `namespace/name`; the live indicator says
"live" on screens that listen to nothing (Contention, Claim Templates)."""

from __future__ import annotations

from typing import Any

from tests.web.conftest import open_screen
from tests.web.harness import Site

H200_UUID = "GPU-21f6a090-a7a1-f57a-27f8-e0da547eb43a"  # the real H200 of ../shared/hardware
NAMED = """query($d: String!) { devicesNamed(device: $d) { cluster driver pool name nodeName } }"""


async def search(page: Any, text: str) -> None:
    box = page.locator("form[role=search] input")
    await box.fill(text)
    await box.press("Enter")


async def test_a_gpu_is_found_by_its_uuid_from_the_overview_in_one_step(
    page: Any, site: Site
) -> None:
    [gpu] = (await site.graphql(NAMED, d=H200_UUID))["devicesNamed"]
    await open_screen(page, site, "/ui/")
    await search(page, H200_UUID)
    wanted = f"{gpu['cluster']}/{gpu['driver']}/{gpu['pool']}/{gpu['name']}"
    await page.wait_for_selector(f"section[data-device='{wanted}']")
    assert await page.get_attribute("main", "data-screen") == "device"


async def test_node_device_and_a_claims_namespace_name_go_to_their_pages(
    page: Any, site: Site
) -> None:
    [gpu] = (await site.graphql(NAMED, d=H200_UUID))["devicesNamed"]
    await open_screen(page, site, f"/ui/claims?cluster={gpu['cluster']}")
    await search(page, f"{gpu['nodeName']}/{gpu['name']}")
    wanted = f"{gpu['cluster']}/{gpu['driver']}/{gpu['pool']}/{gpu['name']}"
    await page.wait_for_selector(f"section[data-device='{wanted}']")
    claims = await site.graphql(
        "query($c: String!) { resourceClaims(cluster: $c, first: 1) { nodes { namespace name } } }",
        c=gpu["cluster"],
    )
    [claim] = claims["resourceClaims"]["nodes"]
    await search(page, f"{claim['namespace']}/{claim['name']}")
    await page.wait_for_selector(
        f"section[data-claim='{gpu['cluster']}/{claim['namespace']}/{claim['name']}']"
    )
    await search(page, "no-such-namespace/no-such-claim")
    await page.wait_for_selector("form[role=search] [data-matches='0']")


async def test_the_live_indicator_is_live_on_screens_that_listen_to_nothing(
    page: Any, site: Site
) -> None:
    for path in ("/ui/contention?cluster=east", "/ui/templates"):
        await open_screen(page, site, path)
        await page.wait_for_selector("[data-live=live]")
