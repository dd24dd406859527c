"""Leases with real processes: two holders of one cluster's lease (tests/redis/holder.py)
against the suite's redis-server. One writes at a time; a paused holder that wakes after its
TTL is fenced out (its writes refused, the successor's data intact); a killed holder is
replaced once its lease expires. Timeouts below are failure bounds, not speed targets."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import uuid
from pathlib import Path

from dra_mirror.service.stores.lease import Lease
from dra_mirror.service.stores.redis import RedisStore

REPO_ROOT = Path(__file__).resolve().parents[2]
TTL = 1.0
CLUSTER = "east"


class Holder:
    def __init__(self, process: asyncio.subprocess.Process, name: str) -> None:
        self.process = process
        self.name = name
        self.lines: list[str] = []

    @classmethod
    async def start(cls, url: str, prefix: str, name: str) -> Holder:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "tests.redis.holder", url, prefix, CLUSTER, name, str(TTL),
            cwd=REPO_ROOT, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
        )  # fmt: skip
        return cls(process, name)

    async def wait_for(self, prefix: str, within: float = 20.0) -> str:
        """The next line starting with `prefix` (earlier lines are kept in `lines`)."""
        assert self.process.stdout is not None
        async with asyncio.timeout(within):
            while True:
                raw = await self.process.stdout.readline()
                if not raw:
                    raise AssertionError(f"{self.name} exited; said {self.lines}")
                line = raw.decode().strip()
                self.lines.append(line)
                if line.startswith(prefix):
                    return line

    async def wait_for_all(self, *words: str) -> None:
        """Read lines until each of `words` has begun one of them (in any order)."""
        seen: set[str] = set()
        while not set(words) <= seen:
            seen.add((await self.wait_for("")).split()[0])

    async def stop(self) -> None:
        if self.process.returncode is None:
            self.process.kill()
        await self.process.wait()


async def node_labels(store: RedisStore) -> dict[str, str]:
    (record,) = await store.get([(CLUSTER, "Node", "", "n1")])
    assert record is not None
    return dict(record.meta.labels)


async def test_one_writer_fencing_and_takeover(redis_url: str) -> None:
    prefix = f"test-lease-{uuid.uuid4().hex[:8]}"
    store = RedisStore.from_url(redis_url, prefix=prefix)
    a = await Holder.start(redis_url, prefix, "a")
    b = None
    try:
        token_a = (await a.wait_for("HOLDING")).split()[1]
        await a.wait_for("WROTE")
        b = await Holder.start(redis_url, prefix, "b")
        await asyncio.sleep(3 * TTL)  # b keeps trying meanwhile
        assert not any(line.startswith("HOLDING") for line in b.lines)
        assert (await node_labels(store))["holder"] == "a"

        # a freezes past its TTL: b takes over and writes; a wakes up and is fenced out.
        os.kill(a.process.pid, signal.SIGSTOP)
        token_b = (await b.wait_for("HOLDING")).split()[1]
        assert token_b != token_a and int(token_b.split(":")[0]) > int(token_a.split(":")[0])
        await b.wait_for("WROTE")
        os.kill(a.process.pid, signal.SIGCONT)
        # Either may come first: the refused write, or the renewal that finds the lease gone.
        await a.wait_for_all("FENCED", "LOST")
        labels = await node_labels(store)
        await asyncio.sleep(0.5)
        later = await node_labels(store)
        assert labels["holder"] == later["holder"] == "b"
        assert int(later["seq"]) > int(labels["seq"])  # b still writes

        # b dies without releasing: a (still trying) takes over once the lease expires.
        await b.stop()
        await a.wait_for("HOLDING")
        await a.wait_for("WROTE")
        assert (await node_labels(store))["holder"] == "a"
    finally:
        await a.stop()
        if b is not None:
            await b.stop()
        await store.close()


async def test_release_lets_a_successor_in_at_once(redis_url: str) -> None:
    store = RedisStore.from_url(redis_url, prefix=f"test-lease-{uuid.uuid4().hex[:8]}")
    try:
        first = Lease(store, CLUSTER, ttl=60.0)
        second = Lease(store, CLUSTER, ttl=60.0)
        token = await first.acquire()
        assert token is not None and await second.acquire() is None
        assert await first.acquire() == token  # the holder confirming its own lease
        assert await first.renew()
        await first.release()
        taken = await second.acquire()
        assert taken is not None and taken != token
        assert not await first.renew()  # released: renewing does not steal it back
        assert await store.redis.get(store.keys(CLUSTER).fence) == taken.encode()
    finally:
        await store.close()


async def test_an_expired_lease_whose_fence_is_still_ours_is_taken_back(redis_url: str) -> None:
    """Redis down longer than the TTL, back with its data: the lease key ran out, but nobody
    took the cluster (the fence is still the holder's token), so renewing takes it back with
    the same token — no fresh start. Once another holder acquired it, it is gone."""
    store = RedisStore.from_url(redis_url, prefix=f"test-lease-{uuid.uuid4().hex[:8]}")
    try:
        first = Lease(store, CLUSTER, ttl=60.0)
        second = Lease(store, CLUSTER, ttl=60.0)
        token = await first.acquire()
        await store.redis.delete(store.keys(CLUSTER).lease)  # expired while Redis was down
        assert await first.renew()
        assert first.token == token
        assert await store.redis.get(store.keys(CLUSTER).lease) == first.holder.encode()
        assert await second.acquire() is None
        await store.redis.delete(store.keys(CLUSTER).lease)
        assert await second.acquire() is not None  # a successor took it: a new fence
        assert not await first.renew()
    finally:
        await store.close()
