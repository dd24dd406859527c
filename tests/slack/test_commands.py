"""Each slash command answered through the real app, checked against the world's truth
(`tests.slack.truth`, computed from the raw objects), plus the deferred path: an answer posted
to response_url, and a response_url outside the allowed hosts never posted to."""

from __future__ import annotations

import re

import httpx
import pytest
from asgi_lifespan import LifespanManager

from dra_mirror.schema.reader import Scope
from dra_mirror.service.runtime.compose import compose_app
from dra_mirror.service.settings import Settings

from . import truth
from .conftest import QUERIED_AT, Slack, slack_settings


def texts(reply: dict) -> list[str]:
    """Every mrkdwn text of a reply: sections, their fields, context elements."""
    out = []
    for block in reply["blocks"]:
        if "text" in block:
            out.append(block["text"]["text"])
        out += [f["text"] for f in block.get("fields", [])]
        out += [e["text"] for e in block.get("elements", [])]
    return out


def holdings(reply: dict) -> list[tuple[str, str, str]]:
    """(cluster, node, claim) of each holding section."""
    found = []
    for block in reply["blocks"]:
        fields = {
            f["text"].split("\n", 1)[0]: f["text"].split("\n", 1)[1]
            for f in block.get("fields", [])
        }
        if "*Claim*" in fields:
            cluster, node = fields["*Cluster / node*"].split(" / ")
            found.append((cluster, node, fields["*Claim*"].split(" (")[0]))
    return sorted(found)


def bullet_lines(reply: dict) -> list[str]:
    return [line for text in texts(reply) for line in text.split("\n") if line.startswith("•")]


@pytest.mark.parametrize(
    ("spec", "devices"),
    [
        ("GPU-00000000-0000-0000-0000-00000000000b", [("east", "gpu.nvidia.com", "n1", "gpu-1")]),
        ("MIG-00000000-0000-0000-0000-0000000001a1", truth.named("gpu-0-mig-1g")),
        ("n2/gpu-1", [("east", "gpu.nvidia.com", "n2", "gpu-1")]),
        ("w1/gpu-0", [("west", "gpu.nvidia.com", "w1", "gpu-0")]),
        ("cni.dra.networking.x-k8s.io/n1/eth1", truth.named("eth1")),
    ],
)
async def test_who_holds_one_device(slack, spec, devices):
    reply = await slack.command(f"who-holds {spec}")
    expected = truth.holders_of(devices)
    assert expected and holdings(reply) == expected
    assert reply["text"].startswith(f"{spec} is held by")


async def test_who_holds_shows_device_claim_pods_and_idle(slack):
    reply = await slack.command("who-holds n1/gpu-1")
    (device, *_rest) = [t for t in texts(reply) if t.startswith("*Device*")]
    assert device == "*Device* `gpu-1` · GPU-00000000-0000-0000-0000-00000000000b · NVIDIA H200"
    fields = "\n".join(texts(reply))
    assert "team-a/shared-gpu (manual, reserved)" in fields
    assert "team-a/web-0 (Running), team-a/web-1 (Running), team-a/web-2 (Running)" in fields
    assert "*Holding since*\nunknown" in fields  # no allocationTimestamp and no history here
    assert "*Idle*\nno" in fields
    idle = "\n".join(texts(await slack.command("who-holds n2/gpu-0")))
    assert "team-c/idle-claim (manual, allocated)" in idle
    assert "*Idle*\nyes, since 2026-01-01 02:00 UTC (1h 0m ago)" in idle  # the app's clock
    template = "\n".join(texts(await slack.command("who-holds n2/gpu-1")))
    assert "team-b/job-0-gpu-abcde (template, reserved)" in template


async def test_who_holds_an_ambiguous_name_lists_the_candidates(slack):
    reply = await slack.command("who-holds gpu-0")
    expected = truth.holders_of(truth.named("gpu-0"))
    assert len({(c, n) for c, n, _ in expected}) > 1
    lines = bullet_lines(reply)
    assert sorted(
        re.match(r"• (\S+) · `([^/]+)/gpu-0`", line).groups() for line in lines
    ) == sorted((c, n) for c, n, _ in expected)
    for cluster, node, claim in expected:
        assert any(f"{cluster} · `{node}/gpu-0`" in line and claim in line for line in lines)
    narrowed = await slack.command("who-holds gpu-0 west")
    assert holdings(narrowed) == [h for h in expected if h[0] == "west"]


@pytest.mark.parametrize(
    ("spec", "said"),
    [
        ("gpu.nvidia.com/n1/gpu-0-mig-2g", "No claim holds `{}`: it is free."),
        # its partition gpu-0-mig-1g is held: the whole GPU cannot be given
        ("n1/gpu-0", "No claim holds `{}`: it is blocked: its counters are in use by sibling "
                     "partitions (or by its parts)."),
        ("nope", "No device is named `{}` (a uuid, node/device, driver/pool/device or a "
                 "device name)."),
        ("n9/gpu-0", "No device is named `{}` (a uuid, node/device, driver/pool/device or a "
                     "device name)."),
    ],
)  # fmt: skip
async def test_who_holds_tells_free_blocked_and_unknown_apart(slack, spec, said):
    reply = await slack.command(f"who-holds {spec}")
    assert reply["text"] == said.format(spec)
    unknown_cluster = await slack.command(f"who-holds {spec} nowhere")
    assert unknown_cluster["text"].startswith("no cluster named 'nowhere' (clusters: east, west)")


