"""Time on the screens: the Contention window ends now, not in the future; the Overview says
when each cluster's last event was, or that the cluster is quiet, and the ages keep counting;
a time axis's ticks are evenly spaced."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from tests.web.conftest import open_screen
from tests.web.harness import Site, eventually


async def test_the_contention_window_ends_now(page: Any, site: Site) -> None:
    await open_screen(page, site, "/ui/contention?cluster=east&window=1d")
    span = await page.inner_text("main p.muted.small")
    end = span.removeprefix("From ").split(" in ")[0].split(" to ")[1]
    shown = datetime.fromisoformat(end.replace(" ", "T").replace("Z", "+00:00"))
    assert shown <= datetime.now(UTC)


async def test_the_overview_says_when_the_last_event_was_and_keeps_counting(
    page: Any, site: Site
) -> None:
    await open_screen(page, site, "/ui/")
    lines = page.locator("section.cluster-card [data-last-event]")
    assert await lines.count() >= 1
    for i in range(await lines.count()):
        line = lines.nth(i)
        assert await line.get_attribute("data-last-event") in {"seen", "quiet"}
        assert "—" not in (await line.inner_text()).split("·")[0]
    first = await lines.nth(0).inner_text()

    async def counted() -> bool:
        return await lines.nth(0).inner_text() != first

    await eventually(counted, "the Overview's ages counting on", seconds=10)


async def test_time_axis_ticks_are_evenly_spaced(page: Any, site: Site) -> None:
    await open_screen(page, site, "/ui/")
    gaps = await page.evaluate(
        """async () => {
          const src = document.querySelector("script[type=module]").src;
          const { timeAxis } = await import(new URL("charts.js", src).href);
          return [0.3, 1.7, 5, 26.5, 24 * 7 + 3, 24 * 30].map((hours) => {
            const { min, step } = timeAxis(-hours);
            const ticks = [];
            for (let v = min; v <= 1e-9; v += step) ticks.push(v);
            return { hours, min, step, n: ticks.length, whole: Math.abs(min / step - Math.round(min / step)) < 1e-9 };
          });
        }"""
    )
    for axis in gaps:
        assert axis["whole"] and axis["min"] <= -axis["hours"] + 1e-9, axis
        assert 2 <= axis["n"] <= 9, axis
