"""History around Redis: what the outbox held when Redis came back EMPTY is either recorded or
lies inside a recorded gap — never in a gap shorter than the loss — and a claim deleted while
the mirror watched ends `deleted`.

An all-in-one replica (state and the history outbox in the suite's real redis-server, history
in SQLite) is synced; SQL is then held (an exclusive lock on the SQLite file), so the changes
that follow wait in the outbox: a claim is deleted, another created. Redis is stopped and
started EMPTY (no persistence): those outbox entries are gone. Once SQL is free again and the
replica has taken the cluster again, each change must be in history, or its instant inside a
gap."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis.asyncio as aioredis
from sqlalchemy import func, select

from dra_mirror.service.history.db import open_engine
from dra_mirror.service.history.models import (
    AllocationInterval,
    Gap,
    ObjectVersion,
    WaitInterval,
)
from dra_mirror.service.runtime.mirror import mirror_app
from dra_mirror.service.settings import ClusterSettings, HistorySettings, Settings, StoreSettings
from dra_mirror.service.sim.run import Simulator
from tests.clusters.conftest import eventually
from tests.clusters.world import claim, pod, small_world
from tests.infra.servers import RedisServer, free_port
from tests.metrics.scrape import client
from tests.redis.test_emptied import names


class SqlHeld:
    """An exclusive lock on the SQLite file, held by a thread until `release()`: the history
    writer's transactions fail (`database is locked`) and are retried meanwhile."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._taken = threading.Event()
        self._release = threading.Event()
        self._thread = threading.Thread(target=self._hold, daemon=True)

    def _hold(self) -> None:
        conn = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        try:
            conn.execute("BEGIN EXCLUSIVE")
            self._taken.set()
            self._release.wait(120)
            conn.execute("ROLLBACK")
        finally:
            conn.close()

    async def take(self) -> None:
        self._thread.start()
        assert await asyncio.to_thread(self._taken.wait, 30)

    async def release(self) -> None:
        self._release.set()
        await asyncio.to_thread(self._thread.join, 30)


async def drained(history) -> bool:
    with contextlib.suppress(Exception):  # a pooled connection Redis closed
        await asyncio.wait_for(history.writer.drained(), 5)
        return True
    return False


async def hold_ended(database: str, claim_uid: str) -> bool:
    """History has ended every hold of the claim (for whatever reason: the test checks it)."""
    await asyncio.sleep(0.2)
    engine = open_engine(database)
    try:
        async with engine.connect() as conn:
            query = select(AllocationInterval.end_us).where(
                AllocationInterval.claim_uid == claim_uid
            )
            ends = (await conn.execute(query)).scalars().all()
    except Exception:  # the writer holds the file a moment
        return False
    finally:
        await engine.dispose()
    return bool(ends) and all(end is not None for end in ends)


def covered(instant_us: int, gaps: list[tuple[int, int]]) -> bool:
    return any(start <= instant_us <= end for start, end in gaps)