@pytest.mark.parametrize(
    ("args", "kind", "cluster"),
    [("", None, None), ("gpu.nvidia.com", "gpu", None), ("east mig.nvidia.com", "mig", "east")],
)
async def test_free(slack, args, kind, cluster):
    reply = await slack.command(f"free {args}")
    expected = [d for d in truth.free_devices(kind) if cluster in (None, d[0])]
    found = sorted(
        re.match(r"• (\S+) · (\S+): `([^`]+)`", line).groups() for line in bullet_lines(reply)
    )
    assert found == expected
    assert reply["text"].startswith(f"{len(expected)} free device")


async def test_free_with_no_match_and_unknown_words(slack):
    # west has no such class (the class is each cluster's own): said, not "0 free"
    reply = await slack.command("free west mig.nvidia.com")
    assert reply["text"] == (
        "no DeviceClass mig.nvidia.com in cluster west; there are: gpu.nvidia.com"
    )
    none = await slack.command("free west gpu.nvidia.com")
    assert none["text"] == "0 free devices of class `gpu.nvidia.com` in west"
    assert bullet_lines(none) == []
    unknown = await slack.command("free h100")
    assert unknown["text"] == "h100: no such class or cluster"


@pytest.mark.parametrize("args", ["", "gpu.nvidia.com", "mig.nvidia.com", "east"])
async def test_waiting(slack, args):
    reply = await slack.command(f"waiting {args}")
    expected = [
        (cluster, claim)
        for cluster, claim, class_name in truth.pending_claims()
        if args in ("", class_name, cluster)
    ]
    found = sorted(re.match(r"• (\S+) · (\S+) ", line).groups() for line in bullet_lines(reply))
    assert found == expected
    if expected:  # created 2026-01-01T00:00Z, the app's clock says 03:00
        assert all("waiting 3h 0m" in line for line in bullet_lines(reply))


async def test_idle(slack):
    reply = await slack.command("idle")
    expected = truth.idle_claims()
    lines = bullet_lines(reply)
    assert sorted(re.match(r"• (\S+) · (\S+) ", line).groups() for line in lines) == expected
    pending_gpu = [p for p in truth.pending_claims() if p[2] == "gpu.nvidia.com"]
    (line,) = [line for line in lines if "team-c/idle-claim" in line]
    assert "on n2: gpu-0 (GPU-00000000-0000-0000-0000-00000000000c)" in line
    assert f":warning: {len(pending_gpu)} claim(s) wait for its class" in line
    assert bullet_lines(await slack.command("idle west")) == []
    nowhere = (await slack.command("idle nowhere"))["text"]
    assert nowhere.startswith("no cluster named 'nowhere' (clusters: east, west)")


async def test_help_and_unknown_commands(slack):
    for text in ("", "help"):
        assert (await slack.command(text))["text"] == "dra-mirror commands"
    unknown = await slack.command("reboot n1")
    assert unknown["text"] == "Unknown command reboot"
    assert "/gpu who-holds" in "\n".join(texts(unknown))
    usage = await slack.command("who-holds")
    assert usage["text"].startswith("usage: /gpu who-holds")


async def test_answers_follow_the_request_scope(slack_store):
    class NoTeamC(Scope):
        def allows(self, cluster: str, namespace: str = "") -> bool:
            return namespace != "team-c"

    app = compose_app(
        Settings(),
        store=slack_store,
        slack=slack_settings(),
        scope_for=lambda _request: NoTeamC(),
        now=lambda: QUERIED_AT,
    )
    async with LifespanManager(app) as manager:
        transport = httpx.ASGITransport(app=manager.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://mirror") as http:
            slack = Slack(http)
            hidden = await slack.command("who-holds n2/gpu-0")  # team-c's: held, not free
            assert hidden["text"] == (
                "`n2/gpu-0` is held in another namespace (1 allocation you may not see)."
            )
            assert "team-c" not in str(hidden)
            assert bullet_lines(await slack.command("idle")) == []


async def test_slow_answers_go_to_the_response_url(slack_store, receiver):
    settings = slack_settings(answer_within=0.0, response_urls=(receiver.url,))
    app = compose_app(Settings(), store=slack_store, slack=settings, now=lambda: QUERIED_AT)
    async with LifespanManager(app) as manager:
        transport = httpx.ASGITransport(app=manager.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://mirror") as http:
            slack = Slack(http)
            ack = await slack.command("who-holds n1/gpu-1", response_url=receiver.url + "r/7")
            assert ack == {"response_type": "ephemeral", "text": "Working on `who-holds n1/gpu-1`…"}
            elsewhere = await slack.command("idle", response_url="http://169.254.169.254/latest")
            assert "no usable response_url" in elsewhere["text"]
    ((path, posted),) = receiver.posts
    assert path == "/r/7"
    assert holdings(posted) == truth.holders_of([("east", "gpu.nvidia.com", "n1", "gpu-1")])


async def test_what_people_type_is_never_markup(slack):
    # Echoed words must not become mentions or links (<!channel> would page everyone).
    reply = await slack.command("who-holds <!channel>")
    assert reply["text"].startswith("No device is named `&lt;!channel&gt;`")
    assert "<!channel>" not in str(reply)
    unknown = await slack.command("<@U123> please")
    assert unknown["text"] == "Unknown command &lt;@U123&gt;"
    assert "<@U123>" not in str(unknown)
    for text in ("free <https://evil.test|free>", "explain <!here>/x"):
        assert "<" not in str(await slack.command(text))
