"""Documents registered ahead of time: read from a file or directory at start, checked against
the schema, run by hash and by text; a server that runs only them refuses every other document
and lets no client register one."""

from __future__ import annotations

import hashlib
from pathlib import Path

import httpx
import orjson
import pytest
from asgi_lifespan import LifespanManager
from click.testing import CliRunner

from dra_mirror.schema import build_schema
from dra_mirror.service.cli.main import main
from dra_mirror.service.http.registered import (
    RegisteredDocumentsError,
    own_documents,
    problem,
    read_documents,
)
from dra_mirror.service.runtime.compose import compose_app
from dra_mirror.service.settings import GraphQLSettings, Settings
from dra_mirror.service.stores.memory import MemoryStore

from ..schema.conftest import load_world

NAMES = "query Names { clusters { name } }\n"
FREE = "query Free($first: Int) { devices(status: FREE, first: $first) { totalCount } }"
OTHER = "{ clusters { name counts { devices } } }"


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def persisted(text: str) -> dict:
    return {"persistedQuery": {"version": 1, "sha256Hash": sha(text)}}


@pytest.fixture
def documents(tmp_path: Path) -> Path:
    folder = tmp_path / "documents"
    (folder / "dashboard").mkdir(parents=True)
    (folder / "dashboard" / "names.graphql").write_text(NAMES)
    manifest = {
        "format": "apollo-persisted-query-manifest",
        "version": 1,
        "operations": [{"id": sha(FREE), "name": "Free", "type": "query", "body": FREE}],
    }
    (folder / "bot.json").write_bytes(orjson.dumps(manifest))
    return folder


def app_with(folder: Path, *, refuse: bool):
    settings = Settings(
        graphql=GraphQLSettings(refuse_unregistered=refuse, persisted_documents=str(folder))
    )
    return compose_app(settings, store=MemoryStore())


async def post(http: httpx.AsyncClient, **body) -> tuple[int, dict]:
    response = await http.post("/graphql", json=body)
    return response.status_code, response.json()


def code(body: dict) -> str | None:
    errors = body.get("errors") or [{}]
    return (errors[0].get("extensions") or {}).get("code")


