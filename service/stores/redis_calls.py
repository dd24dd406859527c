"""Awaiting a redis-py call: failures as `StoreUnavailable`, and a cancellation never lost.

Promises of `redis_call(awaitable, what)`:

* every Redis failure (`RedisError`, `OSError`) leaves as `StoreUnavailable`, raised from the
  original error, its message prefixed with `what`;
* a task being cancelled stops: when the task has been asked to stop (`Task.cancelling()`),
  the call raises `CancelledError` — whether redis-py reported the cancellation as a connection
  error, or returned a reply as if nothing had happened. The second case is real: on Python
  3.11, `asyncio.wait_for` (which redis-py sends every command through when `socket_timeout`
  is set) returns the result and drops the cancellation when the send completes in the same
  loop iteration as `Task.cancel()` (CPython gh-86296, fixed in 3.12). The cancelled task
  would carry on, and a loop of blocking reads (the history outbox) would never stop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

from redis.exceptions import RedisError

from dra_mirror.service.stores.protocols import StoreUnavailable

T = TypeVar("T")


def _cancelling() -> bool:
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


async def redis_call(awaitable: Awaitable[T], what: str = "redis") -> T:
    try:
        result = await awaitable
    except (RedisError, OSError) as error:
        if _cancelling():
            raise asyncio.CancelledError from error
        raise StoreUnavailable(f"{what}: {error or type(error).__name__}") from error
    if _cancelling():
        raise asyncio.CancelledError("cancelled while a Redis call completed")
    return result
