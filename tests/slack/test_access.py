"""Who asks in Slack: the access file's user, user-group and workspace mappings, with the
user groups and accounts read from Slack's Web API (a fake of it on loopback, spoken to by
slack_sdk's own client), and what each asker's replies may show."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import httpx
import pytest
from asgi_lifespan import LifespanManager
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from dra_mirror.service.access.config import AccessConfig, SlackScopes
from dra_mirror.service.access.control import AccessControl
from dra_mirror.service.access.scope import AccessScope
from dra_mirror.service.access.slack import REFUSAL
from dra_mirror.service.access.static import StaticTokens
from dra_mirror.service.runtime.compose import compose_app
from dra_mirror.service.runtime.lifespan import opened
from dra_mirror.service.settings import Settings
from dra_mirror.service.slack import SigningSecret
from dra_mirror.service.slack.directory import SlackDirectory
from dra_mirror.service.stores.memory import MemoryStore

from .conftest import QUERIED_AT, Slack, load_world, served, slack_settings

TOKEN = "xoxb-0000-test-token"
TEAM = "T0001"


@dataclass
class FakeSlack:
    """Slack's Web API for two methods, as https://docs.slack.dev documents their answers."""

    groups: dict[str, list[str]] = field(default_factory=dict)
    users: dict[str, dict] = field(default_factory=dict)
    calls: list[tuple[str, str]] = field(default_factory=list)
    failing: str | None = None  # an error code every call answers, or "down" for HTTP 500
    url: str = ""

    async def method(self, request: Request) -> JSONResponse:
        name = request.path_params["method"]
        params = dict(request.query_params)
        if request.method == "POST":
            params.update(dict(await request.form()))
        self.calls.append((name, params.get("usergroup") or params.get("user") or ""))
        if request.headers.get("authorization") != f"Bearer {TOKEN}":
            return JSONResponse({"ok": False, "error": "invalid_auth"})
        if self.failing == "down":
            return JSONResponse({"ok": False}, status_code=500)
        if self.failing:
            return JSONResponse({"ok": False, "error": self.failing})
        if name == "usergroups.users.list":
            group = params.get("usergroup", "")
            if group not in self.groups:
                return JSONResponse({"ok": False, "error": "no_such_subteam"})
            return JSONResponse({"ok": True, "users": self.groups[group]})
        if name == "users.info":
            user = self.users.get(params.get("user", ""))
            if user is None:
                return JSONResponse({"ok": False, "error": "user_not_found"})
            return JSONResponse({"ok": True, "user": {"team_id": TEAM, **user}})
        return JSONResponse({"ok": False, "error": "unknown_method"})


@pytest.fixture(scope="module")
async def fake_slack() -> AsyncIterator[FakeSlack]:
    fake = FakeSlack(
        groups={"S-ML": ["U-ALICE", "U-GUEST"], "S-OPS": ["U-ALICE"], "S-EMPTY": []},
        users={
            "U-ALICE": {"id": "U-ALICE", "name": "alice"},
            "U-CAROL": {"id": "U-CAROL", "name": "carol"},
            "U-GUEST": {"id": "U-GUEST", "is_restricted": True},
            "U-OUTSIDER": {"id": "U-OUTSIDER", "is_ultra_restricted": True},
            "U-GONE": {"id": "U-GONE", "deleted": True},
            "U-BOT": {"id": "U-BOT", "is_bot": True},
        },
    )
    app = Starlette(routes=[Route("/api/{method}", fake.method, methods=["GET", "POST"])])
    async with served(app) as url:
        fake.url = url + "api/"
        yield fake


SCOPES = SlackScopes(
    users={"U-ROOT": AccessScope.admin()},
    user_groups={
        "S-ML": AccessScope.parse(["east/team-a"]),
        "S-OPS": AccessScope.parse(["west/team-a"]),
        "S-EMPTY": AccessScope.parse(["*/*"]),
    },
    workspaces={TEAM: AccessScope.parse(["east/team-b"])},
)


