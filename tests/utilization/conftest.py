"""The demo mirrored through the simulator, with a utilisation source that reads the
simulated dcgm-exporters the way Prometheus would (one scrape per step, on a fake clock).

`SimulatedSource` is the recount's truth too: `scraped(cluster, start, end)` is every sample
the exporters gave, by metric and label set, as Prometheus would store them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from dra_mirror.service.model.dcgm import Readings, readings
from dra_mirror.service.questions.asker import Asker
from dra_mirror.service.reactor.reactor import ReactorSettings, run_reactors
from dra_mirror.service.sim.dcgm import Exporters
from dra_mirror.service.sim.scenario import build_world, load_scenario
from dra_mirror.service.stores.memory import MemoryStore
from tests.clusters.conftest import FAST
from tests.clusters.world import serving

Samples = dict[str, dict[tuple[tuple[str, str], ...], list[tuple[float, float]]]]


class SimulatedSource:
    """`UtilizationReads` over the simulated exporters: a scrape every `step` seconds."""

    def __init__(self, world: Any, *, step: float = 60.0, busy_below: float = 5.0,
                 not_busy_after: float = 1800.0) -> None:  # fmt: skip
        self.clock = [0.0]
        self.exporters = {
            name: Exporters(store, clock=lambda: self.clock[0])
            for name, store in world.stores.items()
        }
        self.step, self.busy_below, self.not_busy_after = step, busy_below, not_busy_after
        self.price_per_kwh: float | None = 0.25
        self.asked: list[tuple[str, float, float]] = []

    def covers(self, cluster: str) -> bool:
        return cluster in self.exporters

    def scraped(self, cluster: str, start: float, end: float) -> Samples:
        out: Samples = {}
        exporters = self.exporters[cluster]
        at = start
        while at <= end:
            self.clock[0] = at
            for node in exporters.nodes():
                for family in text_string_to_metric_families(exporters.metrics(node) or ""):
                    for sample in family.samples:
                        key = tuple(sorted(sample.labels.items()))
                        out.setdefault(family.name, {}).setdefault(key, []).append(
                            (at, sample.value)
                        )
            at += self.step
        return out

    async def readings(self, cluster: str, start: float, end: float) -> Readings:
        self.asked.append((cluster, start, end))
        samples = self.scraped(cluster, start, end)
        return readings({m: [(dict(k), v) for k, v in s.items()] for m, s in samples.items()})


@dataclass
class Demo:
    world: Any
    store: MemoryStore
    source: SimulatedSource
    now: datetime
    sim: Any = None  # the Simulator serving the world (its dcgm-exporters)

    def asker(self, **kwargs: Any) -> Asker:
        return Asker.over(self.store, now=lambda: self.now, utilization=self.source, **kwargs)


@pytest.fixture(scope="module")
async def demo(tmp_path_factory: pytest.TempPathFactory):
    world = build_world(load_scenario("demo"))
    store = MemoryStore()
    settings = ReactorSettings(watch=FAST, status_interval=0.05)
    async with serving(tmp_path_factory.mktemp("demo"), *world.specs) as (sim, connections):
        reactors = await run_reactors(
            connections,
            sinks=[store],
            status_sink=store,
            open_index=store.open_index,
            settings=settings,
            tune_gc=False,
        )
        await reactors.wait_synced()
        try:
            # two hours after the objects were made: long enough to be "not busy"
            later = datetime.now(UTC) + timedelta(hours=2)
            yield Demo(world, store, SimulatedSource(world), later, sim)
        finally:
            await reactors.stop()
