"""The app through ASGI: health, readiness from the store, GraphQL route, GraphiQL, lifespan."""

from __future__ import annotations

import contextlib

import httpx
import orjson
from asgi_lifespan import LifespanManager

from dra_mirror.service.runtime.compose import compose_app
from dra_mirror.service.settings import HttpSettings, Settings
from dra_mirror.service.stores.memory import MemoryStore
from dra_mirror.service.stores.protocols import ClusterStatus


@contextlib.asynccontextmanager
async def client(app):
    async with LifespanManager(app) as manager:
        transport = httpx.ASGITransport(app=manager.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://mirror") as http:
            yield http


async def test_health_and_readiness_follow_the_cluster_statuses():
    store = MemoryStore()
    async with client(compose_app(Settings(), store=store)) as http:
        assert (await http.get("/healthz")).text == "ok\n"
        first = await http.get("/readyz")
        open_note = "authentication is OFF (--insecure-no-auth): anyone who reaches this port sees everything"
        assert first.status_code == 503
        assert first.headers["content-type"] == "application/json"
        assert first.json() == {
            "ready": False, "reasons": ["no cluster has reported yet"], "stale": [],
            "clusters": {}, "access": open_note,
        }  # fmt: skip
        await store.set_status(ClusterStatus(name="east", connected=True, synced=True))
        await store.set_status(ClusterStatus(name="west", error="401 Unauthorized"))
        waiting = await http.get("/readyz")
        assert waiting.status_code == 503
        assert waiting.json()["reasons"] == ["west: not synced yet; error: 401 Unauthorized"]
        assert waiting.json()["clusters"] == {"east": "synced", "west": "syncing"}
        await store.set_status(ClusterStatus(name="west", connected=True, synced=True))
        ready = await http.get("/readyz")
        assert ready.status_code == 200
        assert ready.json() == {
            "ready": True, "reasons": [], "stale": [],
            "clusters": {"east": "synced", "west": "synced"}, "access": open_note,
        }  # fmt: skip


async def test_a_cluster_without_dra_is_ready_and_says_which_versions_it_serves():
    store = MemoryStore()
    bare = ClusterStatus(name="old", connected=True, synced=True, dra_served=False,
                         dra_versions=["v1alpha3"], error="resource.k8s.io: none of …")  # fmt: skip
    await store.set_status(bare)
    await store.set_status(ClusterStatus(name="east", connected=True, synced=True,
                                         dra_served=True, dra_versions=["v1", "v1beta2"]))  # fmt: skip
    async with client(compose_app(Settings(), store=store)) as http:
        ready = await http.get("/readyz")
        assert ready.status_code == 200 and ready.json()["ready"] is True
        assert ready.json()["notes"] == [
            "old: DRA is not served (resource.k8s.io versions served: v1alpha3; the mirror "
            "reads v1, v1beta2, v1beta1): pods and nodes are mirrored",
        ]
        query = "{ clusters { name status { draServed draVersions } } }"
        answer = (await http.post("/graphql", json={"query": query})).json()
        assert answer == {"data": {"clusters": [
            {"name": "east", "status": {"draServed": True, "draVersions": ["v1", "v1beta2"]}},
            {"name": "old", "status": {"draServed": False, "draVersions": ["v1alpha3"]}},
        ]}}  # fmt: skip


async def test_graphql_route_answers_post_and_get_with_orjson():
    store = MemoryStore()
    await store.set_status(ClusterStatus(name="east", connected=True, synced=True, events=3))
    async with client(compose_app(Settings(), store=store)) as http:
        post = await http.post(
            "/graphql", json={"query": "{ clusters { name status { events } } }"}
        )
        assert post.status_code == 200  # a Route, not a Mount: no 307 redirect
        assert post.headers["content-type"] == "application/json"
        expected = {"data": {"clusters": [{"name": "east", "status": {"events": 3}}]}}
        assert post.content == orjson.dumps(expected)  # compact orjson bytes
        get = await http.get("/graphql", params={"query": "{ clusters { name } }"})
        assert get.json() == {"data": {"clusters": [{"name": "east"}]}}
        ide = await http.get("/graphql", headers={"accept": "text/html"})
        assert ide.status_code == 200 and "graphiql" in ide.text.lower()
        invalid = await http.post("/graphql", json={"query": "{ clusters { nope } }"})
        assert invalid.status_code == 200
        assert "Cannot query field 'nope'" in invalid.json()["errors"][0]["message"]


async def test_graphiql_can_be_turned_off():
    settings = Settings(http=HttpSettings(graphiql=False))
    async with client(compose_app(settings, store=MemoryStore())) as http:
        ide = await http.get("/graphql", headers={"accept": "text/html"})
        assert "graphiql" not in ide.text.lower()


async def test_lifespan_owns_resources_and_closes_the_store():
    events: list[str] = []

    @contextlib.asynccontextmanager
    async def resource(name):
        events.append(f"enter {name}")
        yield
        events.append(f"exit {name}")

    class Watchers:
        ready = True
        clusters = ["east"]
        by_name: dict = {}

        def not_ready(self):
            return []

        async def stop(self):
            events.append("stop watchers")

    async def start_watchers():
        events.append("start watchers")
        return Watchers()

    store = MemoryStore()
    await store.set_status(ClusterStatus(name="east", connected=True, synced=True))
    app = compose_app(
        Settings(),
        store=store,
        watchers=start_watchers,
        resources=[resource("sim"), resource("bus")],
    )
    async with client(app) as http:
        assert events == ["enter sim", "enter bus", "start watchers"]
        assert (await http.get("/readyz")).status_code == 200  # the cluster synced
    assert events[3:] == ["stop watchers", "exit bus", "exit sim"]
    assert await store.clusters() == []  # closed by the lifespan


async def test_history_exports_are_mounted_and_say_when_history_is_off():
    async with client(compose_app(Settings(), store=MemoryStore())) as http:
        for path in ("/export/contention.csv", "/export/idle-holders.csv"):
            response = await http.get(path, params={"from": "2026-01-01T00:00:00Z"})
            assert response.status_code == 404, (path, response.text)