async def test_only_registered_documents_run_by_hash_or_text_and_clients_cannot_register(
    documents: Path,
) -> None:
    app = app_with(documents, refuse=True)
    async with LifespanManager(app) as manager:
        await load_world(app.state.mirror.store)
        transport = httpx.ASGITransport(app=manager.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://m") as http:
            # a registered document runs by its hash alone, by its text, and by both
            status, body = await post(http, extensions=persisted(NAMES))
            assert status == 200 and body["data"]["clusters"], body
            status, body = await post(http, query=NAMES)
            assert status == 200 and body["data"]["clusters"], body
            status, body = await post(
                http, query=FREE, variables={"first": 1}, extensions=persisted(FREE)
            )
            assert status == 200 and body["data"]["devices"]["totalCount"] > 0, body
            response = await http.get(
                "/graphql", params={"extensions": orjson.dumps(persisted(NAMES)).decode()}
            )
            assert response.status_code == 200 and response.json()["data"]["clusters"]
            # any other document is refused, by text or by hash
            status, body = await post(http, query=OTHER)
            assert code(body) == "PERSISTED_QUERY_NOT_FOUND" and not body.get("data"), body
            status, body = await post(http, extensions=persisted(OTHER))
            assert status == 200 and code(body) == "PERSISTED_QUERY_NOT_FOUND", body
            # a client sending the text with its hash (APQ's registration) is refused, and the
            # hash stays unknown afterwards
            status, body = await post(http, query=OTHER, extensions=persisted(OTHER))
            assert code(body) == "PERSISTED_QUERY_NOT_FOUND" and not body.get("data"), body
            status, body = await post(http, extensions=persisted(OTHER))
            assert code(body) == "PERSISTED_QUERY_NOT_FOUND", body


async def test_the_screens_and_the_command_lines_documents_are_registered(documents) -> None:
    app = app_with(documents, refuse=True)
    own = own_documents()
    assert any(d.source.startswith("screens: main.js") for d in own)
    async with LifespanManager(app) as manager:
        await load_world(app.state.mirror.store)
        transport = httpx.ASGITransport(app=manager.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://m") as http:
            clusters = next(d for d in own if d.source == "screens: main.js:CLUSTERS")
            status, body = await post(http, extensions=persisted(clusters.text))
            assert status == 200 and body["data"]["clusters"], body
            free = next(d for d in own if d.source == "questions: Free")
            status, body = await post(http, query=free.text, variables={"first": 2})
            assert status == 200 and body["data"]["freeDevices"]["devices"], body


async def test_without_refusal_clients_still_register_their_documents(documents) -> None:
    app = app_with(documents, refuse=False)
    async with LifespanManager(app) as manager:
        transport = httpx.ASGITransport(app=manager.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://m") as http:
            status, body = await post(http, extensions=persisted(OTHER))
            assert code(body) == "PERSISTED_QUERY_NOT_FOUND"
            status, body = await post(http, query=OTHER, extensions=persisted(OTHER))
            assert status == 200 and "errors" not in body, body
            status, body = await post(http, extensions=persisted(OTHER))
            assert status == 200 and "errors" not in body, body  # learned
            status, body = await post(http, extensions=persisted(NAMES))
            assert status == 200 and "errors" not in body, body  # registered ahead


def test_every_own_document_runs_on_this_schema() -> None:
    schema = build_schema()._schema
    settings = GraphQLSettings()
    problems = {d.source: problem(schema, d.text, settings) for d in own_documents()}
    assert {s: p for s, p in problems.items() if p is not None} == {}
    assert len({d.sha256 for d in own_documents()}) > 40  # screens and questions


@pytest.mark.parametrize(
    ("name", "content", "says"),
    [
        ("broken.graphql", "query { clusters { name }", "Syntax Error"),
        ("unknown.graphql", "{ clusters { nope } }", "Cannot query field 'nope'"),
        ("deep.graphql", "{ nodes " + "{ devices { node " * 7 + "{ name" + " }" * 16, "too deep"),
        ("ids.json", orjson.dumps({"0" * 64: NAMES}).decode(), "is not the SHA-256"),
        ("notes.txt", "hello", "expected a .graphql"),
        ("empty.gql", "  \n", "empty"),
    ],
)
def test_a_bad_document_stops_the_start_naming_its_file(
    tmp_path: Path, name: str, content: str, says: str
) -> None:
    (tmp_path / name).write_text(content)
    with pytest.raises(RegisteredDocumentsError) as raised:
        app_with(tmp_path / name if name.endswith(".txt") else tmp_path, refuse=True)
    assert name in str(raised.value) and says in str(raised.value), raised.value


def test_the_commands_check_refuses_a_bad_document_before_anything_starts(
    tmp_path: Path, documents: Path
) -> None:
    """`serve`'s configuration check reads and checks the documents as the app would."""
    from dra_mirror.service.cli.preflight import ConfigurationProblem, check_documents

    check_documents(Settings(graphql=GraphQLSettings(persisted_documents=str(documents))))
    (tmp_path / "unknown.graphql").write_text("{ clusters { nope } }")
    bad = Settings(graphql=GraphQLSettings(persisted_documents=str(tmp_path / "unknown.graphql")))
    with pytest.raises(ConfigurationProblem) as raised:
        check_documents(bad)
    assert "unknown.graphql" in str(raised.value), raised.value
    assert "Cannot query field 'nope'" in str(raised.value), raised.value


async def test_a_bad_document_stops_the_start_when_the_schema_is_built_in_the_lifespan(
    tmp_path: Path,
) -> None:
    (tmp_path / "unknown.graphql").write_text("{ clusters { nope } }")
    settings = Settings(
        graphql=GraphQLSettings(refuse_unregistered=True, persisted_documents=str(tmp_path))
    )
    app = compose_app(settings, store=MemoryStore(), graphql_in_lifespan=True)  # serve's way
    with pytest.raises(RegisteredDocumentsError) as raised:
        async with LifespanManager(app):
            pass
    assert "unknown.graphql" in str(raised.value) and "Cannot query field 'nope'" in str(
        raised.value
    )
    assert app.state.mirror.startup_error is raised.value  # what `serve` says when it stops


def test_a_map_of_hashes_to_texts_is_read_too(tmp_path: Path) -> None:
    (tmp_path / "docs.json").write_bytes(orjson.dumps({sha(NAMES): NAMES, sha(FREE): FREE}))
    assert [d.sha256 for d in read_documents([tmp_path])] == [sha(NAMES), sha(FREE)]


def test_the_command_prints_the_hash_a_client_sends(documents: Path) -> None:
    result = CliRunner().invoke(main, ["persisted-queries", str(documents)])
    assert result.exit_code == 0, result.output
    lines = [line.split("  ") for line in result.output.splitlines()]
    assert [(h, n) for h, n, _ in lines] == [(sha(FREE), "Free"), (sha(NAMES), "Names")]
    manifest = orjson.loads(
        CliRunner().invoke(main, ["persisted-queries", "--json", str(documents)]).output
    )
    assert {o["id"]: o["body"] for o in manifest["operations"]} == {sha(FREE): FREE,
                                                                     sha(NAMES): NAMES}  # fmt: skip
    (documents / "broken.graphql").write_text("{ clusters { nope } }")
    result = CliRunner().invoke(main, ["persisted-queries", str(documents)])
    assert result.exit_code == 2 and "broken.graphql" in result.output, result.output


async def test_slack_questions_run_on_a_server_refusing_other_documents() -> None:
    from ..slack.conftest import Slack, slack_settings

    settings = Settings(graphql=GraphQLSettings(refuse_unregistered=True))
    app = compose_app(settings, store=MemoryStore(), slack=slack_settings())
    async with LifespanManager(app) as manager:
        await load_world(app.state.mirror.store)
        transport = httpx.ASGITransport(app=manager.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://m") as http:
            for text in ("free", "explain team-a/claim-1 east", "who-holds n1/gpu-1"):
                reply = await Slack(http).command(text)
                assert "PERSISTED_QUERY" not in str(reply) and "registered" not in str(reply)
                assert "warning" not in str(reply), (text, reply)
