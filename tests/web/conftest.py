"""Fixtures of the browser tests: one demo mirror and one Chromium for the whole session
(starting them costs seconds), a fresh page per test whose every request beyond 127.0.0.1 is
aborted; a test fails when its page reached out, logged an error or threw.

Tests using `page` are marked `browser`. Chromium missing fails them with what to run."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.web.harness import Site, chromium_missing, guard, launch_browser, serve_demo, watch_page


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if {"page", "browser"} & set(getattr(item, "fixturenames", ())):
            item.add_marker("browser")


@pytest.fixture(scope="session")
async def site(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Site]:
    async with serve_demo(tmp_path_factory.mktemp("web-demo")) as served:
        yield served


@pytest.fixture(scope="session")
async def browser(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Any]:
    missing = chromium_missing()
    if missing:
        pytest.fail(missing, pytrace=False)
    async with launch_browser(tmp_path_factory.mktemp("chromium") / "profile") as context:
        context.guard = await guard(context)
        yield context


@pytest.fixture
async def page(browser: Any, site: Site) -> AsyncIterator[Any]:
    found = browser.guard
    found.foreign.clear()
    found.errors.clear()
    opened = await browser.new_page()
    watch_page(opened, found)
    opened.set_default_timeout(10_000)
    try:
        yield opened
    finally:
        await opened.close()
    assert not found.problems(), found.problems()


async def open_screen(page: Any, site: Site, path: str) -> Any:
    """Go to a screen and wait until it shows its data (`main[data-ready=true]`)."""
    await page.goto(f"{site.url}{path}")
    await page.wait_for_selector("main[data-ready=true]")
    return page