async def test_what_an_emptied_redis_took_from_the_outbox_lies_in_a_gap(
    tmp_path: Path, redis_url: str, redis_server
) -> None:
    world = small_world("east")
    kubeconfig = tmp_path / "kubeconfig"
    db_path = tmp_path / "history.db"
    database = f"sqlite+aiosqlite:///{db_path}"
    prefix = f"loss-history-{os.getpid()}-{tmp_path.name}"
    settings = Settings(
        clusters=ClusterSettings(kubeconfig=str(kubeconfig)),
        store=StoreSettings(redis_url=redis_url, redis_prefix=prefix, lease_ttl=3),
        history=HistorySettings(database_url=database, outbox_consumer="loss"),
    )
    held = SqlHeld(db_path)
    async with Simulator([world], kubeconfig_path=kubeconfig):
        app = mirror_app(settings)
        async with client(app) as http:
            history = app.state.mirror.history
            await app.state.mirror.reactors.wait_synced()
            await eventually(lambda: history.writer.stats.entries > 0, within=30)
            await eventually(lambda: drained(history), within=30)
            await held.take()
            # the writer takes one batch (its commit waits for SQL) and reads one ahead: the
            # changes after those stay in the Redis stream
            for filler in range(3):
                world.create("resourceclaims", claim(f"filler-{filler}"))
                await asyncio.sleep(0.5)
            # claim-0 is allocated (gpu-0 of node-0) and reserved by pod-0
            deleted_uid = world.get("resourceclaims", "default", "claim-0")["metadata"]["uid"]
            world.delete("pods", "default", "pod-0")
            world.delete("resourceclaims", "default", "claim-0")
            deleted_at = time.time()
            world.create("resourceclaims", claim("born"))
            born_at = time.time()
            expected = {c["metadata"]["name"] for c in world.list("resourceclaims")}

            async def shown() -> bool:
                return await names(http) == expected

            await eventually(shown, within=30)
            await asyncio.sleep(0.5)  # the batch reached the outbox after the state store
            await asyncio.to_thread(redis_server.stop)
            await asyncio.sleep(1)
            await asyncio.to_thread(redis_server.start)
            await asyncio.sleep(1)  # the replica notices and writes again before SQL is free
            await held.release()

            async def rebuilt() -> bool:
                with contextlib.suppress(Exception):
                    return await names(http) == expected
                return False

            await eventually(rebuilt, within=60)
            await eventually(lambda: drained(history), within=60)
    engine = open_engine(database)
    try:
        async with engine.connect() as conn:
            gaps = [tuple(g) for g in (await conn.execute(select(Gap.start_us, Gap.end_us))).all()]
            born_seen = await conn.scalar(
                select(func.min(ObjectVersion.observed_us)).where(ObjectVersion.name == "born")
            )
            versions = {
                (name, deleted)
                for name, deleted in await conn.execute(
                    select(ObjectVersion.name, ObjectVersion.deleted).where(
                        ObjectVersion.kind == "ResourceClaim"
                    )
                )
            }
            holds = (
                await conn.execute(
                    select(AllocationInterval.end_us, AllocationInterval.end_reason).where(
                        AllocationInterval.claim_uid == deleted_uid
                    )
                )
            ).all()
    finally:
        await engine.dispose()
        redis = aioredis.Redis.from_url(redis_url)
        async for key in redis.scan_iter(match=f"{prefix}:*"):
            await redis.delete(key)
        await redis.aclose()
    deleted_us, born_us = int(deleted_at * 1e6), int(born_at * 1e6)
    assert holds and all(end is not None for end, _ in holds), holds
    # the deletion is recorded (the claim's last version, its hold ended `deleted` when it
    # was deleted), or the instant it happened lies in a gap
    if ("claim-0", True) in versions:
        assert all(reason == "deleted" for _, reason in holds), holds
    else:
        assert covered(deleted_us, gaps), (gaps, deleted_us, holds)
    # the creation was recorded when it happened (within the batch delay), or that instant
    # lies in a gap
    assert born_seen is not None
    assert born_seen - born_us < 2_000_000 or covered(born_us, gaps), (gaps, born_us, born_seen)


@pytest.fixture
def aof_redis(tmp_path: Path, redis_url: str) -> Iterator[RedisServer]:
    """A redis-server of this test's own with its append-only file on (as production runs)."""
    server = RedisServer(
        binary=Path(os.environ["DRA_MIRROR_TEST_REDIS_SERVER"]),
        port=free_port(),
        workdir=tmp_path / "aof-redis",
        appendonly=True,
    )
    server.start()
    try:
        yield server
    finally:
        server.stop()


async def test_a_redis_crash_with_its_append_only_file_loses_no_history(
    tmp_path: Path, aof_redis: RedisServer
) -> None:
    """Redis SIGKILLed for 5 s (longer than the lease's TTL) and started again from its
    append-only file: the watcher keeps its position and its lease (nobody else took the
    cluster: the fence is still its own), the batches it held land once Redis answers, and
    history records every change at its own time, with no gap at all."""
    world = small_world("east")
    kubeconfig = tmp_path / "kubeconfig"
    database = f"sqlite+aiosqlite:///{tmp_path / 'history.db'}"
    settings = Settings(
        clusters=ClusterSettings(kubeconfig=str(kubeconfig)),
        store=StoreSettings(redis_url=aof_redis.url, lease_ttl=3),
        history=HistorySettings(database_url=database, outbox_consumer="crash"),
    )
    async with Simulator([world], kubeconfig_path=kubeconfig):
        app = mirror_app(settings)
        async with client(app) as http:
            history = app.state.mirror.history
            await app.state.mirror.reactors.wait_synced()
            await eventually(lambda: history.writer.stats.entries > 0, within=30)
            await eventually(lambda: drained(history), within=30)
            deleted_uid = world.get("resourceclaims", "default", "claim-0")["metadata"]["uid"]
            await asyncio.to_thread(aof_redis.kill)
            world.delete("pods", "default", "pod-0")
            world.delete("resourceclaims", "default", "claim-0")
            deleted_at = time.time()
            world.create("resourceclaims", claim("born"))
            born_at = time.time()
            await asyncio.sleep(5)
            await asyncio.to_thread(aof_redis.start)
            expected = {c["metadata"]["name"] for c in world.list("resourceclaims")}

            async def current() -> bool:
                with contextlib.suppress(Exception):
                    return await names(http) == expected
                return False

            await eventually(current, within=60)
            # the state store answers first: the outbox's sink may still be retrying the
            # batch then, with nothing in the outbox yet for the writer to drain
            await eventually(lambda: hold_ended(database, deleted_uid), within=60)
            await eventually(lambda: drained(history), within=60)
    engine = open_engine(database)
    try:
        async with engine.connect() as conn:
            gaps = (await conn.execute(select(Gap.start_us, Gap.end_us))).all()
            born_seen = await conn.scalar(
                select(func.min(ObjectVersion.observed_us)).where(ObjectVersion.name == "born")
            )
            holds = (
                await conn.execute(
                    select(AllocationInterval.end_us, AllocationInterval.end_reason).where(
                        AllocationInterval.claim_uid == deleted_uid
                    )
                )
            ).all()
    finally:
        await engine.dispose()
    assert gaps == [], gaps
    deleted_us, born_us = int(deleted_at * 1e6), int(born_at * 1e6)
    assert [reason for _, reason in holds] == ["deleted"], holds
    assert all(abs(end - deleted_us) < 2_000_000 for end, _ in holds), (holds, deleted_us)
    assert born_seen is not None and abs(born_seen - born_us) < 2_000_000, (born_seen, born_us)


