"""`redis_call`: Redis failures become StoreUnavailable; a cancellation is never lost.

The last test runs the production outbox (`RedisStreamOutbox.from_url`, which sets
`socket_timeout`, so redis-py sends every command through `asyncio.wait_for`) in a loop of
blocking reads and cancels it at random instants: on Python 3.11 about one in ten such
cancellations used to be dropped by `wait_for`, and the loop never stopped.
"""

from __future__ import annotations

import asyncio
import random
import uuid

import pytest
from redis.exceptions import ConnectionError as RedisConnectionError

from dra_mirror.service.history.redis_outbox import RedisStreamOutbox
from dra_mirror.service.stores.protocols import StoreUnavailable
from dra_mirror.service.stores.redis_calls import redis_call


async def _cancelled_then_swallowed() -> str:
    """What Python 3.11's wait_for does when the inner send completes as the task is
    cancelled: the CancelledError is caught and the result returned."""
    task = asyncio.current_task()
    assert task is not None
    task.cancel()
    try:
        await asyncio.sleep(0)
    except asyncio.CancelledError:
        return "reply"
    raise AssertionError("the cancellation was not delivered")


async def test_a_cancellation_the_client_dropped_is_raised_again():
    swallowed = asyncio.create_task(_cancelled_then_swallowed())
    assert await swallowed == "reply"  # the trap: the task ends normally

    async def through_redis_call() -> str:
        return await redis_call(_cancelled_then_swallowed())

    task = asyncio.create_task(through_redis_call())
    with pytest.raises(asyncio.CancelledError):
        await task
    assert task.cancelled()


async def test_redis_failures_become_store_unavailable_and_keep_their_cause():
    async def failing() -> None:
        raise RedisConnectionError("Connection refused")

    with pytest.raises(StoreUnavailable, match="redis outbox: Connection refused") as caught:
        await redis_call(failing(), "redis outbox")
    assert isinstance(caught.value.__cause__, RedisConnectionError)


async def test_a_failure_while_cancelling_is_a_cancellation():
    async def fails_as_cancelled() -> None:
        task = asyncio.current_task()
        assert task is not None
        task.cancel()
        try:
            await asyncio.sleep(0)
        except asyncio.CancelledError as error:  # redis-py: a connection error instead
            raise RedisConnectionError("Connection closed by server.") from error

    task = asyncio.create_task(redis_call(fails_as_cancelled()))
    with pytest.raises(asyncio.CancelledError):
        await task


@pytest.mark.redis
async def test_a_loop_of_blocking_outbox_reads_always_stops_when_cancelled(redis_url):
    outbox = RedisStreamOutbox.from_url(
        redis_url, prefix=f"test-{uuid.uuid4().hex[:8]}", consumer="reader"
    )
    rng = random.Random(7)
    still_running = 0
    try:

        async def read_forever() -> None:
            while True:
                await outbox.read(100, block=0.005)

        for _ in range(200):
            task = asyncio.create_task(read_forever())
            await asyncio.sleep(rng.random() * 0.02)
            task.cancel()
            done, _ = await asyncio.wait({task}, timeout=1.0)
            if task not in done:
                still_running += 1
                task.cancel()
                await asyncio.wait({task}, timeout=1.0)
            else:
                assert task.cancelled()
    finally:
        await outbox.close()
    assert still_running == 0