@pytest.fixture
async def asker(fake_slack: FakeSlack) -> AsyncIterator[tuple[Slack, FakeSlack]]:
    fake_slack.calls.clear()
    fake_slack.failing = None
    settings = slack_settings(bot_token=SigningSecret(TOKEN), api_url=fake_slack.url)
    directory = SlackDirectory.from_settings(settings)
    control = AccessControl(
        AccessConfig(static_tokens="tokens.yaml", slack=SCOPES),
        authenticators=[StaticTokens({})],
        slack_directory=directory,
    )
    app = compose_app(Settings(), store=MemoryStore(), slack=settings, access=opened(control),
                     now=lambda: QUERIED_AT)  # fmt: skip
    async with LifespanManager(app) as manager:
        await load_world(app.state.mirror.store)
        transport = httpx.ASGITransport(app=manager.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://mirror") as http:
            yield Slack(http), fake_slack


def words(reply: dict) -> str:
    return reply["text"] + " " + " ".join(
        str(b.get("text", {}).get("text", "")) + " ".join(str(f) for f in b.get("fields", []))
        + " ".join(str(e) for e in b.get("elements", []))
        for b in reply.get("blocks", [])
    )  # fmt: skip


async def test_a_user_group_member_sees_its_groups_namespaces(asker) -> None:
    slack, fake = asker
    # alice is in S-ML (east/team-a) and S-OPS (west/team-a): n2/gpu-0 is team-c's
    hidden = await slack.command("who-holds n2/gpu-0", user_id="U-ALICE")
    assert "held in another namespace" in hidden["text"], hidden
    assert "team-c" not in words(hidden) and "free" not in hidden["text"]
    mine = await slack.command("who-holds n1/gpu-1", user_id="U-ALICE")
    assert "team-a/shared-gpu" in mine["text"] and "team-b" not in words(mine)
    west = await slack.command("who-holds w1/gpu-0", user_id="U-ALICE")
    assert "team-a/west-claim" in west["text"]
    # the directory answered from its cache the second and third time
    assert sorted(fake.calls) == [("usergroups.users.list", "S-EMPTY"),
                                  ("usergroups.users.list", "S-ML"),
                                  ("usergroups.users.list", "S-OPS"),
                                  ("users.info", "U-ALICE")]  # fmt: skip


async def test_without_a_group_the_workspace_mapping_applies_but_not_to_guests(asker) -> None:
    slack, _ = asker
    carol = await slack.command("who-holds n2/gpu-1", user_id="U-CAROL")  # east/team-b
    assert "team-b/job-0-gpu-abcde" in carol["text"], carol
    # a guest in a mapped group gets the group's scope; a guest in none is refused
    guest = await slack.command("who-holds n1/gpu-1", user_id="U-GUEST")
    assert "team-a/shared-gpu" in guest["text"], guest
    for user in ("U-OUTSIDER", "U-GONE", "U-BOT", "U-NOBODY"):
        refused = await slack.command("free", user_id=user)
        assert refused["text"] == REFUSAL, (user, refused)
    root = await slack.command("who-holds n2/gpu-0", user_id="U-ROOT")  # a user mapping
    assert "team-c/idle-claim" in root["text"]


@pytest.mark.parametrize("failing", ["down", "ratelimited", "missing_scope"])
async def test_slack_unable_to_say_who_asks_is_a_polite_refusal(asker, failing) -> None:
    slack, fake = asker
    fake.failing = failing
    reply = await slack.command("who-holds n1/gpu-1", user_id="U-ALICE")
    assert "try again" in reply["text"] and "shared-gpu" not in words(reply), reply
    assert TOKEN not in words(reply)
    fake.failing = None
    again = await slack.command("who-holds n1/gpu-1", user_id="U-ALICE")
    assert "team-a/shared-gpu" in again["text"]  # a failure is not cached


async def test_the_directory_is_bounded_and_expires(fake_slack: FakeSlack) -> None:
    now = [0.0]
    settings = slack_settings(bot_token=SigningSecret(TOKEN), api_url=fake_slack.url)
    directory = SlackDirectory.from_settings(settings)
    assert directory is not None
    bounded = SlackDirectory(directory.client, ttl=60, max_accounts=2, max_groups=1,
                             clock=lambda: now[0])  # fmt: skip
    fake_slack.calls.clear()
    for user in ("U-ALICE", "U-CAROL", "U-GUEST", "U-ALICE"):
        await bounded.account(user)
    assert len(bounded._accounts._values) == 2
    assert [u for m, u in fake_slack.calls] == ["U-ALICE", "U-CAROL", "U-GUEST", "U-ALICE"]
    assert await bounded.groups_of("U-ALICE", ["S-ML", "S-OPS"]) == {"S-ML", "S-OPS"}
    assert len(bounded._groups._values) == 1
    fake_slack.calls.clear()
    await bounded.account("U-ALICE")
    assert fake_slack.calls == []  # cached
    now[0] = 61.0
    await bounded.account("U-ALICE")
    assert fake_slack.calls == [("users.info", "U-ALICE")]  # expired


async def test_explain_keeps_held_devices_held_for_a_narrow_scope(asker) -> None:
    """carol's scope is east/team-b: the GPUs other namespaces hold are held for her too —
    her pending claim waits behind them (the admin's verdict), their holders counted, unnamed."""
    slack, _ = asker
    root = await slack.command("explain team-b/job-1-gpu-fghij", user_id="U-ROOT")
    carol = await slack.command("explain team-b/job-1-gpu-fghij", user_id="U-CAROL")
    assert root["text"].startswith("team-b/job-1-gpu-fghij: ALL_HELD"), root["text"]
    assert carol["text"].startswith("team-b/job-1-gpu-fghij: ALL_HELD"), carol["text"]
    assert "free" not in carol["text"]
    assert "3 claim(s) outside your scope" in carol["text"]
    assert "holdersHidden: 3" in words(carol) and "holdersTotal: 4" in words(carol)
    assert not any(ns in words(carol) for ns in ("team-a", "team-c")), words(carol)
