"""The alert engine evaluates only clusters that have synced: a cluster caught between the
LIST of its claims and that of its pods looks as if every allocated claim were idle."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

from dra_mirror.service.alerts.config import parse
from dra_mirror.service.alerts.engine import AlertEngine
from dra_mirror.service.model.kinds import KINDS
from dra_mirror.service.model.normalize import normalize
from dra_mirror.service.model.records import POD
from dra_mirror.service.runtime.mirror import synced_indexes
from dra_mirror.service.sim.scenario import build_world, load_scenario
from dra_mirror.service.stores.memory import MemoryStore
from tests.feeding import feed, index_of
from tests.plan.conftest import PLURALS


async def _listed_up_to_pods() -> MemoryStore:
    """East folded as the reactor lists it (KINDS order), stopped before its pods."""
    world = build_world(load_scenario("demo"))
    store = MemoryStore()
    east = world.stores["east"]
    kinds = {kind: plural for plural, kind in PLURALS.items()}
    for kind in KINDS[: KINDS.index(POD)]:
        records = [normalize(kind, o, cluster="east") for o in east.list(kinds[kind])]
        await feed(store, "east", upserts=records, at="2026-11-30T00:00:00Z")
    return store


async def test_a_cluster_still_listing_is_not_evaluated() -> None:
    store = await _listed_up_to_pods()
    index = index_of(store, "east")
    reactor = SimpleNamespace(index=index, synced=asyncio.Event())
    watching = [SimpleNamespace(by_name={"east": reactor})]
    config = parse({"rules": {"idle-holder": {"minutes": 10}}})
    later = datetime.now(UTC) + timedelta(hours=1)
    # Over the half-listed index the rule would fire (claims in use look idle before their
    # pods are listed) ...
    naive = AlertEngine(config, sources=lambda: {"east": index}, clock=lambda: later)
    naive.evaluate()
    assert naive.firing
    # ... so the runtime gives the engine only the clusters that have synced.
    engine = AlertEngine(config, sources=lambda: synced_indexes(watching), clock=lambda: later)
    engine.evaluate()
    assert synced_indexes(watching) == {} and not engine.firing
    reactor.synced.set()
    assert synced_indexes(watching) == {"east": index}
