"""The demo scenario's world folded into an in-memory store, as the reactor would fold it.

The simulator builds the world (`build_world`), the model normalizes every raw object, and
`tests.feeding.feed` folds them into the store's own index. `raw` keeps the simulator's
objects: the truth the plan's answers are checked against.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from dra_mirror.service.model.normalize import normalize
from dra_mirror.service.model.records import (
    DEVICE_CLASS,
    DEVICE_TAINT_RULE,
    NODE,
    POD,
    RESOURCE_CLAIM,
    RESOURCE_CLAIM_TEMPLATE,
    RESOURCE_SLICE,
)
from dra_mirror.service.sim.scenario import build_world, load_scenario
from dra_mirror.service.stores.memory import MemoryStore
from dra_mirror.service.stores.protocols import ClusterStatus
from tests.feeding import feed

PLURALS = {
    "deviceclasses": DEVICE_CLASS,
    "resourceslices": RESOURCE_SLICE,
    "resourceclaims": RESOURCE_CLAIM,
    "resourceclaimtemplates": RESOURCE_CLAIM_TEMPLATE,
    "pods": POD,
    "nodes": NODE,
    "devicetaintrules": DEVICE_TAINT_RULE,
}


@dataclass
class World:
    store: MemoryStore
    raw: dict[str, dict[str, list[dict[str, Any]]]]  # cluster -> plural -> objects

    def held(self, cluster: str) -> set[tuple[str, str, str]]:
        """(driver, pool, device) of every allocation result in the raw claims."""
        return {
            (r["driver"], r["pool"], r["device"])
            for c in self.raw[cluster]["resourceclaims"]
            for r in (((c.get("status") or {}).get("allocation") or {}).get("devices") or {}).get(
                "results"
            )
            or []
        }


async def demo_world() -> World:
    world = build_world(load_scenario("demo"))
    store = MemoryStore()
    raw: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for name, cluster in world.stores.items():
        raw[name] = {plural: cluster.list(plural) for plural in PLURALS}
        records = [
            normalize(kind, obj, cluster=name)
            for plural, kind in PLURALS.items()
            for obj in raw[name][plural]
        ]
        await feed(store, name, upserts=records, at="2026-11-30T00:00:00Z")
        await store.set_status(ClusterStatus(name=name, connected=True, synced=True))
    return World(store=store, raw=raw)


@pytest.fixture
async def demo() -> World:
    return await demo_world()
