"""A per-subject rate limit: a token bucket for each subject, kept in a bounded LRU.

Each subject (by name and method) has a bucket of `burst` requests that refills at `rate`
requests per second; a request takes one. An empty bucket refuses with `Throttled`, saying in
how many seconds one request will be allowed again (the front ends send it as `Retry-After`).
Buckets live in a `cachetools.LRUCache` of `subjects` entries, so a flood of distinct
subjects costs bounded memory (an evicted bucket starts full again, which only ever errs on
the side of the caller). The limit is per process: N API replicas allow N times the rate.
`rate=0` turns the limit off.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from cachetools import LRUCache

from .errors import Throttled
from .subjects import Subject


class RateLimit:
    def __init__(
        self,
        *,
        rate: float,
        burst: int,
        subjects: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.rate = rate
        self.burst = max(1, burst)
        self.clock = clock
        self._buckets: LRUCache[tuple[str, str], list[float]] = LRUCache(subjects)

    def take(self, subject: Subject) -> None:
        """Spend one request of `subject`'s bucket, or raise `Throttled`."""
        self.take_key((subject.method, subject.name), subject.name)

    def take_key(self, key: tuple[str, str], who: str) -> None:
        """Spend one request of the bucket `key` (`who` names it in the refusal): a subject's,
        or a client address's before its token is reviewed (service.access.control)."""
        if self.rate <= 0:
            return
        now = self.clock()
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = self._buckets[key] = [float(self.burst), now]
        tokens = min(float(self.burst), bucket[0] + (now - bucket[1]) * self.rate)
        bucket[1] = now
        if tokens < 1.0:
            bucket[0] = tokens
            wait = (1.0 - tokens) / self.rate
            raise Throttled(
                f"too many requests from {who}: try again in {wait:.1f} s", retry_after=wait
            )
        bucket[0] = tokens - 1.0
