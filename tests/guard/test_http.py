"""Abuse from outside, through the real app: bodies, media types, limits, the budget, masking,
authentication and rate limits. Every refusal is a clear 4xx, never a 500."""

from __future__ import annotations

import httpx
import pytest
from asgi_lifespan import LifespanManager

from dra_mirror.service.access.config import AccessConfig
from dra_mirror.service.access.control import AccessControl
from dra_mirror.service.access.scope import AccessScope
from dra_mirror.service.access.static import StaticTokens, token_hash
from dra_mirror.service.runtime.compose import compose_app
from dra_mirror.service.runtime.lifespan import opened
from dra_mirror.service.settings import GraphQLSettings, Settings
from dra_mirror.service.stores.memory import MemoryStore

from ..schema.conftest import load_world

GRAPHQL_RESPONSE = "application/graphql-response+json"


async def app_client(store, *, access=None, **limits):
    settings = Settings(graphql=GraphQLSettings(**limits))
    app = compose_app(settings, store=store, access=opened(access) if access else None)
    manager = LifespanManager(app)
    await manager.__aenter__()
    http = httpx.AsyncClient(transport=httpx.ASGITransport(app=manager.app), base_url="http://m")
    return manager, http


@pytest.fixture
async def store():
    found = MemoryStore()
    await load_world(found)
    return found


@pytest.fixture
async def http(store):
    manager, client = await app_client(
        store, max_aliases=5, max_depth=6, max_tokens=400, max_document_bytes=4000, max_batch=2
    )
    yield client
    await client.aclose()
    await manager.__aexit__(None, None, None)


@pytest.mark.parametrize(
    "body",
    [b"null", b"42", b'"query"', b"[" * 5000 + b"]" * 5000, b"[[1]]", b"[]", b"{", b"\xff"],
)
async def test_bodies_that_are_not_graphql_requests_are_400(http, body):
    answer = await http.post("/graphql", content=body, headers={"content-type": "application/json"})
    assert answer.status_code == 400, answer.text


async def test_batches_are_bounded(http):
    one = {"query": "{ clusters { name } }"}
    assert (await http.post("/graphql", json=[one, one])).status_code == 200
    answer = await http.post("/graphql", json=[one, one, one])
    assert answer.status_code == 400 and "at most 2" in answer.text


async def test_a_huge_body_is_413_before_it_is_read(http):
    answer = await http.post(
        "/graphql", content=b"x" * 2_000_000, headers={"content-type": "application/json"}
    )
    assert answer.status_code == 413 and "BODY_TOO_LARGE" in answer.text


async def test_graphql_response_json_media_type_and_status_codes(http):
    accept = {"accept": GRAPHQL_RESPONSE}
    ok = await http.post("/graphql", json={"query": "{ clusters { name } }"}, headers=accept)
    assert ok.status_code == 200 and ok.headers["content-type"] == GRAPHQL_RESPONSE
    invalid = await http.post("/graphql", json={"query": "{ nope }"}, headers=accept)
    assert invalid.status_code == 400 and "data" not in invalid.json()
    syntax = await http.post("/graphql", json={"query": "{"}, headers=accept)
    assert syntax.status_code == 400
    legacy = await http.post("/graphql", json={"query": "{ nope }"})
    assert legacy.status_code == 200 and legacy.headers["content-type"] == "application/json"
    refused = await http.post(
        "/graphql", json={"query": "{ clusters { name } }"}, headers={"accept": "text/csv"}
    )
    assert refused.status_code == 406


async def test_document_limits(http):
    def errors(answer):
        assert answer.status_code == 200, answer.text
        return [e["extensions"].get("code") for e in answer.json()["errors"]]

    deep = "{ devices { nodes { node { devices { node { devices { node { name } } } } } } } }"
    assert errors(await http.post("/graphql", json={"query": deep})) == ["TOO_DEEP"]
    aliased = (
        "query { ...F } fragment F on Query { "
        + " ".join(f"a{i}: clusters {{ name }}" for i in range(3))
        + " } "
    )
    twice = aliased.replace("query { ...F }", "query { ...F ...G } fragment G on Query { ...F }")
    assert errors(await http.post("/graphql", json={"query": twice})) == ["TOO_MANY_ALIASES"]
    many = "{ " + " ".join(f"a{i}: __typename" for i in range(140)) + " }"
    assert (
        "Document contains more than 400 tokens"
        in (await http.post("/graphql", json={"query": many})).text
    )
    big = "{ clusters { name } }" + " " * 5000
    assert errors(await http.post("/graphql", json={"query": big})) == ["DOCUMENT_TOO_LARGE"]


async def test_fragments_spread_twice_per_level_are_measured_once(store):
    manager, http = await app_client(store, max_tokens=100_000, max_document_bytes=100_000)
    try:
        levels = 60  # 2**60 paths through the fragments
        frags = "".join(
            f"fragment F{i} on Query {{ ...F{i + 1} ...F{i + 1} }} " for i in range(levels)
        )
        doc = (
            "query { ...F0 } " + frags + f"fragment F{levels} on Query {{ a: clusters {{ name }} }}"
        )
        answer = await http.post("/graphql", json={"query": doc})
        assert answer.json()["errors"][0]["extensions"]["code"] == "TOO_MANY_ALIASES"
    finally:
        await http.aclose()
        await manager.__aexit__(None, None, None)


