"""The screenshots of docs/web.md: each screen of the demo scenario in Debian's chromium.

    scripts/screenshots [DIR]        # default docs/web; one PNG per screen, 1280x800

Runs the demo mirror on a free loopback port (as the browser tests do), waits until every
screen shows its data (and history has caught up), and saves the viewport of each screen.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path
from typing import Any

from tests.web.harness import (
    Site,
    chromium_missing,
    eventually,
    guard,
    launch_browser,
    recent,
    serve_demo,
    watch_page,
)

SIZE = {"width": 1280, "height": 800}


async def history_caught_up(site: Site) -> None:
    query = """query($f: DateTime!, $t: DateTime!) { contention(from: $f, to: $t, cluster: "east") { claimsWaited } }"""

    async def waited() -> bool:
        return any(r["claimsWaited"] for r in (await site.graphql(query, **recent()))["contention"])

    await eventually(waited, "history recording the demo's first wait", seconds=60)


async def shots(site: Site) -> list[tuple[str, str, str | None]]:
    """(file name, path, a selector to wait for besides the screen's readiness)."""
    pending = await site.graphql(
        '{ resourceClaims(cluster: "east", state: PENDING) { nodes { namespace name } } }'
    )
    claim = pending["resourceClaims"]["nodes"][0]
    pods = await site.graphql(
        '{ pods(cluster: "east", namespace: "training") { nodes { name phase } } }'
    )
    waiting = next(p for p in pods["pods"]["nodes"] if p["phase"] == "Pending")
    return [
        ("overview", "/ui/", "section.cluster-card[data-complete=true] >> nth=1"),
        ("classes", "/ui/classes?cluster=east", None),
        ("slices", "/ui/slices?cluster=east&node=east-h200-1", "[data-counters=loaded]"),
        ("claims", "/ui/claims?cluster=east", "[data-verdict]"),
        (
            "claim",
            f"/ui/claim?cluster=east&namespace={claim['namespace']}&name={claim['name']}",
            "[data-incarnation]",
        ),
        (
            "templates",
            "/ui/templates?cluster=east&template=east%2Ftraining%2Fsingle-h200",
            "[data-generated]",
        ),
        (
            "device",
            "/ui/device?cluster=east&driver=gpu.nvidia.com&pool=east-h200-0&device=gpu-0&node=east-h200-0",
            "canvas[data-drawn=true]",
        ),
        ("contention", "/ui/contention?cluster=east", "canvas[data-drawn=true] >> nth=1"),
        ("pods", "/ui/pods?cluster=east", None),
        (
            "pod",
            f"/ui/pod?cluster=east&namespace=training&name={waiting['name']}",
            "[data-mistakes]",
        ),
    ]


async def take(out: Path) -> list[Path]:
    saved: list[Path] = []
    with tempfile.TemporaryDirectory(prefix="dra-mirror-shots-") as tmp:
        async with (
            serve_demo(Path(tmp) / "demo") as site,
            launch_browser(Path(tmp) / "profile") as browser,
        ):
            found = await guard(browser)
            await history_caught_up(site)
            page: Any = await browser.new_page()
            watch_page(page, found)
            await page.set_viewport_size(SIZE)
            for name, path, extra in await shots(site):
                await page.goto(f"{site.url}{path}")
                await page.wait_for_selector("main[data-ready=true]")
                if extra:
                    await page.wait_for_selector(extra)
                await page.wait_for_timeout(300)  # fonts and charts settle
                saved.append(out / f"{name}.png")
                await page.screenshot(path=str(saved[-1]))
            await page.goto(f"{site.url}/graphql")
            await page.click(".graphiql-execute-button")
            await page.locator(".graphiql-response >> text=freeDevices").first.wait_for()
            saved.append(out / "graphiql.png")
            await page.screenshot(path=str(saved[-1]))
            if found.problems():
                raise SystemExit(f"the pages misbehaved: {found.problems()}")
    return saved


def main() -> None:
    missing = chromium_missing()
    if missing:
        raise SystemExit(missing)
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "docs/web")
    out.mkdir(parents=True, exist_ok=True)
    for path in asyncio.run(take(out)):
        print(f"{path} ({path.stat().st_size // 1024} KiB)")


if __name__ == "__main__":
    main()
