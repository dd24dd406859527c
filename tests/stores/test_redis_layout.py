"""The versioned key layout: a cluster written without the writer's indexes (by a writer of the
layout before them) is answered correctly by a replica, and indexed once by the first writer
of this version that takes its lease; a lease passed between writers of this version keeps the
indexes (the marker is carried, nothing is rebuilt); a writer of the old layout in between
makes them stale, which readers notice (they read the cluster whole) and the next writer of
this version repairs."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from dra_mirror.service.model.changes import Changes
from dra_mirror.service.model.index import ClusterIndex, Event
from dra_mirror.service.model.records import (
    PENDING,
    POD,
    RESOURCE_CLAIM,
    DeviceClassRecord,
    Meta,
    Record,
)
from dra_mirror.service.stores import redis_index
from dra_mirror.service.stores.lease import Lease
from dra_mirror.service.stores.memory import MemoryStore
from dra_mirror.service.stores.protocols import DEVICES, Page, Selection
from dra_mirror.service.stores.redis import RedisStore
from tests.model.builders import CLUSTER, DRIVER, claim, device, pod, slice_

AT = "2026-11-01T00:00:00Z"
GPU = DeviceClassRecord(meta=Meta(cluster=CLUSTER, name="gpu"),
                        selectors=(f'device.driver == "{DRIVER}"',))  # fmt: skip
WORLD: list[Record] = [
    GPU,
    slice_("n1", pool="n1", node="n1", devices=(device("gpu-0"), device("gpu-1"))),
    slice_("n2", pool="n2", node="n2", devices=(device("gpu-0"),)),
    claim("held", devices=(("n1", "gpu-0"),), node="n1", consumers=(("p", "uid-p"),)),
    claim("idle", devices=(("n2", "gpu-0"),), node="n2"),
    claim("waiting", namespace="team"),
    pod("p", node="n1", claims=(("gpu", "held", None),)),
]
LATER: list[Record] = [  # what an old writer wrote while it held the cluster
    claim("waiting", namespace="team", devices=(("n1", "gpu-1"),), node="n1"),
    claim("new", namespace="team"),
]
ASKED = [
    Selection(RESOURCE_CLAIM, CLUSTER),
    Selection(RESOURCE_CLAIM, CLUSTER, state=PENDING),
    Selection(RESOURCE_CLAIM, CLUSTER, idle=True),
    Selection(RESOURCE_CLAIM, CLUSTER, namespaces=("team",), idle=False),
    Selection(POD, CLUSTER, uses_devices=True),
    Selection(DEVICES, CLUSTER),
    Selection(DEVICES, CLUSTER, status="free"),
    Selection(DEVICES, CLUSTER, class_name="gpu", status="held"),
]


@pytest.fixture
async def prefix(redis_url: str) -> AsyncIterator[str]:
    name = f"layout-{uuid.uuid4().hex[:12]}"
    yield name
    cleaner = RedisStore.from_url(redis_url, prefix=name)
    keys = [k async for k in cleaner.redis.scan_iter(match=f"{name}:*", count=1000)]
    if keys:
        await cleaner.redis.delete(*keys)
    await cleaner.close()


def _no_indexes(keys: Any, changes: Changes) -> Iterator[Any]:
    return iter(())


class OldLayout:
    """A writer of the layout before the indexes: the same records, links and entries, and
    no index, no marker (its lease taken with the old acquisition script, which knows no
    marker)."""

    OLD_ACQUIRE = """
    if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
      local token = redis.call('INCR', KEYS[3]) .. ':' .. ARGV[1]
      redis.call('SET', KEYS[2], token)
      return token
    end
    return false
    """

    def __init__(self, store: RedisStore, monkeypatch: pytest.MonkeyPatch) -> None:
        self.store = store
        monkeypatch.setattr(redis_index, "commands", _no_indexes)
        store.keys(CLUSTER).layout = store.keys(CLUSTER).base + "elsewhere"

    async def acquire(self) -> str:
        keys = self.store.keys(CLUSTER)
        found = await self.store.redis.eval(
            self.OLD_ACQUIRE, 3, keys.lease, keys.fence, keys.fence_counter, "old", 60000
        )
        self.store.fence(CLUSTER, found.decode())
        return found.decode()

    async def seed(self, index: ClusterIndex) -> None:
        index.seed(await self.store.held(CLUSTER), at=AT)
        self.store._rebuild.clear()  # it knows of no index to rebuild


async def _answers(reader: Any) -> list[tuple[list[Any], int]]:
    out = []
    for selection in ASKED:
        page: Page = await reader.select([selection], after=None, first=100)
        out.append((page.items, page.total))
    return out


async def _memory(records: list[Record]) -> list[tuple[list[Any], int]]:
    memory = MemoryStore()
    index = memory.open_index(CLUSTER)
    await memory.apply(index.apply([Event("ADDED", r) for r in records], at=AT))
    return await _answers(memory)


async def _marker(store: RedisStore) -> bytes | None:
    return await store.redis.get(store.keys(CLUSTER).layout)


async def _take_over(store: RedisStore, holder: str) -> tuple[Lease, ClusterIndex]:
    """What a watcher of this version does on taking the lease: fence, seed, first write."""
    lease = Lease(store, CLUSTER, ttl=60.0, holder=holder)
    token = await lease.acquire()
    assert token is not None
    store.fence(CLUSTER, token)
    index = store.open_index(CLUSTER)
    index.seed(await store.held(CLUSTER), at=AT)
    await store.set_status(_status())
    return lease, index


def _status() -> Any:
    from dra_mirror.service.stores.protocols import ClusterStatus

    return ClusterStatus(name=CLUSTER, connected=True, synced=True)


async def test_an_old_layout_is_read_whole_then_indexed_once_by_a_new_writer(
    redis_url: str, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    old = RedisStore.from_url(redis_url, prefix=prefix)
    writer = OldLayout(old, monkeypatch)
    await writer.acquire()
    index = old.open_index(CLUSTER)
    await old.apply(index.apply([Event("ADDED", r) for r in WORLD], at=AT))
    await old.set_status(_status())
    monkeypatch.undo()
    reader = RedisStore.from_url(redis_url, prefix=prefix)
    try:
        index_keys = [k async for k in reader.redis.scan_iter(match=f"{prefix}:*:x:*")]
        assert index_keys == [] and await _marker(reader) is None
        expected = await _memory(WORLD)
        assert await _answers(reader) == expected  # read whole: correct, at the old cost
        await old.close()
        await reader.redis.delete(reader.keys(CLUSTER).lease)  # the old writer's lease ran out
        new = RedisStore.from_url(redis_url, prefix=prefix)
        lease, _ = await _take_over(new, "new")
        assert await _marker(new) == b"2:" + lease.token.encode()  # type: ignore[union-attr]
        assert await reader.redis.zcard(reader.keys(CLUSTER).index("ord:ResourceClaim")) == 3
        assert await _answers(reader) == expected  # now from the indexes
        await new.close()
    finally:
        await reader.close()


async def test_a_lease_passed_between_new_writers_keeps_the_indexes(
    redis_url: str, prefix: str
) -> None:
    first = RedisStore.from_url(redis_url, prefix=prefix)
    lease, index = await _take_over(first, "first")
    await first.apply(index.apply([Event("ADDED", r) for r in WORLD], at=AT))
    await lease.release()
    await first.close()
    second = RedisStore.from_url(redis_url, prefix=prefix)
    try:
        taken = Lease(second, CLUSTER, ttl=60.0, holder="second")
        token = await taken.acquire()
        assert token is not None and token != lease.token
        assert await _marker(second) == b"2:" + token.encode()  # carried by the acquisition
        second.fence(CLUSTER, token)
        await second.held(CLUSTER)
        assert CLUSTER not in second._rebuild  # nothing to rebuild
        assert await _answers(second) == await _memory(WORLD)
    finally:
        await second.close()


async def test_an_old_writer_in_between_makes_readers_read_whole_until_a_new_one_repairs(
    redis_url: str, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = RedisStore.from_url(redis_url, prefix=prefix)
    lease, index = await _take_over(first, "first")
    await first.apply(index.apply([Event("ADDED", r) for r in WORLD], at=AT))
    await lease.release()
    await first.close()
    old = RedisStore.from_url(redis_url, prefix=prefix)
    writer = OldLayout(old, monkeypatch)
    await writer.acquire()
    old_index = old.open_index(CLUSTER)
    await writer.seed(old_index)
    await old.apply(old_index.apply([Event("MODIFIED", r) for r in LATER], at=AT))
    monkeypatch.undo()
    await old.close()
    reader = RedisStore.from_url(redis_url, prefix=prefix)
    try:
        now = [r for r in WORLD if r.meta.name != "waiting"] + LATER
        expected = await _memory(now)
        assert await _answers(reader) == expected  # stale indexes are not read
        await reader.redis.delete(reader.keys(CLUSTER).lease)  # the old writer's lease ran out
        new = RedisStore.from_url(redis_url, prefix=prefix)
        taken, _ = await _take_over(new, "new")
        assert await _marker(new) == b"2:" + taken.token.encode()  # type: ignore[union-attr]
        assert await _answers(reader) == expected
        await new.close()
    finally:
        await reader.close()


async def test_on_a_redis_cluster_the_indexes_answer_with_the_marker_carried(
    redis_cluster: Any,
) -> None:
    name = f"layout-{uuid.uuid4().hex[:12]}"
    first = RedisStore.from_url(redis_cluster.url, prefix=name)
    lease, index = await _take_over(first, "first")
    await first.apply(index.apply([Event("ADDED", r) for r in WORLD], at=AT))
    await lease.release()
    await first.close()
    second = RedisStore.from_url(redis_cluster.url, prefix=name)
    try:
        taken = Lease(second, CLUSTER, ttl=60.0, holder="second")
        token = await taken.acquire()
        assert token is not None
        assert await _marker(second) == b"2:" + token.encode()
        assert await _answers(second) == await _memory(WORLD)
        assert await second.namespaces(RESOURCE_CLAIM, CLUSTER) == ["ns", "team"]
    finally:
        await second.close()
