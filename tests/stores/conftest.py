"""The state stores under contract test, by name.

`STORE_FACTORIES` maps a name to an async factory taking the pytest `request` (so a factory
can ask for the fixtures it needs, e.g. `request.getfixturevalue("redis_url")`) and returning
a fresh, EMPTY store. The `store` fixture runs every contract test once per entry: to put a
new store under contract, add one entry here.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from dra_mirror.service.stores.memory import MemoryStore
from dra_mirror.service.stores.protocols import StateStore


async def memory_store(request: pytest.FixtureRequest) -> StateStore:
    return MemoryStore()


async def redis_store(request: pytest.FixtureRequest) -> StateStore:
    # A fresh key prefix per test: an empty store on the suite's shared redis-server.
    from dra_mirror.service.stores.redis import RedisStore

    url = request.getfixturevalue("redis_url")
    return RedisStore.from_url(url, prefix=f"test-{uuid.uuid4().hex[:12]}")


async def redis_cluster_store(request: pytest.FixtureRequest) -> StateStore:
    # The same store on a real Redis Cluster (three masters): every cluster's keys in its slot.
    from dra_mirror.service.stores.redis import RedisStore

    cluster = request.getfixturevalue("redis_cluster")
    return RedisStore.from_url(cluster.url, prefix=f"test-{uuid.uuid4().hex[:12]}")


STORE_FACTORIES: dict[str, Callable[[pytest.FixtureRequest], Awaitable[StateStore]]] = {
    "memory": memory_store,
    "redis": redis_store,
    "redis-cluster": redis_cluster_store,
}


# Stores that need a server carry its marker (`-m "not redis"` runs without one).
_MARKS = {"redis": pytest.mark.redis, "redis-cluster": pytest.mark.redis_cluster}


@pytest.fixture(
    params=[pytest.param(name, marks=_MARKS.get(name, ())) for name in sorted(STORE_FACTORIES)]
)
async def store(request: pytest.FixtureRequest) -> AsyncIterator[StateStore]:
    made = await STORE_FACTORIES[request.param](request)
    try:
        yield made
    finally:
        await made.close()
