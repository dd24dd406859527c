"""Small scenarios for the oracle tests: objects shown to the mirror step by step, the
oracle's answers over the same objects, and the disagreements between them.

`scenario` starts a `System` (memory store; with `redis_url` requested, the Redis store too)
whose first LIST of every kind is empty; `await scenario.show(obj, …, gone=[…])` hands one
batch of watch events to the mirror at the next second and keeps the same objects for the
oracle; `await scenario.mismatches(*areas)` compares every answer and keeps those of `areas`
(an area and its sub-areas: "claim" keeps "claim.idle").
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from dra_mirror.service.history.runtime import History
from dra_mirror.service.history.writer import WriterOptions
from tests.oracle.cluster import KIND_ORDER
from tests.oracle.compare import Mismatch, device_name, live_mismatches, mismatches
from tests.oracle.machine import at
from tests.oracle.system import System
from tests.oracle.truth import Truth, answer

FAST = WriterOptions(linger=0.0, retry_initial=0.05, retry_max=0.2)


class Scenario:
    def __init__(self, system: System) -> None:
        self.system = system
        self.objects: dict[tuple[str, str, str], dict] = {}
        self.step = 0

    @staticmethod
    def key(obj: dict) -> tuple[str, str, str]:
        m = obj["metadata"]
        return (obj["kind"], m.get("namespace") or "", m["name"])

    def now(self) -> str:
        return at(self.step)

    async def show(self, *objects: dict, gone: tuple[dict, ...] = ()) -> None:
        self.step += 1
        events = []
        for obj in objects:
            events.append(("MODIFIED" if self.key(obj) in self.objects else "ADDED", obj))
            self.objects[self.key(obj)] = obj
        for obj in gone:
            events.append(("DELETED", self.objects.pop(self.key(obj))))
        await self.system.apply(events, at=self.now())

    async def handover(self) -> None:
        self.step += 1
        lists = {
            kind: [o for (k, _, _), o in self.objects.items() if k == kind] for kind in KIND_ORDER
        }
        await self.system.handover(lists, order=list(KIND_ORDER), at=self.now())

    def truth(self) -> Truth:
        return answer(self.objects.values())

    async def mismatches(self, *areas: str) -> list[Mismatch]:
        truth = self.truth()
        held = [device_name(k) for k, d in truth.devices.items() if d.holders]
        hidden = [device_name(k) for k, d in truth.devices.items() if d.holders and not d.published]
        found: list[Mismatch] = []
        for store, answers in (await self.system.answers(held, hidden)).items():
            found += mismatches(truth, answers, store)
        found += live_mismatches(truth, self.system.live)
        return [m for m in found if any(m.area == a or m.area.startswith(f"{a}.") for a in areas)]


@pytest.fixture
async def history(tmp_path: Path) -> AsyncIterator[History]:
    opened = await History.open(f"sqlite+aiosqlite:///{tmp_path / 'history.db'}", options=FAST)
    yield opened
    await opened.close()


async def _scenario(redis_url: str | None, history: Any) -> AsyncIterator[Scenario]:
    name = f"defect-{uuid.uuid4().hex[:8]}"
    system = await System.start(name, redis_url=redis_url, history=history, at=at(0))
    for kind in KIND_ORDER:
        await system.relist(kind, [], at=at(0))
    await system.synced(at(0))
    try:
        yield Scenario(system)
    finally:
        await system.close()


@pytest.fixture
async def scenario() -> AsyncIterator[Scenario]:
    async for made in _scenario(None, None):
        yield made


@pytest.fixture
async def redis_scenario(redis_url: str) -> AsyncIterator[Scenario]:
    async for made in _scenario(redis_url, None):
        yield made


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.redis)])
async def each_store(request: pytest.FixtureRequest) -> AsyncIterator[Scenario]:
    """A scenario over the memory store, then one over the memory and the Redis stores."""
    url = request.getfixturevalue("redis_url") if request.param == "redis" else None
    async for made in _scenario(url, None):
        yield made


@pytest.fixture
async def history_scenario(history: History) -> AsyncIterator[Scenario]:
    async for made in _scenario(None, history):
        yield made
