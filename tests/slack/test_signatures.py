"""Every request is checked with Slack's v0 signature before anything runs: unsigned, forged,
tampered and stale requests get 401 and are never answered (nothing is posted to their
response_url); the secret never reaches the log."""

from __future__ import annotations

import hashlib
import hmac
import logging
import time

import httpx
import pytest
from asgi_lifespan import LifespanManager

from dra_mirror.service.runtime.compose import compose_app
from dra_mirror.service.settings import Settings, SettingsError
from dra_mirror.service.slack import SigningSecret, SlackSettings

from .conftest import SECRET, Slack, signed, slack_settings


async def test_a_signed_command_is_answered(slack):
    reply = await slack.command("help")
    assert reply["response_type"] == "ephemeral"
    assert "who-holds" in reply["blocks"][1]["text"]["text"]


def raw_signed(body: bytes, *, timestamp: str | None = None) -> tuple[bytes, dict[str, str]]:
    """`body` signed over its raw bytes with the real secret (what a sender that knows the
    secret could send; slack_sdk cannot sign bytes that are not UTF-8)."""
    ts = timestamp or str(int(time.time()))
    digest = hmac.new(SECRET.encode(), b"v0:" + ts.encode() + b":" + body, hashlib.sha256)
    return body, {
        "content-type": "application/x-www-form-urlencoded",
        "x-slack-request-timestamp": ts,
        "x-slack-signature": "v0=" + digest.hexdigest(),
    }


@pytest.mark.parametrize(
    "tamper",
    [
        pytest.param(lambda body, h: (body, {"content-type": h["content-type"]}), id="unsigned"),
        pytest.param(
            lambda body, h: (body, {**h, "x-slack-signature": "v0=" + "0" * 64}), id="forged"
        ),
        pytest.param(lambda body, h: (body.replace(b"help", b"idle"), h), id="tampered-body"),
        pytest.param(lambda body, h: signed("help", secret="not-the-secret"), id="other-secret"),
        pytest.param(lambda body, h: signed("help", timestamp=int(time.time()) - 301), id="stale"),
        pytest.param(lambda body, h: signed("help", timestamp=int(time.time()) + 600), id="future"),
        pytest.param(
            lambda body, h: (body, {**h, "x-slack-request-timestamp": "soon"}), id="bad-timestamp"
        ),
        pytest.param(
            lambda body, h: (body, {**h, "x-slack-signature": h["x-slack-signature"][3:]}),
            id="no-version",
        ),
        # hostile: digits str.isdigit() accepts but int() refuses, numbers int() refuses, a
        # body slack_sdk cannot decode (each was a 500 with a traceback)
        pytest.param(
            lambda body, h: (
                body,
                {**h, "x-slack-request-timestamp": "\u00b2\u00b3".encode("latin-1")},
            ),
            id="superscript-digits",
        ),
        pytest.param(
            lambda body, h: (body, {**h, "x-slack-request-timestamp": "9" * 5000}),
            id="5000-digit-timestamp",
        ),
        pytest.param(lambda body, h: raw_signed(b"text=\xff\xfehelp"), id="not-utf-8"),
        pytest.param(
            lambda body, h: raw_signed(b"text=\xff", timestamp="0" * 30), id="zeros-not-utf-8"
        ),
    ],
)
async def test_bad_signatures_are_rejected(slack, tamper, caplog):
    body, headers = tamper(*signed("help"))
    with caplog.at_level(logging.INFO, logger="dra_mirror.service.slack"):
        response = await slack.post(body, headers)
    assert response.status_code == 401
    assert response.text == "invalid Slack signature\n"
    assert "rejected" in caplog.text and "slack command /gpu" not in caplog.text
    assert SECRET not in caplog.text


async def test_rejected_requests_are_not_processed(slack_store, receiver):
    # answer_within=0: every accepted command is answered on its response_url, so a request
    # that was processed would show up at the receiver.
    settings = slack_settings(answer_within=0.0, response_urls=(receiver.url,))
    app = compose_app(Settings(), store=slack_store, slack=settings)
    async with LifespanManager(app) as manager:
        transport = httpx.ASGITransport(app=manager.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://mirror") as http:
            slack = Slack(http)
            url = receiver.url + "hook/1"
            forged = signed("who-holds gpu-0", secret="forged", response_url=url)
            stale = signed("who-holds gpu-0", timestamp=int(time.time()) - 3600, response_url=url)
            for body, headers in (forged, stale):
                assert (await slack.post(body, headers)).status_code == 401
            assert receiver.posts == []
            reply = await slack.command("who-holds gpu-0", response_url=url)
            assert reply["text"] == "Working on `who-holds gpu-0`…"
    assert [path for path, _ in receiver.posts] == ["/hook/1"]
    assert "ambiguous" in receiver.posts[0][1]["text"]


async def test_slack_off_without_a_secret_and_bodies_are_bounded(slack_store, slack):
    app = compose_app(Settings(), store=slack_store)
    async with LifespanManager(app) as manager:
        transport = httpx.ASGITransport(app=manager.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://mirror") as http:
            off = await http.post("/slack/commands", content=b"text=help")
            assert off.status_code == 404 and "DRA_MIRROR_SLACK_SIGNING_SECRET" in off.text
    huge, headers = signed("help " + "x" * 70_000)
    assert (await slack.post(huge, headers)).status_code == 413
    probe = await slack.post(b"ssl_check=1&token=abc", {})  # Slack checking the certificate
    assert (probe.status_code, probe.content) == (200, b"")


def test_the_secret_comes_from_a_file_or_the_environment_and_never_prints(tmp_path):
    path = tmp_path / "signing-secret"
    path.write_text(SECRET + "\n")  # a mounted Kubernetes Secret ends with a newline
    from_file = SlackSettings.from_env({"DRA_MIRROR_SLACK_SIGNING_SECRET_FILE": str(path)})
    from_env = SlackSettings.from_env({"DRA_MIRROR_SLACK_SIGNING_SECRET": SECRET})
    assert from_file == from_env and from_file is not None
    assert from_file.signing_secret.reveal() == SECRET
    assert SECRET not in repr(from_file) and SECRET not in str(from_file.signing_secret)
    assert SlackSettings.from_env({}) is None  # commands off
    tuned = SlackSettings.from_env(
        {
            "DRA_MIRROR_SLACK_SIGNING_SECRET": SECRET,
            "DRA_MIRROR_SLACK_ANSWER_WITHIN": "0.5",
            "DRA_MIRROR_SLACK_RESPONSE_URLS": "https://hooks.slack.com/, https://example.test/",
        }
    )
    assert tuned is not None and tuned.answer_within == 0.5
    assert tuned.response_urls == ("https://hooks.slack.com/", "https://example.test/")
    (tmp_path / "empty").write_text("\n")
    bad = [
        {"DRA_MIRROR_SLACK_SIGNING_SECRET_FILE": str(tmp_path / "missing")},
        {"DRA_MIRROR_SLACK_SIGNING_SECRET_FILE": str(tmp_path / "empty")},
        {"DRA_MIRROR_SLACK_SIGNING_SECRET": SECRET, "DRA_MIRROR_SLACK_SIGNING_SECRET_FILE": "x"},
        {"DRA_MIRROR_SLACK_SIGNING_SECRET": SECRET, "DRA_MIRROR_SLACK_ANSWER_WITHIN": "5"},
    ]
    for environ in bad:
        with pytest.raises(SettingsError) as raised:
            SlackSettings.from_env(environ)
        assert SECRET not in str(raised.value)
    with pytest.raises(SettingsError):
        SigningSecret("  ")
