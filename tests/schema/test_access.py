"""The access scope applies to every list and lookup; store outages are clear GraphQL errors."""

from __future__ import annotations

import httpx
from asgi_lifespan import LifespanManager

from dra_mirror.schema.reader import Scope
from dra_mirror.service.runtime.compose import compose_app
from dra_mirror.service.settings import Settings
from dra_mirror.service.stores.memory import MemoryStore
from dra_mirror.service.stores.protocols import StoreUnavailable

from .conftest import load_world


class TeamAOnly(Scope):
    """Only namespace team-a of east, plus east's cluster-scoped objects (nodes, slices…)."""

    def allows(self, cluster: str, namespace: str = "") -> bool:
        return cluster == "east" and namespace in ("", "team-a")


async def query(app, text: str) -> dict:
    async with LifespanManager(app) as manager:
        transport = httpx.ASGITransport(app=manager.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://mirror") as http:
            response = await http.post("/graphql", json={"query": text})
    assert response.status_code == 200, response.text
    return response.json()


async def test_a_narrow_scope_hides_everything_outside_it():
    store = MemoryStore()  # its own: the app's lifespan closes the store it is given
    await load_world(store)
    app = compose_app(Settings(), store=store, scope_for=lambda request: TeamAOnly())
    body = await query(
        app,
        """{
      clusters { name }
      resourceClaims(first: 100) { totalCount edges { node { namespace } } }
      pods(first: 100) { edges { node { namespace } } }
      hidden: resourceClaim(cluster: "east", namespace: "team-c", name: "idle-claim") { name }
      whoHolds(device: "gpu-0") { claim { namespace name } }
      held: whoHolds(device: "n1/gpu-1") { claim { name } pods { namespace name } }
      nodes { cluster name pods { namespace } }
      devices(first: 100) { totalCount }
    }""",
    )
    data = body["data"]
    assert data["clusters"] == [{"name": "east"}]
    assert {e["node"]["namespace"] for e in data["resourceClaims"]["edges"]} == {"team-a"}
    assert {e["node"]["namespace"] for e in data["pods"]["edges"]} == {"team-a"}
    assert data["hidden"] is None
    assert data["whoHolds"] == []  # east n2's gpu-0 is held from team-c, west is out of scope
    assert data["held"] == [
        {
            "claim": {"name": "shared-gpu"},
            "pods": [{"namespace": "team-a", "name": n} for n in ("web-0", "web-1", "web-2")],
        }
    ]
    assert [n["name"] for n in data["nodes"]] == ["n1", "n2"]
    assert {p["namespace"] for n in data["nodes"] for p in n["pods"]} == {"team-a"}
    assert data["devices"]["totalCount"] == 7


class FailingStore(MemoryStore):
    """A real MemoryStore whose backend 'goes down' on demand: the outage a Redis store raises
    as StoreUnavailable (fault injection, the rest is the real store)."""

    down = False

    async def get(self, keys):
        if self.down:
            raise StoreUnavailable("redis://127.0.0.1:6399: connection refused")
        return await super().get(keys)

    async def list(self, kind, **kwargs):
        if self.down:
            raise StoreUnavailable("redis://127.0.0.1:6399: connection refused")
        return await super().list(kind, **kwargs)

    async def select(self, selections, **kwargs):
        if self.down:
            raise StoreUnavailable("redis://127.0.0.1:6399: connection refused")
        return await super().select(selections, **kwargs)


async def test_store_outage_is_a_graphql_error_not_a_500():
    store = FailingStore()
    await load_world(store)
    app = compose_app(Settings(), store=store)
    text = '{ resourceClaims { totalCount } resourceClaim(cluster: "east", namespace: "team-a", name: "shared-gpu") { name } }'
    assert "errors" not in await query(app, text)
    store.down = True
    body = await query(app, text)
    assert body["data"] is None
    messages = {e["message"] for e in body["errors"]}
    assert messages == {"state store unavailable: redis://127.0.0.1:6399: connection refused"}
    assert {e["extensions"]["code"] for e in body["errors"]} == {"STATE_STORE_UNAVAILABLE"}
