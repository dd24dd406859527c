"""The Contention screen's chargeback table: per namespace (with its team) or per team, in
GPU-equivalent-hours and the demo price table's currency, the rows the graph answers for the
screen's own window."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

from tests.web.conftest import open_screen
from tests.web.harness import Site, eventually

QUERY = """query($f: DateTime!, $t: DateTime!, $g: ChargebackGroup!) {
  chargeback(from: $f, to: $t, groupBy: $g, cluster: "east") {
    cluster group team gpuHoursHeld costHeld currency } }"""


async def _window(page: Any) -> dict[str, str]:
    span = await page.inner_text("main p.muted.small")
    start, end = span.removeprefix("From ").split(" in ")[0].split(" to ")
    return {"f": start.replace(" ", "T"), "t": end.replace(" ", "T")}


async def test_the_chargeback_table_states_its_unit_and_matches_the_graph(
    page: Any, site: Site
) -> None:
    async def held() -> bool:  # the history writer has recorded holds of east before the
        # start of this minute, where the screen's window ends (auditWindow in contention.js)
        minute = datetime.fromtimestamp(int(time.time()) // 60 * 60, UTC).isoformat()
        window = {"f": "2000-01-01T00:00:00Z", "t": minute, "g": "NAMESPACE"}
        return bool((await site.graphql(QUERY, **window))["chargeback"])

    await eventually(held, "history recording east's holds before this minute", seconds=120)
    for group, path in (("NAMESPACE", ""), ("TEAM", "&chargeBy=TEAM")):
        await open_screen(page, site, f"/ui/contention?cluster=east{path}")
        await page.wait_for_selector("table[data-chargeback]")
        rows = (await site.graphql(QUERY, **await _window(page), g=group))["chargeback"]
        assert rows, "the demo holds GPUs in east"
        heading = await page.inner_text("main")
        assert "Chargeback in GPU-equivalent-hours" in heading  # states its unit
        head = await page.inner_text("table[data-chargeback] thead")
        assert "GPU-equivalent-hours held" in head
        shown = page.locator("tr[data-charge]")
        assert await shown.count() == len(rows)
        for row in rows:
            line = page.locator(f"tr[data-charge='{row['cluster']}/{row['group']}']")
            assert row["currency"] == "EUR"  # the demo's price table
            assert (await line.locator("[data-field=costHeld]").inner_text()).endswith(" EUR")
            if group == "NAMESPACE":
                assert row["team"] in await line.inner_text()
        if group == "TEAM":
            groups = {r["group"] for r in rows}
            assert groups <= {"research", "ml-platform", "data", "(unlabelled)"}, groups
