"""The web routes in the app: every screen path answers the shell with its security headers,
unknown screens are 404, static files come from the package, `/` leads to the screens, and a
mirror served under a path prefix links its assets under that prefix."""

from __future__ import annotations

import httpx
import pytest

from dra_mirror.service.runtime.compose import compose_app
from dra_mirror.service.runtime.lifespan import opened
from dra_mirror.service.settings import Settings
from dra_mirror.service.stores.memory import MemoryStore
from dra_mirror.service.web.routes import SCREENS


@pytest.fixture
async def http():
    app = compose_app(Settings(), store=MemoryStore())
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://test"
    ) as client:
        yield client


async def test_every_screen_answers_the_shell(http: httpx.AsyncClient) -> None:
    for screen in SCREENS:
        response = await http.get(f"/ui/{screen}?cluster=east")
        assert response.status_code == 200, screen
        assert 'id="dra-mirror-config"' in response.text
        assert "script-src 'self'" in response.headers["content-security-policy"]
        assert response.headers["x-content-type-options"] == "nosniff"


async def test_screens_known_to_the_shell_and_the_page_agree() -> None:
    from dra_mirror.service.web.assets import STATIC

    main = (STATIC / "app" / "main.js").read_text()
    for screen in SCREENS:
        assert f"  {screen or 'overview'}: " in main, screen


async def test_unknown_screens_are_404(http: httpx.AsyncClient) -> None:
    response = await http.get("/ui/no-such-screen")
    assert response.status_code == 404
    assert "no such screen" in response.text


async def test_home_leads_to_the_screens(http: httpx.AsyncClient) -> None:
    response = await http.get("/")
    assert response.status_code == 307
    assert response.headers["location"] == "/ui/"


async def test_static_files_come_from_the_package(http: httpx.AsyncClient) -> None:
    module = await http.get("/ui/static/app/main.js")
    assert module.status_code == 200
    assert "javascript" in module.headers["content-type"]
    assert (await http.get("/ui/static/vendor/vendor.json")).status_code == 200
    assert (await http.get("/ui/static/../routes.py")).status_code == 404


async def test_a_path_prefix_is_kept_in_every_link() -> None:
    app = compose_app(Settings(), store=MemoryStore())
    transport = httpx.ASGITransport(app=app, root_path="/dra-mirror")
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        page = await client.get("/ui/claims")
    assert page.status_code == 200
    assert '"graphql": "/dra-mirror/graphql"' in page.text
    assert 'src="/dra-mirror/ui/static/app/main.js"' in page.text


async def test_pages_need_no_credentials_but_data_does(tmp_path) -> None:
    """The shell, its static files and the GraphiQL page carry no data: they load before the
    browser has a token; a query (POST, or GET with `query`) goes through the gate."""
    from dra_mirror.service.access.config import AccessConfig
    from dra_mirror.service.access.control import AccessControl
    from dra_mirror.service.access.static import StaticTokens, token_hash

    tokens = tmp_path / "tokens.yaml"
    tokens.write_text(f"tokens:\n  - {{name: a, sha256: {token_hash('a-token')}}}\n")
    config = AccessConfig(static_tokens=str(tokens))
    control = AccessControl(config, authenticators=[StaticTokens.from_file(tokens)])
    app = compose_app(Settings(), store=MemoryStore(), access=opened(control))
    app.state.mirror.access = control  # the lifespan is not run by this transport
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://test"
    ) as client:
        assert (await client.get("/ui/claims")).status_code == 200
        assert (await client.get("/ui/static/app/main.js")).status_code == 200
        page = await client.get("/graphql", headers={"accept": "text/html"})
        assert page.status_code == 200 and "graphiql" in page.text.lower()
        query = {"query": "{ clusters { name } }"}
        html = {"accept": "text/html"}
        assert (await client.get("/graphql", params=query, headers=html)).status_code == 401
        assert (await client.post("/graphql", json=query)).status_code == 401
