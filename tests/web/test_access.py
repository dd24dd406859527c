"""The screens behind access control, in a real Chromium: a page without a token is asked to
sign in; signed in with a token scoped to one namespace, every screen shows only that
namespace (in what it draws and in every answer it received), devices held elsewhere read
"held in another namespace", and signing out forgets the token. The mirror runs only
registered documents: every document the screens send is one of their own, registered."""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import orjson
import pytest

from dra_mirror.service.access.config import AccessConfig
from dra_mirror.service.settings import GraphQLSettings, Settings
from tests.guard.test_scope_property import namespaces_in
from tests.web.harness import Site, serve_demo

RESEARCH = "research-token-0123456789abcdef0123456789abcdef"
ADMIN = "admin-token-0123456789abcdef0123456789abcdef0123"
SEEN = ("east", "research")
HIDDEN_NAMES = ("inference-server", "trainer", "batch-train", "shared-h200", "cuda-legacy")
SCREENS = [
    "/ui/",
    "/ui/classes?cluster=east",
    "/ui/slices?cluster=east",
    "/ui/slices?cluster=east&node=east-h200-1",
    "/ui/claims",
    "/ui/claims?cluster=east&namespace=inference",
    "/ui/templates",
    "/ui/pods",
    "/ui/pod?cluster=east&namespace=research&name=notebook",
    "/ui/claim?cluster=east&namespace=inference&name=shared-h200",
    "/ui/contention?cluster=east",
    "/ui/device?cluster=east&driver=gpu.nvidia.com&pool=east-h200-1&device=gpu-0&node=east-h200-1",
]


HELD_ON_NODE = """{ devices(cluster: "east", node: "east-h200-1", first: 100) {
  nodes { pool name allocations { claim { namespace } } } } }"""


