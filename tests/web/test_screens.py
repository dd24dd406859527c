"""Every screen, in a real Chromium, shows the demo scenario's figures as /graphql answers
them (the truth is the graph's own answer, asked beside the page, not numbers written here)."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

from tests.web.conftest import open_screen
from tests.web.harness import Site, eventually, recent

H200_UUID = "GPU-21f6a090-a7a1-f57a-27f8-e0da547eb43a"  # the real H200 of ../shared/hardware

COUNTS = """query($c: String!) {
  cluster(name: $c) { counts { devices freeDevices claims pendingClaims } }
  held: devices(cluster: $c, status: HELD, first: 0) { totalCount }
  shared: devices(cluster: $c, status: SHARED, first: 0) { totalCount }
  blocked: devices(cluster: $c, status: BLOCKED, first: 0) { totalCount }
  idle: resourceClaims(cluster: $c, idle: true, first: 0) { totalCount }
  lint(cluster: $c) { rule object }
}"""


async def attr(page: Any, selector: str, name: str) -> str | None:
    return await page.get_attribute(selector, name)


async def test_overview_shows_each_cluster_as_the_graph_counts_it(page: Any, site: Site) -> None:
    await open_screen(page, site, "/ui/")
    await page.wait_for_selector("section.cluster-card[data-complete=true] >> nth=1")
    clusters = (await site.graphql("{ clusters { name } }"))["clusters"]
    assert len(clusters) == 2
    for cluster in clusters:
        name = cluster["name"]
        truth = await site.graphql(COUNTS, c=name)
        counts = truth["cluster"]["counts"]
        card = f"section.cluster-card[data-cluster='{name}']"
        expected = {
            "devices": counts["devices"],
            "devices-free": counts["freeDevices"],
            "devices-held": truth["held"]["totalCount"],
            "devices-shared": truth["shared"]["totalCount"],
            "devices-blocked": truth["blocked"]["totalCount"],
            "claims": counts["claims"],
            "claims-pending": counts["pendingClaims"],
            "claims-idle": truth["idle"]["totalCount"],
        }
        shown = {
            key: int((await page.inner_text(f"{card} [data-count='{key}']")).replace(",", ""))
            for key in expected
        }
        assert shown == expected, name
        without_driver = [
            f["object"] for f in truth["lint"] if f["rule"] == "gpu-node-without-driver"
        ]
        notice = page.locator(f"{card} [data-finding=gpu-node-without-driver]")
        if without_driver:
            text = await notice.inner_text()
            assert all(node.removeprefix("Node ") in text for node in without_driver)
        else:
            assert await notice.count() == 0
    # east holds an idle claim while another waits: the cleanup candidate is loud there
    east = "section.cluster-card[data-cluster=east]"
    assert "cleanup candidates while" in await page.inner_text(east)
    # tainted devices (as pool status counts them) and held devices no slice publishes
    figures = await site.graphql(
        """{ resourcePools(cluster: "east") { unavailableDevices }
        devices(cluster: "east", published: false, first: 0) { totalCount } }"""
    )
    tainted = sum(p["unavailableDevices"] or 0 for p in figures["resourcePools"])
    assert await page.inner_text(f"{east} [data-count=devices-tainted]") == str(tainted)
    unpublished = str(figures["devices"]["totalCount"])
    assert await page.inner_text(f"{east} [data-count=devices-unpublished]") == unpublished
    # physical devices, as the capacity question counts them: a GPU with its partitions once
    rows = (await site.graphql('{ capacity(cluster: "east") { type physical } }'))["capacity"]
    gpus = sum(r["physical"] for r in rows if r["type"] == "gpu")
    await page.wait_for_selector(f"{east} [data-count=physical-gpu]")
    assert await page.inner_text(f"{east} [data-count=physical-gpu]") == str(gpus)
    assert "GPU-equivalents held" in await page.inner_text(f"{east} [data-physical=gpu]")


async def test_device_classes_show_matched_devices(page: Any, site: Site) -> None:
    await open_screen(page, site, "/ui/classes?cluster=east")
    classes = (await site.graphql('{ deviceClasses(cluster: "east") { name selectors } }'))[
        "deviceClasses"
    ]
    rows = page.locator("tr[data-class]")
    assert await rows.count() == len(classes)
    query = """query($c: String!) { all: devices(cluster: "east", className: $c, first: 0) { totalCount }
      free: devices(cluster: "east", className: $c, status: FREE, first: 0) { totalCount } }"""
    for device_class in classes:
        row = f"tr[data-class='east/{device_class['name']}']"
        truth = await site.graphql(query, c=device_class["name"])
        matched = page.locator(f"{row} [data-matched]")
        await matched.wait_for()
        want = f"{truth['free']['totalCount']}/{truth['all']['totalCount']}"
        assert await matched.get_attribute("data-matched") == want
        text = await page.inner_text(row)
        for selector in device_class["selectors"]:  # each condition of the CEL is shown
            for part in selector.split("&&"):
                assert part.strip() in text


async def test_resource_slices_group_partitions_under_their_gpu(page: Any, site: Site) -> None:
    node = "east-h200-1"
    await open_screen(page, site, f"/ui/slices?cluster=east&node={node}")
    await page.wait_for_selector("[data-counters=loaded]")
    truth = await site.graphql(
        """{ devices(cluster: "east", node: "east-h200-1", first: 1000) { totalCount
             nodes { driver pool name status consumesCounters } }
           resourceSlices(cluster: "east", node: "east-h200-1") { name driver
             pool { name generation complete } }
           resourcePools(cluster: "east") { driver poolName totalDevices allocatedDevices
             availableDevices unavailableDevices validationError } }"""
    )
    devices = truth["devices"]["nodes"]
    shown = {
        row: await attr(page, f"tr[data-device='{row}']", "data-status")
        for row in [f"east/{d['driver']}/{d['pool']}/{d['name']}" for d in devices]
    }
    assert shown == {f"east/{d['driver']}/{d['pool']}/{d['name']}": d["status"] for d in devices}
    assert await page.locator("tr[data-device]").count() == truth["devices"]["totalCount"]
    # every pool's header names its slices and says complete as the graph does
    for slice_ in truth["resourceSlices"]:
        pool = f"section[data-pool='east/{slice_['driver']}/{slice_['pool']['name']}']"
        header = await page.inner_text(f"{pool} > header")
        assert slice_["name"] in header
        assert ("incomplete" not in header) == slice_["pool"]["complete"]
        assert f"generation {slice_['pool']['generation']}" in header
    # and its availability as the pool status request counts it (KEP-5677)
    checked = 0
    for status in truth["resourcePools"]:
        pool = f"section[data-pool='east/{status['driver']}/{status['poolName']}']"
        if not await page.locator(pool).count():
            continue  # a pool of another node
        figures = page.locator(f"{pool} > header [data-pool-status]")
        await page.wait_for_selector(
            f"{pool} > header [data-pool-status]:not([data-pool-status=loading])"
        )
        counts = [
            status[k]
            for k in ("totalDevices", "allocatedDevices", "availableDevices", "unavailableDevices")
        ]
        shown = await figures.get_attribute("data-pool-status")
        assert shown == (
            "/".join(map(str, counts)) if status["validationError"] is None else "not-counted"
        )
        checked += 1
    assert checked >= 1
    # partitions sit under the GPU whose counter set they consume
    by_set: dict[str, set[str]] = {}
    for d in devices:
        for counters in d["consumesCounters"]:
            by_set.setdefault(counters["counterSet"], set()).add(d["name"])
    for counter_set, names in by_set.items():
        group = page.locator(f"[data-counter-set='{counter_set}'] tr[data-device]")
        grouped = {
            (await group.nth(i).get_attribute("data-device")).rsplit("/", 1)[1]
            for i in range(await group.count())
        }
        assert grouped == names
    # a blocked partition names held siblings of its own GPU as what blocks it
    blocked = page.locator("[data-counter-set] tr[data-status=BLOCKED]").first
    blockers = blocked.locator("td:nth-child(6) a")
    assert await blockers.count() >= 1
    statuses = {d["name"]: d["status"] for d in devices}
    for i in range(await blockers.count()):
        assert statuses[await blockers.nth(i).text_content()] in {"HELD", "SHARED"}
    # MIG applied where a partition is held
    held_partitions = [d for d in devices if "-mig-" in d["name"] and d["status"] == "HELD"]
    if held_partitions:
        assert "MIG applied" in await page.inner_text(".gpu-group.mig-applied")


CLAIMS = """{ resourceClaims(first: 50) { totalCount nodes { cluster namespace name state idle } }
  pending: resourceClaims(state: PENDING, first: 100) { nodes { cluster namespace name } } }"""


async def test_resource_claims_list_states_idle_holders_and_why_pending(
    page: Any, site: Site
) -> None:
    await open_screen(page, site, "/ui/claims")
    truth = await site.graphql(CLAIMS)
    claims = truth["resourceClaims"]["nodes"]
    rows = page.locator("tr[data-claim]")
    assert await rows.count() == len(claims)
    assert [await rows.nth(i).get_attribute("data-claim") for i in range(len(claims))] == [
        f"{c['cluster']}/{c['namespace']}/{c['name']}" for c in claims
    ]
    for c in claims:
        row = f"tr[data-claim='{c['cluster']}/{c['namespace']}/{c['name']}']"
        assert await attr(page, row, "data-state") == c["state"]
        assert ("cleanup candidate" in await page.inner_text(row)) == c["idle"]
    # the idle notebook claim is loud: a gpu.nvidia.com claim waits in east
    assert await page.locator("tr.idle-loud[data-claim='east/research/notebook-gpu']").count() == 1
    # each pending claim says why, as explainClaim does
    for c in truth["pending"]["nodes"]:
        row = f"tr[data-claim='{c['cluster']}/{c['namespace']}/{c['name']}']"
        verdict = page.locator(f"{row} [data-verdict]")
        await verdict.wait_for()
        diagnosis = await site.graphql(
            "query($c: String!, $n: String!, $m: String!) { explainClaim(cluster: $c, namespace: $n, name: $m) { verdict } }",
            c=c["cluster"],
            n=c["namespace"],
            m=c["name"],
        )
        assert await verdict.get_attribute("data-verdict") == diagnosis["explainClaim"]["verdict"]


async def test_a_claims_page_shows_its_consumers_diagnosis_and_life(page: Any, site: Site) -> None:
    await open_screen(page, site, "/ui/claim?cluster=east&namespace=inference&name=shared-h200")
    truth = await site.graphql(
        """{ resourceClaim(cluster: "east", namespace: "inference", name: "shared-h200") {
             state consumers { namespace name phase } allocation { devices { device { name } } } }
           explainClaim(cluster: "east", namespace: "inference", name: "shared-h200") { verdict } }"""
    )
    claim = truth["resourceClaim"]
    consumers = page.locator("[data-consumer]")
    assert await consumers.count() == len(claim["consumers"]) == 3
    assert {await consumers.nth(i).get_attribute("data-consumer") for i in range(3)} == {
        f"{p['namespace']}/{p['name']}" for p in claim["consumers"]
    }
    assert await attr(page, "section[data-claim]", "data-state") == claim["state"]
    await page.wait_for_selector(f"[data-verdict={truth['explainClaim']['verdict']}]")
    await page.wait_for_selector("[data-incarnation] [data-life]")  # history: its life
    assert "allocated gpu.nvidia.com / east-h200-0 / gpu-0" in await page.inner_text(
        "[data-incarnation]"
    )


async def test_templates_list_the_claims_made_from_them(page: Any, site: Site) -> None:
    await open_screen(page, site, "/ui/templates")
    templates = (await site.graphql("{ resourceClaimTemplates { cluster namespace name } }"))[
        "resourceClaimTemplates"
    ]
    assert await page.locator("tr[data-template]").count() == len(templates)
    await page.click("[data-open='east/training/single-h200']")
    generated = page.locator("[data-generated]")
    await generated.wait_for()
    truth = await site.graphql(
        '{ resourceClaimTemplates(cluster: "east", namespace: "training") { name claims { name state } } }'
    )
    claims = next(t for t in truth["resourceClaimTemplates"] if t["name"] == "single-h200")[
        "claims"
    ]
    assert int(await generated.get_attribute("data-generated")) == len(claims) == 3
    for c in claims:
        assert c["name"] in await page.inner_text("tr[data-template='east/training/single-h200']")
    assert "template=east%2Ftraining%2Fsingle-h200" in page.url  # the open template is a deep link


HELD_SINCE = """query($d: String!, $f: DateTime!, $t: DateTime!) {
  deviceHistory(device: $d, from: $f, to: $t) { allocations { namespace claim until } } }"""


async def recorded_holders(site: Site, device: str) -> set[str]:
    """Holdings of a device in history, once the history writer has caught up."""

    async def found() -> set[str]:
        answer = await site.graphql(HELD_SINCE, d=device, **recent())
        return {
            f"{a['namespace']}/{a['claim']}"
            for t in answer["deviceHistory"]
            for a in t["allocations"]
        }

    # the history writer drains behind the state store: on a loaded machine, tens of seconds
    return await eventually(found, f"history recording a holder of {device}", seconds=90)


async def test_a_devices_page_shows_holders_now_and_their_timeline(page: Any, site: Site) -> None:
    recorded = await recorded_holders(site, H200_UUID)
    await open_screen(
        page,
        site,
        "/ui/device?cluster=east&driver=gpu.nvidia.com&pool=east-h200-0&device=gpu-0&node=east-h200-0",
    )
    truth = await site.graphql(
        "query($d: String!) { whoHolds(device: $d) { claim { namespace name } device { uuid status } } }",
        d=H200_UUID,
    )
    holders = truth["whoHolds"]
    assert holders and holders[0]["device"]["uuid"] == H200_UUID
    assert await attr(page, "section[data-device]", "data-status") == holders[0]["device"]["status"]
    rows = page.locator("tr[data-holder]")
    assert {await rows.nth(i).get_attribute("data-holder") for i in range(await rows.count())} == {
        f"{h['claim']['namespace']}/{h['claim']['name']}" for h in holders
    }
    await page.wait_for_selector("[data-history=loaded]")
    holdings = page.locator("tr[data-holding]")
    shown = {
        await holdings.nth(i).get_attribute("data-holding") for i in range(await holdings.count())
    }
    assert shown == recorded
    assert "inference/shared-h200" in shown
    await page.wait_for_selector("[data-history=loaded] canvas[data-drawn=true]")


async def test_contention_charts_the_history_audit(page: Any, site: Site) -> None:
    lately = """query($f: DateTime!, $t: DateTime!) { contention(from: $f, to: $t, cluster: "east") {
      peakPending } }"""

    async def waited() -> bool:  # the history writer has recorded the demo's first wait
        # (a wait still open is in peakPending; claimsWaited counts served waits only) before
        # the start of this minute, where the screen's window ends (auditWindow in contention.js)
        minute = int(time.time()) // 60 * 60
        window = {"f": recent()["f"], "t": datetime.fromtimestamp(minute, UTC).isoformat()}
        return any(r["peakPending"] for r in (await site.graphql(lately, **window))["contention"])

    await eventually(waited, "history recording a wait in east before this minute", seconds=120)
    await open_screen(page, site, "/ui/contention?cluster=east")
    span = await page.inner_text("main p.muted.small")
    start, end = span.removeprefix("From ").split(" in ")[0].split(" to ")
    iso = {t: t.replace(" ", "T") for t in (start, end)}
    truth = await site.graphql(
        """query($f: DateTime!, $t: DateTime!) { contention(from: $f, to: $t, groupBy: CLASS, cluster: "east") {
             cluster group claimsWaited } }""",
        f=iso[start],
        t=iso[end],
    )
    rows = truth["contention"]
    assert rows, "the demo has waited at least once in east"
    shown = await page.inner_text("table.list thead")
    assert "GPU utilization" in shown and "GPU-equivalent-hours" in shown  # states its unit
    assert await page.locator("tr[data-group]").count() == len(rows)
    for row in rows:
        cell = page.locator(
            f"tr[data-group='{row['cluster']}/{row['group']}'] [data-field=claimsWaited]"
        )
        assert int(await cell.inner_text()) == row["claimsWaited"]
    drawn = page.locator("canvas[data-drawn=true]")
    await drawn.nth(1).wait_for()  # the charts are drawn once their data has arrived
    assert await drawn.count() == 2


async def test_the_per_pod_checklist_names_what_is_missing(page: Any, site: Site) -> None:
    pods = (
        await site.graphql(
            '{ pods(cluster: "east", namespace: "training", first: 10) { nodes { name phase nodeName } } }'
        )
    )["pods"]["nodes"]
    waiting = next(p for p in pods if p["phase"] == "Pending")
    running = next(p for p in pods if p["phase"] == "Running")
    await open_screen(page, site, f"/ui/pod?cluster=east&namespace=training&name={waiting['name']}")
    assert await attr(page, "[data-check=allocated]", "data-ok") == "false"
    assert await attr(page, "[data-check=running]", "data-ok") == "false"
    assert await attr(page, "[data-check=class]", "data-ok") == "true"
    mistakes = await page.inner_text("[data-mistakes]")
    assert "template-per-replica" in mistakes  # the mistake, named as lint names it
    await open_screen(
        page,
        site,
        f"/ui/pod?cluster=east&namespace=training&name={running['name']}&node={running['nodeName']}",
    )
    checks = page.locator("[data-check]:not([data-check=health])")
    assert {await checks.nth(i).get_attribute("data-ok") for i in range(await checks.count())} == {
        "true"
    }
    # the demo's kubelets report no device health: said, not ticked
    assert await attr(page, "[data-check=health]", "data-ok") == "null"


async def test_lists_are_read_a_page_at_a_time(page: Any, site: Site) -> None:
    total = (await site.graphql('{ devices(cluster: "east", first: 0) { totalCount } }'))[
        "devices"
    ]["totalCount"]
    size = 100  # the Resource Slices screen's page
    assert total > size, "the demo's east cluster has more devices than one page"
    await open_screen(page, site, "/ui/slices?cluster=east")
    assert await page.locator("tr[data-device]").count() == size
    assert await page.get_attribute("nav.pager [data-total] >> nth=0", "data-total") == str(total)
    await page.click("nav.pager >> nth=0 >> a[rel=next]")
    await page.wait_for_url("**after=**")
    await page.wait_for_function(
        f"() => document.querySelectorAll('tr[data-device]').length === {min(size, total - size)}"
    )
    pager = await page.inner_text("nav.pager >> nth=0")
    assert f"101\u2013{min(2 * size, total)} of {total}" in pager  # "101-200 of 217", an en dash


async def test_per_pod_lists_the_pods_asking_for_devices(page: Any, site: Site) -> None:
    await open_screen(page, site, "/ui/pods?cluster=east")
    truth = await site.graphql(
        """{ pods(cluster: "east", usesDevices: true, first: 50) { totalCount
             nodes { namespace name phase claims { claim { name state } } } } }"""
    )
    pods = truth["pods"]["nodes"]
    rows = page.locator("tr[data-pod]")
    assert [await rows.nth(i).get_attribute("data-pod") for i in range(await rows.count())] == [
        f"east/{p['namespace']}/{p['name']}" for p in pods
    ]
    for p in pods:
        row = await page.inner_text(f"tr[data-pod='east/{p['namespace']}/{p['name']}']")
        assert p["phase"] in row
        assert all(c["claim"]["name"] in row for c in p["claims"] if c["claim"])
