"""/graphql over HTTP: the short path answers as strawberry's view does; persisted queries."""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import AsyncIterator

import httpx
import orjson
import pytest
from asgi_lifespan import LifespanManager

from dra_mirror.service.runtime.compose import compose_app
from dra_mirror.service.settings import Settings
from dra_mirror.service.stores.memory import MemoryStore
from dra_mirror.service.stores.protocols import ClusterStatus, StoreUnavailable
from tests.schema.conftest import load_world

WHO = (
    "query Who($d: String!) { whoHolds(device: $d) { cluster claim { name state } pods { name } } }"
)


def answer(response: httpx.Response) -> tuple[int, object]:
    """Status and body (parsed when JSON: key order is the encoder's, not the contract)."""
    if response.headers.get("content-type") == "application/json":
        return response.status_code, response.json()
    return response.status_code, response.text


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@contextlib.asynccontextmanager
async def client(
    store: MemoryStore, *, short_path: bool = True
) -> AsyncIterator[httpx.AsyncClient]:
    app = compose_app(Settings(), store=store)
    view = app.router.routes[0].endpoint
    assert view.short_path  # the mirror's schema carries only the caches the path replaces
    view.short_path = short_path
    async with LifespanManager(app) as manager:
        transport = httpx.ASGITransport(app=manager.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://mirror") as http:
            yield http


@pytest.fixture
async def store() -> MemoryStore:
    store = MemoryStore()
    await load_world(store)
    return store


REQUESTS = [
    {"query": "{ clusters { name status { synced } } }"},
    {"query": WHO, "variables": {"d": "gpu-0"}, "operationName": "Who"},
    {"query": "{ nodes { name devices { name status allocations { claim { name } } } } }"},
    {"query": "{ clusters { nope } }"},  # validation error
    {"query": "{ clusters { name "},  # syntax error
    {"query": WHO, "variables": {"d": 7}},  # variable of the wrong type
    {"query": WHO},  # missing variable
    {"query": "query A { clusters { name } } query B { nodes { name } }"},  # which one?
    {"query": "query A { clusters { name } }", "operationName": "B"},  # no such operation
    {"query": 'subscription { claimEvents(cluster: "east") { type } }'},  # not over HTTP
    {"query": 5},
    {"variables": {}},
    [{"query": "{ clusters { name } }"}],  # a batch
]


async def test_the_short_path_answers_every_request_as_strawberry_does(store: MemoryStore) -> None:
    async with client(store) as fast, client(store, short_path=False) as plain:
        for request in REQUESTS:
            body = orjson.dumps(request)
            headers = {"content-type": "application/json"}
            ours = await fast.post("/graphql", content=body, headers=headers)
            theirs = await plain.post("/graphql", content=body, headers=headers)
            assert answer(ours) == answer(theirs), request
        for params in (
            {"query": "{ clusters { name } }"},
            {"query": WHO, "variables": '{"d": "gpu-0"}'},
        ):
            ours, theirs = (
                await fast.get("/graphql", params=params),
                await plain.get("/graphql", params=params),
            )
            assert answer(ours) == answer(theirs), params
        bad_json = await fast.post(
            "/graphql", content=b"{", headers={"content-type": "application/json"}
        )
        assert bad_json.status_code == 400
        ide = await fast.get("/graphql", headers={"accept": "text/html"})
        assert ide.status_code == 200 and "graphiql" in ide.text.lower()


async def test_an_accept_header_allowing_no_answer_is_a_406_on_both_paths(
    store: MemoryStore,
) -> None:
    async with client(store) as fast, client(store, short_path=False) as plain:
        for accept in ("application/json-patch+json", "application/jsonx, text/*;q=0.1"):
            for http in (fast, plain):
                refused = await http.post(
                    "/graphql", json={"query": "{ clusters { name } }"}, headers={"accept": accept}
                )
                assert refused.status_code == 406, (accept, refused.text)
        taken = await fast.post("/graphql", json={"query": "{ clusters { name } }"},
                                headers={"accept": "application/json;q=0.9, */*;q=0.1"})  # fmt: skip
        assert taken.status_code == 200 and taken.json()["data"]["clusters"]


async def test_resolver_errors_answer_as_strawberry_does() -> None:
    class Down(MemoryStore):
        async def clusters(self):  # type: ignore[override]
            raise StoreUnavailable("redis is down")

    async with client(Down()) as fast, client(Down(), short_path=False) as plain:
        ours = await fast.post("/graphql", json={"query": "{ clusters { name } }"})
        theirs = await plain.post("/graphql", json={"query": "{ clusters { name } }"})
    assert answer(ours) == answer(theirs)
    assert "unavailable" in ours.json()["errors"][0]["message"]


async def test_persisted_queries_follow_apollos_protocol(store: MemoryStore) -> None:
    extensions = {"persistedQuery": {"version": 1, "sha256Hash": sha(WHO)}}
    variables = {"d": "gpu-0"}
    async with client(store) as http:
        unknown = await http.post(
            "/graphql", json={"extensions": extensions, "variables": variables}
        )
        assert unknown.status_code == 200
        assert unknown.headers["cache-control"] == "private, no-cache, must-revalidate"
        assert unknown.json() == {
            "errors": [
                {
                    "message": "PersistedQueryNotFound",
                    "extensions": {"code": "PERSISTED_QUERY_NOT_FOUND"},
                }
            ]
        }
        full = await http.post(
            "/graphql", json={"query": WHO, "extensions": extensions, "variables": variables}
        )
        expected = (await http.post("/graphql", json={"query": WHO, "variables": variables})).json()
        assert full.json() == expected and "errors" not in expected
        by_hash = await http.post(
            "/graphql", json={"extensions": extensions, "variables": variables}
        )
        assert by_hash.json() == expected
        over_get = await http.get(
            "/graphql",
            params={"extensions": orjson.dumps(extensions).decode(), "variables": '{"d": "gpu-0"}'},
        )
        assert over_get.json() == expected

        wrong = {"persistedQuery": {"version": 1, "sha256Hash": sha("{ nodes { name } }")}}
        mismatch = await http.post("/graphql", json={"query": WHO, "extensions": wrong})
        assert mismatch.status_code == 400
        assert mismatch.json()["errors"][0]["message"] == "provided sha does not match query"
        version = await http.post(
            "/graphql", json={"query": WHO, "extensions": {"persistedQuery": {"version": 2}}}
        )
        assert version.status_code == 400
        assert version.json()["errors"][0]["message"] == "Unsupported persisted query version"

        broken = "{ clusters { nope } }"
        registered = {"persistedQuery": {"version": 1, "sha256Hash": sha(broken)}}
        failed = await http.post("/graphql", json={"query": broken, "extensions": registered})
        assert failed.json()["errors"][0]["message"].startswith("Cannot query field 'nope'")
        again = await http.post("/graphql", json={"extensions": registered})
        assert again.json()["errors"][0]["message"] == "PersistedQueryNotFound"  # not kept


async def test_a_persisted_subscription_is_handed_to_strawberry_with_its_text(
    store: MemoryStore,
) -> None:
    text = 'subscription { claimEvents(cluster: "east") { type } }'
    extensions = {"persistedQuery": {"version": 1, "sha256Hash": sha(text)}}
    async with client(store) as http, client(store, short_path=False) as plain:
        ours = await http.post("/graphql", json={"query": text, "extensions": extensions})
        theirs = await plain.post("/graphql", json={"query": text, "extensions": extensions})
    assert answer(ours) == answer(theirs)


async def test_the_cluster_status_answers_through_the_short_path() -> None:
    store = MemoryStore()
    await store.set_status(ClusterStatus(name="east", connected=True, synced=True, events=3))
    async with client(store) as http:
        answer = await http.post(
            "/graphql", json={"query": "{ clusters { name status { events } } }"}
        )
    assert answer.content == orjson.dumps(
        {"data": {"clusters": [{"name": "east", "status": {"events": 3}}]}}
    )
