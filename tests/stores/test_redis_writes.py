"""A batch's transaction is made as it is sent: the writer holds a bounded part of it.

An initial sync hands the Redis store one `Changes` per kind (40,000 claims at once at 5,000
nodes). The transaction is still ONE `MULTI … EXEC`, but made and sent request by request: by
construction the writer never holds much more than one request of it (checked here with
tracemalloc on a batch twenty times that size), the requests together are exactly the
transaction, and a transaction cut into many requests is written whole — or, when the
connection fails halfway, not at all (Redis drops a MULTI whose EXEC never came), its batch
kept pending and written with the next. A new writer's seed is read back page by page."""

from __future__ import annotations

import tracemalloc
import uuid

import pytest
from msgspec.structs import replace
from redis.exceptions import ConnectionError as RedisConnectionError

from dra_mirror.service.model.changes import Changes
from dra_mirror.service.model.index import ClusterIndex
from dra_mirror.service.model.records import Record, key_of
from dra_mirror.service.stores import redis_writes
from dra_mirror.service.stores.memory import MemoryStore
from dra_mirror.service.stores.protocols import StoreUnavailable
from dra_mirror.service.stores.redis import RedisStore
from dra_mirror.service.stores.redis_keys import Keys
from dra_mirror.service.stores.redis_writes import Ops, resp
from tests.model.builders import claim, device, node, pod, slice_
from tests.stores.test_redis import assert_same

EAST = "east"
NODES = 40


def world() -> dict[str, list[Record]]:
    """A small cluster, kind by kind: nodes with 8 GPUs each, a claim and a pod per GPU."""
    nodes, slices, claims, pods = [], [], [], []
    for n in range(NODES):
        name = f"node-{n:03}"
        nodes.append(node(name))
        gpus = tuple(device(f"gpu-{g}", uuid=f"GPU-{n:03}-{g}") for g in range(8))
        slices.append(slice_(name, pool=name, node=name, devices=gpus))
        for g in range(8):
            c, p = f"claim-{n:03}-{g}", f"pod-{n:03}-{g}"
            claims.append(claim(c, devices=((name, f"gpu-{g}"),), consumers=((p, f"uid-{p}"),)))
            pods.append(pod(p, node=name, claims=(("gpu", c, None),)))
    return {"Node": nodes, "ResourceSlice": slices, "ResourceClaim": claims, "Pod": pods}


def synced(index: ClusterIndex) -> list[Changes]:
    return [index.resync(kind, records, at="t1") for kind, records in world().items()]


@pytest.fixture
def small(monkeypatch: pytest.MonkeyPatch) -> int:
    """Commands and requests far smaller than the batches: returns the request size."""
    monkeypatch.setattr(redis_writes, "COMMAND_ARGS", 16)
    monkeypatch.setattr(redis_writes, "COMMAND_BYTES", 1024)
    monkeypatch.setattr(redis_writes, "REQUEST_BYTES", 4096)
    return 4096


def test_the_requests_are_the_transaction(small: int) -> None:
    ops = Ops(Keys("p", EAST))
    for changes in synced(ClusterIndex(EAST)):
        ops.batch(changes)
    requests = list(ops.requests())
    whole = resp([b"MULTI"]) + b"".join(map(resp, ops.commands())) + resp([b"EXEC"])
    assert b"".join(b"".join(request) for request, _ in requests) == whole
    assert len(requests) > 20
    # MULTI, every command, EXEC: the replies to read
    assert sum(count for _, count in requests) == len(list(ops.commands())) + 2
    for request, count in requests:
        assert len(request) == count
        # a request is larger than asked only when one command is (then it goes alone)
        assert sum(map(len, request)) <= max(small, len(request[0])) + len(resp([b"EXEC"]))
    for name, _, *args in ops.commands():
        if name != b"XADD":  # one entry of a batch's live events (at most 2,000 objects)
            assert len(args) <= redis_writes.COMMAND_ARGS
            assert sum(map(len, args[:-1])) <= redis_writes.COMMAND_BYTES


def test_a_transaction_is_made_as_it_is_taken(small: int) -> None:
    # a list of more than LIVE_BATCH_LIMIT objects carries no live events (their message is
    # one command, bounded by that limit): take them out of this small one
    slices = replace(synced(ClusterIndex(EAST))[1], events=[])
    assert slices.listed_kind == "ResourceSlice"
    ops = Ops(Keys("p", EAST))
    ops.batch(slices)
    total = 0
    tracemalloc.start()
    try:
        start = tracemalloc.get_traced_memory()[0]
        for request, _ in ops.requests():
            total += sum(map(len, request))
            del request
        peak = tracemalloc.get_traced_memory()[1] - start
    finally:
        tracemalloc.stop()
    # a request taken, the next one being made, the references grouping the 40 slices'
    # writes; made at once (as it was), the transaction was held whole, and more than once
    bound = 8 * small
    assert peak < bound, (peak, total)
    assert total > 12 * bound