async def test_cost_and_budget(store):
    manager, http = await app_client(store, max_cost=500, max_resolved_fields=40)
    try:
        costly = "{ deviceClasses { devices { allocations { claim { consumers { name } } } } } }"
        answer = (await http.post("/graphql", json={"query": costly})).json()
        assert answer["errors"][0]["extensions"]["code"] == "TOO_COSTLY"
        wide = (
            "{ devices(first: 20) { nodes { name driver pool cluster uuid shareable nodeName } } }"
        )
        answer = (await http.post("/graphql", json={"query": wide})).json()
        codes = {e["extensions"]["code"] for e in answer["errors"]}
        assert codes == {"BUDGET_EXCEEDED"}, answer
    finally:
        await http.aclose()
        await manager.__aexit__(None, None, None)


async def test_introspection_can_be_switched_off(store):
    manager, http = await app_client(store, introspection=False)
    try:
        answer = await http.post("/graphql", json={"query": "{ __schema { types { name } } }"})
        assert "introspection" in answer.text.lower() and "errors" in answer.json()
        ok = await http.post("/graphql", json={"query": "{ clusters { name } }"})
        assert "errors" not in ok.json()
    finally:
        await http.aclose()
        await manager.__aexit__(None, None, None)


class FailingStore(MemoryStore):
    async def clusters(self):
        raise RuntimeError("redis://:s3cret-pass@10.0.0.7:6379 exploded with token=abc")


async def test_our_failures_are_masked_and_logged_with_their_traceback(caplog):
    import logging

    manager, http = await app_client(FailingStore())
    try:
        with caplog.at_level(logging.INFO, logger="dra_mirror.graphql"):
            answer = await http.post("/graphql", json={"query": "{ clusters { name } }"})
            bad = await http.post("/graphql", json={"query": "{ nope }"})
        assert answer.status_code == 200
        error = answer.json()["errors"][0]
        assert error["message"] == "internal error (see the mirror's log)"
        assert "s3cret" not in answer.text
        failure = [r for r in caplog.records if r.levelno == logging.ERROR]
        assert failure and failure[0].exc_info is not None
        assert "s3cret-pass" not in failure[0].getMessage()
        mistakes = [r for r in caplog.records if r.levelno == logging.INFO]
        assert any("nope" in r.getMessage() for r in mistakes)
        assert all(r.exc_info is None for r in mistakes)
        assert bad.status_code == 200
    finally:
        await http.aclose()
        await manager.__aexit__(None, None, None)


def test_redaction():
    from dra_mirror.schema.guard.errors import redact

    assert redact("redis://:pw@host:6379/0 down") == "redis://***@host:6379/0 down"
    assert redact("postgresql+asyncpg://u:p@db/x") == "postgresql+asyncpg://***@db/x"
    assert redact("Authorization: Bearer abc.def") == "Authorization: Bearer ***"
    assert redact("token: abcdef, password=hunter2") == "token: ***, password=***"


async def test_authentication_scopes_and_rate_limits(store, tmp_path):
    tokens = tmp_path / "tokens.yaml"
    tokens.write_text(f"""tokens:
  - {{name: team-a, sha256: {token_hash("team-a-token")}, scope: {{namespaces: [east/team-a]}}}}
  - {{name: prom, sha256: {token_hash("prom-token")}, scope: {{namespaces: ["*/*"]}}}}
""")
    config = AccessConfig(static_tokens=str(tokens), rate_limit=1.0, rate_burst=3)
    control = AccessControl(config, authenticators=[StaticTokens.from_file(tokens)])
    manager, http = await app_client(store, access=control)
    try:
        query = {"query": "{ resourceClaims(first: 100) { totalCount nodes { namespace } } }"}
        anonymous = await http.post("/graphql", json=query)
        assert anonymous.status_code == 401
        assert anonymous.headers["www-authenticate"].startswith("Bearer")
        assert anonymous.json()["errors"][0]["extensions"]["code"] == "UNAUTHENTICATED"
        assert (
            await http.post("/graphql", json=query, headers={"authorization": "Bearer wrong"})
        ).status_code == 401
        team = {"authorization": "Bearer team-a-token"}
        data = (await http.post("/graphql", json=query, headers=team)).json()["data"]
        spaces = {n["namespace"] for n in data["resourceClaims"]["nodes"]}
        assert spaces == {"team-a"} and data["resourceClaims"]["totalCount"] > 0
        scraped = await http.get("/metrics", headers=team)  # only what team-a may see
        assert scraped.status_code == 200 and 'namespace="team-a"' in scraped.text
        assert 'namespace="team-b"' not in scraped.text
        assert (
            await http.get("/metrics", headers={"authorization": "Bearer prom-token"})
        ).status_code == 200
        assert (await http.get("/healthz")).status_code == 200
        for _ in range(3):
            await http.post("/graphql", json=query, headers=team)
        limited = await http.post("/graphql", json=query, headers=team)
        assert limited.status_code == 429 and int(limited.headers["retry-after"]) >= 1
    finally:
        await http.aclose()
        await manager.__aexit__(None, None, None)


def test_scope_type_answers_like_the_reader_expects():
    scope = AccessScope.parse(["east/team-a"])
    assert scope.allows("east", "") and not scope.allows("east", "team-c")
