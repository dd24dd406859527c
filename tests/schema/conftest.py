"""The test world loaded into a real MemoryStore, and the app over it through ASGI.

Records are made by the model's own `normalize` from the raw objects in `world.py` and fed to
the store only through the index it serves (`tests.feeding`), as the reactor does. Queries go through the real
Starlette app (`httpx.AsyncClient` + `ASGITransport` inside `LifespanManager`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from asgi_lifespan import LifespanManager

from dra_mirror.service.model.normalize import normalize
from dra_mirror.service.runtime.compose import compose_app
from dra_mirror.service.settings import GraphQLSettings, Settings
from dra_mirror.service.stores.memory import MemoryStore
from dra_mirror.service.stores.protocols import ClusterStatus
from tests.feeding import feed

from . import world

LOADED_AT = "2026-01-01T02:00:00Z"
QUERIED_AT = datetime(2026, 1, 1, 3, 0, 0, tzinfo=UTC)  # the clock the app answers with
KIND_ORDER = (
    "Node",
    "DeviceClass",
    "ResourceSlice",
    "ResourceClaimTemplate",
    "ResourceClaim",
    "Pod",
)


async def load_world(store: MemoryStore) -> None:
    for cluster, build in world.WORLD.items():
        objects = build()
        upserts = [
            normalize(kind, raw, cluster=cluster) for kind in KIND_ORDER for raw in objects[kind]
        ]
        await feed(store, cluster, upserts=upserts, at=LOADED_AT)
        await store.set_status(
            ClusterStatus(
                name=cluster,
                connected=True,
                synced=True,
                api_version="v1",
                last_event_at=LOADED_AT,
                events=len(upserts),
            )
        )


@pytest.fixture(scope="session")
async def world_store() -> MemoryStore:
    store = MemoryStore()
    await load_world(store)
    return store


class GraphQLClient:
    def __init__(self, http: httpx.AsyncClient) -> None:
        self.http = http

    async def raw(self, query: str, **variables: Any) -> dict[str, Any]:
        response = await self.http.post("/graphql", json={"query": query, "variables": variables})
        assert response.status_code == 200, response.text
        return response.json()

    async def __call__(self, query: str, **variables: Any) -> dict[str, Any]:
        body = await self.raw(query, **variables)
        assert "errors" not in body, body["errors"]
        return body["data"]


@pytest.fixture(scope="session")
async def gql(world_store: MemoryStore) -> AsyncIterator[GraphQLClient]:
    settings = Settings(graphql=GraphQLSettings(max_page_size=5, default_page_size=3))
    app = compose_app(settings, store=world_store, now=lambda: QUERIED_AT)
    async with LifespanManager(app) as manager:
        transport = httpx.ASGITransport(app=manager.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://mirror") as http:
            yield GraphQLClient(http)
