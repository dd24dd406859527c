"""The demo scenario's world, folded into an in-memory store and, transitions included, into a
SQLite history, as the reactor and the history sink would fold them. `raw` keeps the
simulator's objects: the truth every answer is checked against."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dra_mirror.service.history.runtime import History
from dra_mirror.service.model.normalize import normalize
from dra_mirror.service.model.records import SliceRecord
from dra_mirror.service.sim.scenario import build_world, load_scenario
from dra_mirror.service.stores.memory import MemoryStore
from dra_mirror.service.stores.protocols import ClusterStatus
from tests.feeding import feed
from tests.plan.conftest import PLURALS

LOADED_AT = "2026-11-30T00:00:00Z"


@dataclass
class HistoryWorld:
    store: MemoryStore
    history: History
    raw: dict[str, dict[str, list[dict[str, Any]]]]  # cluster -> plural -> objects

    def objects(self, cluster: str) -> list[dict[str, Any]]:
        return [o for objects in self.raw[cluster].values() for o in objects]


async def demo_with_history(directory: Path, *, slices_later: str | None = None) -> HistoryWorld:
    """`slices_later`: the ResourceSlices come after everything else — in the same batch
    ("batch") or in a batch of their own ("apart"), as a watch may list them."""
    history = await History.open(f"sqlite+aiosqlite:///{directory / 'history.db'}")
    world = build_world(load_scenario("demo"))
    store = MemoryStore()
    raw: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for name, cluster in world.stores.items():
        raw[name] = {plural: cluster.list(plural) for plural in PLURALS}
        await history.sink.cluster_started(name, LOADED_AT)
        records = [
            normalize(kind, obj, cluster=name)
            for plural, kind in PLURALS.items()
            for obj in raw[name][plural]
        ]
        batches = [records]
        if slices_later is not None:
            slices = [r for r in records if isinstance(r, SliceRecord)]
            rest = [r for r in records if not isinstance(r, SliceRecord)]
            batches = [rest + slices] if slices_later == "batch" else [rest, slices]
        for batch in batches:
            await history.sink(await feed(store, name, upserts=batch, at=LOADED_AT))
        await store.set_status(ClusterStatus(name=name, connected=True, synced=True))
    await history.writer.drained()
    return HistoryWorld(store=store, history=history, raw=raw)
