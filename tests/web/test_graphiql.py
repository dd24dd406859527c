"""GraphiQL renders and runs a query with the network beyond 127.0.0.1 cut off: every asset
comes from the package (the `page` fixture aborts and reports any other request)."""

from __future__ import annotations

from typing import Any

from tests.web.harness import Site


async def test_graphiql_renders_and_runs_a_query_offline(page: Any, site: Site) -> None:
    await page.goto(f"{site.url}/graphql")
    await page.wait_for_selector(".graphiql-container .graphiql-execute-button")
    assert "clusters" in await page.inner_text(".graphiql-query-editor")
    await page.click(".graphiql-execute-button")
    result = page.locator(".graphiql-response")
    await result.locator("text=freeDevices").first.wait_for()
    text = await result.inner_text()
    names = [c["name"] for c in (await site.graphql("{ clusters { name } }"))["clusters"]]
    assert all(f'"{name}"' in text for name in names)


async def test_graphiql_is_served_from_the_package(site: Site) -> None:
    page = await site.http.get("/graphql", headers={"Accept": "text/html"})
    assert page.status_code == 200
    assert "/ui/static/vendor/graphiql-3.9.0/graphiql.min.js" in page.text
    assert "https://" not in page.text and "unpkg" not in page.text and "jsdelivr" not in page.text
    assert "default-src 'none'" in page.headers["content-security-policy"]
