"""A claim's page and a device's page say what Kubernetes 1.35 to 1.37 tells of a held device:
its taints (key, value, effect), that no slice publishes it any more (with the driver, pool,
device, holder and the allocation's node), and the health its consumer pod's kubelet reports
(allocatedResourcesStatus). The demo scenario has none of these, so this module drives them
in the simulator, on a demo mirror of its own (the session's stays as the other tests read it)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.web.conftest import open_screen
from tests.web.harness import Site, eventually, serve_demo

CLUSTER = "east"
HELD = """query Held($cluster: String!) {
  resourceClaims(cluster: $cluster, state: RESERVED, first: 200) { nodes {
    namespace name
    allocation { nodeName devices { request device { driver pool name published slice { name } } } }
    consumers { namespace name claims { name claimName } containers { name } }
  } }
}"""
TAINT = {"key": "example.com/maintenance", "value": "fan", "effect": "NoSchedule"}


@pytest.fixture(scope="module")
async def site(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Site]:
    async with serve_demo(tmp_path_factory.mktemp("web-device-facts")) as served:
        yield served


def _holders(claims: list[dict]) -> list[tuple[dict, dict, dict]]:
    """(claim, its first allocation result, its first consumer pod), for claims that hold a
    published device through a pod."""
    found = []
    for c in claims:
        results = (c["allocation"] or {}).get("devices") or []
        if results and c["consumers"] and results[0]["device"]["published"]:
            found.append((c, results[0], c["consumers"][0]))
    found.sort(key=lambda f: f[1]["device"]["driver"] != "gpu.nvidia.com")  # GPUs first
    return found


async def _drive(site: Site) -> dict[str, Any]:
    """Taint one held device, report it Unhealthy from its pod, and withdraw another held
    device from its slice; return what the pages must show."""
    sim = site.demo.simulator.clusters[CLUSTER]
    claims = (await site.graphql(HELD, cluster=CLUSTER))["resourceClaims"]["nodes"]
    holders = _holders(claims)
    (tainted_claim, tainted, pod), others = holders[0], holders[1:]
    withdrawn_claim, withdrawn, _ = next(
        o
        for o in others
        if o[1]["device"]["name"] != tainted["device"]["name"]
        or o[1]["device"]["pool"] != tainted["device"]["pool"]
    )
    # the slices' devices, changed in place (a merge patch replaces the whole list)
    edits: dict[str, list[dict]] = {}
    for result, change in ((tainted, "taint"), (withdrawn, "withdraw")):
        name = result["device"]["slice"]["name"]
        devices = edits.setdefault(name, sim.get("resourceslices", None, name)["spec"]["devices"])
        for d in list(devices):
            if d["name"] == result["device"]["name"]:
                if change == "taint":
                    d["taints"] = [*d.get("taints", []), TAINT]
                else:
                    devices.remove(d)
    for name, devices in edits.items():
        sim.patch("resourceslices", None, name, {"spec": {"devices": devices}})
    # the kubelet's report for the tainted device (KEP-4680: claim:<pod claim>/<request>)
    local = next(c["name"] for c in pod["claims"] if c["claimName"] == tainted_claim["name"])
    device = tainted["device"]
    report = {
        "name": f"claim:{local}/{tainted['request']}",
        "resources": [
            {
                "resourceID": f"{device['driver']}/{device['pool']}/{device['name']}",
                "health": "Unhealthy",
                "message": "XID 79: fallen off the bus",
            }
        ],
    }
    stored = sim.get("pods", pod["namespace"], pod["name"])
    statuses = stored.get("status", {}).get("containerStatuses") or [
        {"name": c["name"]} for c in pod["containers"]
    ]
    statuses[0] = {**statuses[0], "allocatedResourcesStatus": [report]}
    sim.patch(
        "pods",
        pod["namespace"],
        pod["name"],
        {"status": {"containerStatuses": statuses}},
        subresource="status",
    )

    async def mirrored() -> bool:
        found = (await site.graphql(HELD, cluster=CLUSTER))["resourceClaims"]["nodes"]
        by_name = {(c["namespace"], c["name"]): c for c in found}
        gone = by_name[(withdrawn_claim["namespace"], withdrawn_claim["name"])]
        return not gone["allocation"]["devices"][0]["device"]["published"]

    await eventually(mirrored, "the withdrawn device mirrored as unpublished")
    return {
        "pod": pod,
        "tainted": (tainted_claim, tainted, statuses[0]["name"]),
        "withdrawn": (withdrawn_claim, withdrawn),
    }


async def test_taints_health_and_unpublished_devices_are_shown(page: Any, site: Site) -> None:
    facts = await _drive(site)
    claim, result, container = facts["tainted"]
    device = result["device"]
    spec = f"{device['driver']}/{device['pool']}/{device['name']}"
    taint = f"{TAINT['key']}={TAINT['value']}:{TAINT['effect']}"

    # the claim's page: the taint of its device and the kubelet's report
    await open_screen(
        page,
        site,
        f"/ui/claim?cluster={CLUSTER}&namespace={claim['namespace']}&name={claim['name']}",
    )
    row = page.locator(f"[data-allocated='{spec}']")
    await row.locator(f"[data-taint='{taint}']").wait_for()
    health = row.locator("[data-health=Unhealthy]")
    await health.wait_for()
    text = await health.inner_text()
    assert "Unhealthy" in text and f"container {container}" in text and "XID 79" in text

    # the device's page: the same taint and the same report
    await open_screen(
        page,
        site,
        f"/ui/device?cluster={CLUSTER}&driver={device['driver']}&pool={device['pool']}"
        f"&device={device['name']}&node={claim['allocation']['nodeName']}",
    )
    await page.wait_for_selector(f"[data-device] [data-taint='{taint}']")
    assert "NoSchedule" in await page.inner_text(f"[data-taint='{taint}']")
    assert "Unhealthy" in await page.inner_text("[data-device-health] [data-health=Unhealthy]")
    assert not await page.locator("[data-published=false]").count()

    # the consumer pod's checklist: its device is not Healthy, and which one says so
    pod = facts["pod"]
    await open_screen(
        page,
        site,
        f"/ui/pod?cluster={CLUSTER}&namespace={pod['namespace']}&name={pod['name']}"
        f"&node={claim['allocation']['nodeName']}",
    )
    check = page.locator("[data-check=health]")
    assert await check.get_attribute("data-ok") == "false"
    assert f"{spec} (container {container}): Unhealthy, XID 79" in await check.inner_text()

    # the withdrawn device: said plainly on the holder's page and on the device's own
    claim, result = facts["withdrawn"]
    device = result["device"]
    node = claim["allocation"]["nodeName"]
    holder = f"{claim['namespace']}/{claim['name']}"
    await open_screen(
        page,
        site,
        f"/ui/claim?cluster={CLUSTER}&namespace={claim['namespace']}&name={claim['name']}",
    )
    note = page.locator(
        f"[data-allocated='{device['driver']}/{device['pool']}/{device['name']}'] [data-published=false]"
    )
    await note.wait_for()
    text = await note.inner_text()
    assert "Not published" in text and device["pool"] in text and device["name"] in text
    assert node in text and holder in text
    await open_screen(
        page,
        site,
        f"/ui/device?cluster={CLUSTER}&driver={device['driver']}&pool={device['pool']}"
        f"&device={device['name']}&node={node}",
    )
    note = page.locator("[data-device] [data-published=false]")
    await note.wait_for()
    text = await note.inner_text()
    assert (
        "Not published" in text
        and f"{device['driver']} / {device['pool']} / {device['name']}" in text
    )
    assert node in text and await note.locator(f"[data-unpublished-holder='{holder}']").count() == 1