async def test_the_writer_sends_a_large_transaction_request_by_request(
    small: int, server_store: RedisStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    from redis.asyncio.connection import AbstractConnection

    sent: list[int] = []
    send = AbstractConnection.send_packed_command

    async def spied(self: AbstractConnection, command, check_health: bool = True) -> None:
        parts = [command] if isinstance(command, bytes) else list(command)
        sent.append(sum(map(len, parts)))
        await send(self, parts, check_health)

    batches = synced(ClusterIndex(EAST))
    await server_store.apply(batches[0])
    slices = replace(batches[1], events=[])
    monkeypatch.setattr(AbstractConnection, "send_packed_command", spied)
    await server_store.apply(slices)
    monkeypatch.undo()
    # [WATCH + GET when fenced], MULTI and the commands in requests of about `small`, EXEC
    assert len(sent) > 50
    assert max(sent) <= small + len(resp([b"EXEC"]))
    assert await server_store.redis.hlen(server_store.keys(EAST).devices) == 8 * NODES
    assert await server_store.redis.hlen(server_store.keys(EAST).objects("ResourceSlice")) == 40


@pytest.fixture
async def server_store(redis_url: str):
    store = RedisStore.from_url(redis_url, prefix=f"test-{uuid.uuid4().hex[:12]}")
    yield store
    await store.close()


@pytest.mark.parametrize(
    "where", ["server", pytest.param("cluster", marks=pytest.mark.redis_cluster)]
)
async def test_a_transaction_of_many_requests_is_written_whole(
    small: int, where: str, request: pytest.FixtureRequest
) -> None:
    url = request.getfixturevalue("redis_cluster").url if where == "cluster" else None
    url = url or request.getfixturevalue("redis_url")
    store = RedisStore.from_url(url, prefix=f"test-{uuid.uuid4().hex[:12]}")
    memory = MemoryStore()
    try:
        for changes in synced(ClusterIndex(EAST)):
            await store.apply(changes)
        for changes in synced(memory.open_index(EAST)):
            await memory.apply(changes)
        await assert_same(store, memory, EAST)
        assert len(await store.list("ResourceClaim", cluster=EAST)) == 8 * NODES
    finally:
        await store.close()


async def test_a_connection_lost_halfway_writes_nothing_and_keeps_the_batch(
    small: int, server_store: RedisStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = server_store
    index = ClusterIndex(EAST)
    nodes, slices, *rest = synced(index)
    await store.apply(nodes)
    made = Ops.requests

    def cut(self: Ops, limit: int | None = None):
        for number, request in enumerate(made(self, limit)):
            if number == 5:  # five requests of HSETs sent and queued: the connection goes
                raise RedisConnectionError("connection reset")
            yield request

    monkeypatch.setattr(Ops, "requests", cut)
    with pytest.raises(StoreUnavailable):
        await store.apply(slices)  # sent twice (a fresh connection), cut both times
    assert await store.redis.exists(store.keys(EAST).objects("ResourceSlice")) == 0
    assert await store.redis.exists(store.keys(EAST).devices) == 0
    monkeypatch.setattr(Ops, "requests", made)
    memory = MemoryStore()
    served = memory.open_index(EAST)
    for changes in rest:
        await store.apply(changes)  # the pending slices first, in the same transaction
    for changes in synced(served):
        await memory.apply(changes)
    await assert_same(store, memory, EAST)
    assert await store.redis.hlen(store.keys(EAST).objects("ResourceSlice")) == NODES


async def test_a_new_writer_is_seeded_page_by_page(
    server_store: RedisStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dra_mirror.service.stores import redis as redis_module

    for changes in synced(ClusterIndex(EAST)):
        await server_store.apply(changes)
    monkeypatch.setattr(redis_module, "SEED_SCAN", 16)
    pages: list[int] = []
    scan = server_store.redis.hscan

    async def spied(name: str, cursor: int = 0, **options):
        found = await scan(name, cursor, **options)
        pages.append(len(found[1]))
        return found

    monkeypatch.setattr(server_store.redis, "hscan", spied)
    seed = await server_store.held(EAST)
    everything = [r for records in world().values() for r in records]
    assert len(seed.records) == len(everything)
    assert {key_of(r): r for r in seed.records} == {key_of(r): r for r in everything}
    assert len(pages) >= len(everything) // 32 and max(pages) < 64