async def test_an_outbox_that_lost_its_entries_under_a_held_lease_restarts_the_cluster(
    tmp_path: Path, redis_url: str
) -> None:
    """The history outbox loses its data while the cluster's state and lease stay (on a Redis
    Cluster the two live on different masters): the holder's next append is refused, and it
    starts the cluster afresh, so that the gap history records covers what was lost."""
    world = small_world("east")
    kubeconfig = tmp_path / "kubeconfig"
    db_path = tmp_path / "history.db"
    database = f"sqlite+aiosqlite:///{db_path}"
    prefix = f"loss-outbox-{os.getpid()}-{tmp_path.name}"
    settings = Settings(
        clusters=ClusterSettings(kubeconfig=str(kubeconfig)),
        store=StoreSettings(redis_url=redis_url, redis_prefix=prefix, lease_ttl=3),
        history=HistorySettings(database_url=database, outbox_consumer="loss"),
    )
    held = SqlHeld(db_path)
    redis = aioredis.Redis.from_url(redis_url)
    try:
        async with Simulator([world], kubeconfig_path=kubeconfig):
            app = mirror_app(settings)
            async with client(app) as http:
                history = app.state.mirror.history
                await app.state.mirror.reactors.wait_synced()
                await eventually(lambda: history.writer.stats.entries > 0, within=30)
                await eventually(lambda: drained(history), within=30)
                await held.take()
                for filler in range(3):
                    world.create("resourceclaims", claim(f"filler-{filler}"))
                    await asyncio.sleep(0.5)
                deleted_uid = world.get("resourceclaims", "default", "claim-0")["metadata"]["uid"]
                world.delete("pods", "default", "pod-0")
                world.delete("resourceclaims", "default", "claim-0")
                deleted_at = time.time()
                await asyncio.sleep(0.5)  # state store, then the outbox
                stream = history.outbox.name
                # the outbox's data lost: its stream (with its group) and its fences
                await redis.delete(stream, f"{stream}:fences", f"{stream}:drainer")
                world.create("resourceclaims", claim("after"))  # refused: a fresh start
                # a pod that uses it, so that the unallocated claim waits
                world.create("pods", pod("pod-after", "node-1", "after"))
                after_at = time.time()
                await held.release()
                expected = {c["metadata"]["name"] for c in world.list("resourceclaims")}

                async def current() -> bool:
                    with contextlib.suppress(Exception):
                        return await names(http) == expected
                    return False

                await eventually(current, within=60)
                # the state store is written before the outbox: the fresh start's history
                # (the lost claim's hold ended) reaches SQL after the names are current
                polled = open_engine(database)

                async def ended() -> bool:
                    async with polled.connect() as conn:
                        ends = (await conn.execute(
                            select(AllocationInterval.end_us)
                            .where(AllocationInterval.claim_uid == deleted_uid)
                        )).all()  # fmt: skip
                    return bool(ends) and all(end is not None for (end,) in ends)

                try:
                    await eventually(ended, within=60)
                finally:
                    await polled.dispose()
                await eventually(lambda: drained(history), within=60)
        engine = open_engine(database)
        try:
            async with engine.connect() as conn:
                gaps = [tuple(g) for g in (await conn.execute(select(Gap.start_us, Gap.end_us)))]
                after_waits = await conn.scalar(
                    select(func.count())
                    .select_from(WaitInterval)
                    .where(WaitInterval.claim == "after")
                )
                holds = (
                    await conn.execute(
                        select(AllocationInterval.end_us, AllocationInterval.end_reason).where(
                            AllocationInterval.claim_uid == deleted_uid
                        )
                    )
                ).all()
        finally:
            await engine.dispose()
    finally:
        async for key in redis.scan_iter(match=f"{prefix}:*"):
            await redis.delete(key)
        await redis.aclose()
    deleted_us = int(deleted_at * 1e6)
    assert holds and all(end is not None for end, _ in holds), holds
    assert covered(deleted_us, gaps), (gaps, deleted_us, holds)
    # the claim created after the loss: its append was refused, the fresh start's first LIST
    # re-announced it (it waits for a device), and the instant it was created lies in the gap
    assert after_waits == 1
    assert covered(int(after_at * 1e6), gaps), (gaps, after_at)
