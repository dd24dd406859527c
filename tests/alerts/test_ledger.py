"""The alert ledger in the suite's real Redis: a second engine (a restarted watcher, or the
replica that took a cluster's lease) neither announces again what the first announced nor
leaves the first one's message unresolved; while the ledger is down nothing is announced."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import timedelta

import pytest
import redis.asyncio as aioredis

from dra_mirror.service.alerts.engine import AlertEngine
from dra_mirror.service.alerts.ledger import RedisAlertLedger
from tests.alerts.conftest import FakeSlack
from tests.alerts.test_alerts import LOADED, Clock, engine_for, firing
from tests.feeding import feed
from tests.plan.conftest import World, demo_world

IDLE = {"idle-holder": {"hours": 4}}
NOTEBOOK = "east/research/notebook-gpu"


@pytest.fixture
async def ledger(redis_url: str) -> AsyncIterator[RedisAlertLedger]:
    client = aioredis.from_url(redis_url)
    try:
        yield RedisAlertLedger(client, prefix=f"test-{uuid.uuid4().hex[:8]}")
    finally:
        await client.aclose()


def kept(world: World, clock: Clock, slack: FakeSlack, ledger: RedisAlertLedger) -> AlertEngine:
    engine = engine_for(world, IDLE, clock, slack)
    engine.ledger = ledger
    return engine


def posts(slack: FakeSlack, text: str = "notebook-gpu") -> list[dict]:
    """The announcements naming `text` (not the replies in their threads)."""
    return [
        b
        for m, b in slack.calls
        if m == "chat.postMessage" and text in b["text"] and "thread_ts" not in b
    ]


async def end_idleness(world: World) -> None:
    index = world.store.index("east")
    claim = index.get(next(k for k in index.idle_claims() if k.name == "notebook-gpu"))
    await feed(world.store, "east", deletes=[claim], at="2026-11-30T06:00:00Z")


async def test_a_restarted_engine_neither_repeats_nor_forgets_an_announcement(
    fake_slack: FakeSlack, ledger: RedisAlertLedger
) -> None:
    world = await demo_world()
    clock = Clock(LOADED + timedelta(hours=5))
    first = kept(world, clock, fake_slack, ledger)
    await first.tick()
    [post] = posts(fake_slack)
    [entry] = [e for e in await ledger.announced("east") if e.name == "notebook-gpu"]
    assert entry.receipt == ["C0ALERTS", "1.0001"]  # the message to update when it ends

    second = kept(world, clock, fake_slack, ledger)  # the process after a restart
    await second.tick()
    await second.tick()
    assert posts(fake_slack) == [post]  # not announced again
    assert NOTEBOOK in firing(second, "idle-holder")  # but firing (its series is exported)

    await end_idleness(world)
    await second.tick()
    [update] = [b for m, b in fake_slack.calls if m == "chat.update"]
    assert update["ts"] == "1.0001" and update["blocks"][0]["text"]["text"].startswith("[RESOLVED]")
    assert fake_slack.calls[-1][1]["thread_ts"] == "1.0001"
    assert not [e for e in await ledger.announced("east") if e.name == "notebook-gpu"]


async def test_a_condition_that_ended_while_no_engine_ran_is_resolved_on_the_first_message(
    fake_slack: FakeSlack, ledger: RedisAlertLedger
) -> None:
    world = await demo_world()
    clock = Clock(LOADED + timedelta(hours=5))
    await kept(world, clock, fake_slack, ledger).tick()
    assert len(posts(fake_slack)) == 1
    await end_idleness(world)  # while no watcher ran
    later = kept(world, clock, fake_slack, ledger)
    await later.tick()
    assert len(posts(fake_slack)) == 1
    [update] = [b for m, b in fake_slack.calls if m == "chat.update"]
    assert update["ts"] == "1.0001"
    assert NOTEBOOK not in firing(later, "idle-holder")


async def test_nothing_is_announced_while_the_ledger_cannot_be_read(
    fake_slack: FakeSlack, ledger: RedisAlertLedger
) -> None:
    world = await demo_world()
    clock = Clock(LOADED + timedelta(hours=5))
    down = aioredis.from_url("redis://127.0.0.1:9/0", socket_connect_timeout=0.2)
    engine = kept(world, clock, fake_slack, RedisAlertLedger(down, prefix=ledger.prefix))
    try:
        await engine.tick()
        assert NOTEBOOK in firing(engine, "idle-holder") and not fake_slack.calls
    finally:
        await down.aclose()
    engine.ledger = ledger  # the ledger is back
    await engine.tick()
    await engine.tick()
    assert len(posts(fake_slack)) == 1
    assert [e.name for e in await ledger.announced("east")].count("notebook-gpu") == 1


async def test_a_cluster_taken_up_again_reads_its_ledger_again(
    fake_slack: FakeSlack, ledger: RedisAlertLedger
) -> None:
    world = await demo_world()
    clock = Clock(LOADED + timedelta(hours=5))
    watched = {"east", "west"}
    engine = kept(world, clock, fake_slack, ledger)
    engine.sources = lambda: {n: world.store.index(n) for n in watched}
    await engine.tick()
    assert len(posts(fake_slack)) == 1
    watched.discard("east")  # the lease moved away ...
    await engine.tick()
    assert NOTEBOOK not in firing(engine, "idle-holder")
    watched.add("east")  # ... and back: announced before, by this replica or another
    await engine.tick()
    assert len(posts(fake_slack)) == 1 and NOTEBOOK in firing(engine, "idle-holder")


async def test_watchers_on_redis_keep_their_ledger_there(redis_url: str) -> None:
    from dra_mirror.service.alerts.config import parse
    from dra_mirror.service.runtime.mirror import alerting
    from dra_mirror.service.stores.memory import MemoryStore
    from dra_mirror.service.stores.redis import RedisStore

    doc = {"rules": IDLE, "slack": {"channel": "#gpu"}}
    config = parse(doc, environ={"DRA_MIRROR_SLACK_BOT_TOKEN": "xoxb-1"})
    store = RedisStore.from_url(redis_url, prefix="ledger-wiring")
    try:
        engine = alerting(config, dict, store=store)
        assert isinstance(engine.ledger, RedisAlertLedger)
        assert engine.ledger.key("east") == "ledger-wiring:{east}:alerts"
    finally:
        await store.redis.aclose()
    assert alerting(config, dict, store=MemoryStore()).ledger is None  # one process: no ledger
    assert alerting(parse({"rules": IDLE}), dict, store=store).ledger is None  # no Slack