def sha(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


@pytest.fixture(scope="module")
async def guarded(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Site]:
    workdir = tmp_path_factory.mktemp("web-access")
    tokens = workdir / "tokens.yaml"
    tokens.write_text(f"""tokens:
  - {{name: research-dashboard, sha256: {sha(RESEARCH)},
      scope: {{namespaces: [east/research], history: true}}}}
  - {{name: platform, sha256: {sha(ADMIN)}, scope: {{admin: true}}}}
""")
    documents = workdir / "documents"
    documents.mkdir()
    (documents / "truth.graphql").write_text(HELD_ON_NODE)  # the test's own, registered
    settings = Settings(
        graphql=GraphQLSettings(refuse_unregistered=True, persisted_documents=str(documents))
    )
    access = AccessConfig(static_tokens=str(tokens), rate_limit=0)
    async with serve_demo(workdir, settings=settings, access=access) as site:
        site.http.headers["authorization"] = f"Bearer {ADMIN}"
        yield site


def forgive_refusals(browser: Any) -> None:
    """Chromium logs each 401 answer as a console error: here they are the point."""
    errors = browser.guard.errors
    errors[:] = [e for e in errors if "status of 401" not in e]


def record_answers(page: Any) -> list[Any]:
    answers: list[Any] = []

    async def response(reply: Any) -> None:
        if reply.url.split("?")[0].endswith("/graphql") and reply.request.method == "POST":
            try:
                answers.append(orjson.loads(await reply.body()))
            except Exception as error:  # a body the page could not read is a failure too
                answers.append({"unreadable": str(error)})

    page.on("response", response)
    page.on("websocket", lambda socket: socket.on(
        "framereceived", lambda frame: answers.append(orjson.loads(frame))))  # fmt: skip
    return answers


async def test_a_scoped_token_sees_only_its_namespace_on_every_screen(
    page: Any, browser: Any, guarded: Site
) -> None:
    answers = record_answers(page)
    await page.goto(f"{guarded.url}/ui/")
    await page.wait_for_selector("main[data-screen=signin]")  # no token: asked to sign in
    await page.fill("[data-testid=signin-token]", RESEARCH)
    await page.click("[data-testid=signin-submit]")
    await page.wait_for_selector("main[data-screen=overview][data-ready=true]")
    viewer = page.locator("[data-viewer=research-dashboard]")
    await viewer.wait_for()
    assert await viewer.get_attribute("data-scope") == "east/research; history"
    await page.wait_for_selector("[data-live=live]")  # the token went in connection_init too
    for path in SCREENS:
        await page.goto(f"{guarded.url}{path}")
        await page.wait_for_selector("main[data-ready=true]")
        await page.wait_for_load_state("networkidle")
        text = await page.inner_text("body")
        typed = path.split("?")[-1]  # a page may echo the words of its own URL
        assert not [n for n in HIDDEN_NAMES if n in text and n not in typed], (path, text)
        links = await page.eval_on_selector_all("a[href]", "els => els.map(e => e.href)")
        for link in links:
            query = parse_qs(urlparse(link).query)
            if "namespace" in query:
                assert (query.get("cluster", ["east"])[0], query["namespace"][0]) == SEEN, link
        if path.startswith("/ui/claim?"):  # another namespace's claim does not exist here
            await page.wait_for_selector("[data-missing=true]")
    forgive_refusals(browser)
    assert answers, "the screens asked nothing"
    for answer in answers:
        assert "PERSISTED_QUERY_NOT_FOUND" not in orjson.dumps(answer).decode(), answer
        for cluster, namespace in namespaces_in(answer):
            assert namespace == SEEN[1] and cluster in (None, SEEN[0]), (cluster, namespace)


async def test_a_device_held_in_another_namespace_says_so(
    page: Any, browser: Any, guarded: Site
) -> None:
    held = (await guarded.http.post("/graphql", json={"query": HELD_ON_NODE})).json()
    elsewhere = [d for d in held["data"]["devices"]["nodes"]
                 if d["allocations"] and all(a["claim"]["namespace"] != "research"
                                             for a in d["allocations"])]  # fmt: skip
    assert elsewhere, "the scenario holds a device of east-h200-1 outside research"
    await page.goto(f"{guarded.url}/ui/")
    await page.evaluate(
        "token => sessionStorage.setItem('dra-mirror.authorization', 'Bearer ' + token)", RESEARCH
    )
    device = elsewhere[0]
    await page.goto(
        f"{guarded.url}/ui/device?cluster=east&driver=gpu.nvidia.com&pool={device['pool']}"
        f"&device={device['name']}&node=east-h200-1"
    )
    await page.wait_for_selector("main[data-screen=device][data-ready=true]")
    note = page.locator("[data-holders=withheld]")
    await note.wait_for()
    assert "Held in another namespace" in await note.inner_text()
    await page.goto(f"{guarded.url}/ui/slices?cluster=east&node=east-h200-1")
    await page.wait_for_selector("main[data-ready=true]")
    assert await page.locator("[data-withheld]").count() >= 1
    await page.click("[data-testid=signout]")
    await page.wait_for_selector("main[data-screen=signin]")
    assert await page.evaluate("sessionStorage.getItem('dra-mirror.authorization')") is None
    forgive_refusals(browser)


async def test_a_refused_token_is_shown_and_can_be_dropped(
    page: Any, browser: Any, guarded: Site
) -> None:
    await page.goto(f"{guarded.url}/ui/")
    await page.evaluate("sessionStorage.setItem('dra-mirror.authorization', 'Bearer nope')")
    await page.goto(f"{guarded.url}/ui/claims")
    await page.wait_for_selector("main[data-screen=signin]")
    assert "unknown token" in await page.inner_text("main")
    await page.wait_for_selector("[data-viewer=refused]")
    await page.click("[data-testid=signout]")
    await page.wait_for_selector("[data-testid=signin-open]")
    forgive_refusals(browser)


def test_screens_documents_are_read_as_the_browser_sends_them() -> None:
    from dra_mirror.service.web.documents import APP, screen_documents

    texts = dict(screen_documents())
    assert "${" not in "".join(texts.values())
    # a document splicing an imported fragment carries the fragment's text
    assert "fragment SliceDevice on Device" in texts["screens/device.js:HOLDERS"]
    assert Path(APP / "signin.js").exists() and "signin.js:VIEWER" in texts
