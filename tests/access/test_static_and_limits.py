"""Static tokens (a file of SHA-256 hashes), the bearer header, the per-subject rate limit."""

from __future__ import annotations

import pytest

from dra_mirror.service.access.authenticators import Authenticators, bearer_token
from dra_mirror.service.access.errors import AccessConfigError, Throttled, Unauthenticated
from dra_mirror.service.access.ratelimit import RateLimit
from dra_mirror.service.access.static import StaticTokens, token_hash

GRAFANA = "4c1f6c1b0f9e2f4f8d0f4a7a6d1c2b3a-grafana"
BOT = "b0t-9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d"


def write_tokens(tmp_path, text: str):
    path = tmp_path / "tokens.yaml"
    path.write_text(text)
    return path


def tokens_file(tmp_path):
    return write_tokens(
        tmp_path,
        f"""tokens:
  - name: grafana
    sha256: {token_hash(GRAFANA)}
    scope: {{namespaces: ["*/*"], history: true}}
  - name: ml-bot
    sha256: {token_hash(BOT).upper()}
    scope: {{namespaces: [east/ml]}}
""",
    )


async def test_a_static_token_is_its_subject_and_scope(tmp_path):
    tokens = StaticTokens.from_file(tokens_file(tmp_path))
    grafana = await tokens.authenticate(GRAFANA)
    assert (grafana.name, grafana.method) == ("grafana", "static")
    assert grafana.scope.allows("west", "anything") and grafana.scope.history
    bot = await tokens.authenticate(BOT)  # hashes are compared lower-cased
    assert bot.scope.allows("east", "ml") and not bot.scope.allows("east", "other")
    assert tokens.claims(GRAFANA) and not tokens.claims(GRAFANA + "x")
    with pytest.raises(Unauthenticated, match="unknown token") as refused:
        await tokens.authenticate("guess")
    assert "guess" not in str(refused.value)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("tokens: {}", "expected `tokens:`"),
        ("tokens:\n  - {name: a, sha256: abc}", "64 hex digits"),
        ("tokens:\n  - {sha256: " + "a" * 64 + "}", "name: required"),
        (
            "tokens:\n  - {name: a, sha256: " + "a" * 64 + ", scope: {namespaces: [x]}}",
            "not cluster/namespace",
        ),
        (
            "tokens:\n  - {name: a, sha256: "
            + "a" * 64
            + "}\n  - {name: a, sha256: "
            + "b" * 64
            + "}",
            "used twice",
        ),
        (
            "tokens:\n  - {name: a, sha256: "
            + "a" * 64
            + "}\n  - {name: b, sha256: "
            + "a" * 64
            + "}",
            "listed twice",
        ),
        ("tokens:\n  - {name: a, token: secret, sha256: " + "a" * 64 + "}", "unknown keys token"),
        ("tokens: [", "not YAML"),
    ],
)
def test_a_bad_static_token_file_names_the_file_and_the_entry(tmp_path, text, words):
    path = write_tokens(tmp_path, text)
    with pytest.raises(AccessConfigError, match=words) as refused:
        StaticTokens.from_file(path)
    assert str(path) in str(refused.value)


def test_a_missing_static_token_file_is_a_clear_error(tmp_path):
    with pytest.raises(AccessConfigError, match="No such file"):
        StaticTokens.from_file(tmp_path / "absent.yaml")


def test_bearer_header():
    assert bearer_token("Bearer abc.def-ghi_~+/=") == "abc.def-ghi_~+/="
    assert bearer_token("bearer   tok") == "tok"
    for header, words in [
        (None, "credentials required"),
        ("", "credentials required"),
        ("Basic dXNlcjpwYXNz", "only Authorization: Bearer"),
        ("Bearer ", "empty"),
        ("Bearer a b", "not a token"),
        ("Bearer " + "a" * 20_000, "too long"),
    ]:
        with pytest.raises(Unauthenticated, match=words):
            bearer_token(header)


async def test_a_token_nobody_claims_is_unauthenticated(tmp_path):
    chain = Authenticators([StaticTokens.from_file(tokens_file(tmp_path))])
    assert (await chain.authenticate(GRAFANA)).name == "grafana"
    with pytest.raises(Unauthenticated, match="unknown token"):
        await chain.authenticate("nobody-knows-me")


async def test_rate_limit_is_a_token_bucket_per_subject(tmp_path):
    tokens = StaticTokens.from_file(tokens_file(tmp_path))
    grafana, bot = await tokens.authenticate(GRAFANA), await tokens.authenticate(BOT)
    now = [100.0]
    limit = RateLimit(rate=2.0, burst=3, clock=lambda: now[0])
    for _ in range(3):
        limit.take(grafana)
    with pytest.raises(Throttled) as refused:
        limit.take(grafana)
    assert refused.value.retry_after == pytest.approx(0.5)
    limit.take(bot)  # another subject has its own bucket
    now[0] += 0.5
    limit.take(grafana)  # refilled one
    with pytest.raises(Throttled):
        limit.take(grafana)
    RateLimit(rate=0, burst=1).take(grafana)  # off


def test_rate_limit_memory_is_bounded(tmp_path):
    from dra_mirror.service.access.scope import AccessScope
    from dra_mirror.service.access.subjects import Subject

    limit = RateLimit(rate=1.0, burst=1, subjects=100)
    for i in range(1000):
        limit.take(Subject(name=f"s{i}", method="static", scope=AccessScope.nothing()))
    assert len(limit._buckets) == 100
