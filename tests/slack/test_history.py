"""With a history database, "holding since" is when history saw the allocation start (the
world's claims carry no allocationTimestamp): the world is folded through the model's own
index (transitions included) into both the state store and a SQLite history."""

from __future__ import annotations

import httpx
from asgi_lifespan import LifespanManager

from dra_mirror.service.history.runtime import History
from dra_mirror.service.model.normalize import normalize
from dra_mirror.service.runtime.compose import compose_app
from dra_mirror.service.runtime.lifespan import opened
from dra_mirror.service.settings import Settings
from dra_mirror.service.stores.memory import MemoryStore
from dra_mirror.service.stores.protocols import ClusterStatus
from tests.schema import world

from .conftest import KIND_ORDER, LOADED_AT, QUERIED_AT, Slack, slack_settings
from .test_commands import texts


async def test_holding_since_comes_from_history(tmp_path):
    history = await History.open(f"sqlite+aiosqlite:///{tmp_path / 'history.db'}")
    store = MemoryStore()
    for cluster, build in world.WORLD.items():
        index = store.open_index(cluster)  # the index the store serves
        objects = build()
        await history.sink.cluster_started(cluster, LOADED_AT)
        for kind in KIND_ORDER:
            records = [normalize(kind, raw, cluster=cluster) for raw in objects[kind]]
            changes = index.resync(kind, records, at=LOADED_AT)
            await store.apply(changes)
            await history.sink(changes)
        await store.set_status(ClusterStatus(name=cluster, connected=True, synced=True))
    await history.writer.drained()
    app = compose_app(
        Settings(),
        store=store,
        history=opened(history),
        slack=slack_settings(),
        now=lambda: QUERIED_AT,
    )
    async with LifespanManager(app) as manager:
        transport = httpx.ASGITransport(app=manager.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://mirror") as http:
            reply = await Slack(http).command("who-holds n1/gpu-1")
    body = "\n".join(texts(reply))
    assert "team-a/shared-gpu (manual, reserved)" in body
    assert "*Holding since*\n2026-01-01 02:00 UTC (1h 0m ago)" in body
