"""`serve` and `watch` build their app with the garbage collector held back (`SyncGc`) and
move what start-up built out of its sight once the app has started; the thresholds come back
when no watcher holds them raised."""

from __future__ import annotations

import asyncio
import dataclasses
import gc
from typing import Any

import pytest
from starlette.applications import Starlette

from dra_mirror.service.cli import main
from dra_mirror.service.runtime import mirror, server
from dra_mirror.service.settings import Settings

PATIENCE = 30.0  # seconds before a hung server fails the test (not a speed check)


@pytest.fixture
def collector() -> Any:
    """The collector's thresholds and frozen objects as they were, restored afterwards."""
    before = gc.get_threshold()
    gc.unfreeze()
    yield before
    gc.unfreeze()
    gc.set_threshold(*before)


async def test_serve_builds_its_app_with_the_collector_held_back(
    monkeypatch: pytest.MonkeyPatch, collector: tuple[int, ...]
) -> None:
    seen: dict[str, Any] = {}
    servers: list[server.DeadlineServer] = []

    def app_of(settings: Settings, **_: Any) -> Starlette:
        seen["threshold while building"] = gc.get_threshold()
        seen["frozen while building"] = gc.get_freeze_count()
        return Starlette()

    class Started(server.DeadlineServer):
        async def startup(self, sockets: Any = None) -> None:
            await super().startup(sockets)
            servers.append(self)

    monkeypatch.setattr(mirror, "mirror_app", app_of)
    monkeypatch.setattr(server, "DeadlineServer", Started)
    settings = Settings()
    settings = dataclasses.replace(settings, http=dataclasses.replace(settings.http, port=0))
    serving = asyncio.create_task(main._serve(settings, watch=False))
    try:
        async with asyncio.timeout(PATIENCE):
            while not (servers and servers[0].started):
                assert not serving.done(), serving.result()
                await asyncio.sleep(0.01)
            assert seen["threshold while building"][0] > collector[0]
            assert seen["frozen while building"] == 0
            while not gc.get_freeze_count():  # frozen once the server said it started
                assert not serving.done(), serving.result()
                await asyncio.sleep(0.01)
        assert gc.get_threshold() == collector  # no watcher holds it raised
    finally:
        if servers:
            servers[0].should_exit = True
        async with asyncio.timeout(PATIENCE):
            await serving
