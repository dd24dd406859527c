"""`/gpu plan` as Slack sends it: signed by slack_sdk, a pasted manifest or an attached file read
through a fake Slack Web API on loopback (files.info, then url_private with the bot token)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from asgi_lifespan import LifespanManager
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Route

from dra_mirror.service.runtime.compose import compose_app
from dra_mirror.service.settings import Settings
from dra_mirror.service.slack.plan import BotToken, SlackBot, split_request
from tests.plan.conftest import demo_world
from tests.plan.test_plan import deployment
from tests.slack.conftest import Slack, served, slack_settings

TOKEN = "xoxb-test-token"


class FakeSlack:
    """Slack's Web API and file host, as far as `plan` uses them."""

    def __init__(self) -> None:
        self.url = ""
        self.files = {"F0PLANYAML": deployment("trainer-b", 3)}
        self.seen: list[tuple[str, str | None]] = []

    async def files_info(self, request: Request) -> JSONResponse:
        form = await request.form()
        self.seen.append(("files.info", request.headers.get("authorization")))
        file_id = str(form.get("file") or request.query_params.get("file"))
        if file_id not in self.files:
            return JSONResponse({"ok": False, "error": "file_not_found"})
        body = self.files[file_id]
        return JSONResponse({"ok": True, "file": {
            "id": file_id, "size": len(body), "url_private": f"{self.url}files/{file_id}/plan.yaml"}})  # fmt: skip

    async def download(self, request: Request) -> PlainTextResponse:
        self.seen.append(("download", request.headers.get("authorization")))
        if request.headers.get("authorization") != f"Bearer {TOKEN}":
            return PlainTextResponse("no", status_code=403)
        return PlainTextResponse(self.files[request.path_params["file"]])


@pytest.fixture
async def fake_slack() -> AsyncIterator[FakeSlack]:
    fake = FakeSlack()
    app = Starlette(routes=[
        Route("/api/files.info", fake.files_info, methods=["POST", "GET"]),
        Route("/files/{file}/{name}", fake.download),
    ])  # fmt: skip
    async with served(app) as url:
        fake.url = url
        yield fake


@pytest.fixture
async def slack_with_files(fake_slack: FakeSlack) -> AsyncIterator[Slack]:
    world = await demo_world()
    bot = SlackBot(BotToken(TOKEN), api_url=f"{fake_slack.url}api/", file_urls=(fake_slack.url,))
    app = compose_app(Settings(), store=world.store, slack=slack_settings(bot=bot))
    async with LifespanManager(app) as manager:
        transport = httpx.ASGITransport(app=manager.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://mirror") as http:
            yield Slack(http)


def _text(reply: dict) -> str:
    return "\n".join(b["text"]["text"] for b in reply["blocks"] if b.get("text"))


async def test_a_pasted_manifest(slack_with_files: Slack) -> None:
    reply = await slack_with_files.command("plan ```\n" + deployment("trainer-b", 3) + "```")
    text = _text(reply)
    assert "*east*: 2 of 3 placeable" in text and "*west*: 0 of 3 placeable" in text
    assert "would wait: *all-held*" in text and "research/notebook-gpu" in text
    assert reply["text"] == "plan: would wait in every cluster"


async def test_an_attached_file_read_with_the_bot_token(
    slack_with_files: Slack, fake_slack: FakeSlack
) -> None:
    link = "https://example.slack.com/files/U0123/F0PLANYAML/plan.yaml"
    reply = await slack_with_files.command(f"plan {link} east")
    assert "*east*: 2 of 3 placeable" in _text(reply) and "west" not in _text(reply)
    assert fake_slack.seen == [("files.info", f"Bearer {TOKEN}"), ("download", f"Bearer {TOKEN}")]
    missing = await slack_with_files.command("plan F0NOSUCHFILE")
    assert "file_not_found" in _text(missing)


async def test_a_file_off_slacks_host_is_not_downloaded(fake_slack: FakeSlack) -> None:
    world = await demo_world()
    bot = SlackBot(BotToken(TOKEN), api_url=f"{fake_slack.url}api/")  # files.slack.com only
    app = compose_app(Settings(), store=world.store, slack=slack_settings(bot=bot))
    async with LifespanManager(app) as manager:
        transport = httpx.ASGITransport(app=manager.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://mirror") as http:
            reply = await Slack(http).command("plan F0PLANYAML")
    assert "not served from Slack's file host" in _text(reply)
    assert [what for what, _ in fake_slack.seen] == ["files.info"]


def test_what_follows_plan():
    assert split_request("F0ABCDEF12") == ("F0ABCDEF12", None, None)
    assert split_request("<https://x.slack.com/files/U1/F0ABCDEF12/a.yaml> west")[::2] == (
        "F0ABCDEF12",
        "west",
    )
    assert split_request("```yaml\nkind: Pod\n```") == (None, "kind: Pod", None)
