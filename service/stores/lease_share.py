"""Spreading the watch leases over the watchers: each takes at most its fair share.

Every watching process announces itself in one sorted set, `PREFIX:watchers` (member: its
holder id; score: when the announcement runs out, on Redis's own clock), once per renewal
interval; a process that stops announcing drops out `ttl` seconds after its last one. With N
live watchers and C clusters to watch, a watcher takes a lease only while it holds fewer than
its share, ceil(C / N); one holding more than its share (another watcher joined) hands one
lease back per surplus at its next renewal, so the newcomer takes it. A watcher alone takes
every cluster; when one dies, the others' share grows once its announcement has run out —
about when its leases do — and they take its clusters over. The share assumes every watcher
of a prefix is given the same clusters (one kubeconfig, as the chart and compose run them);
watchers given different sets still never hold a cluster twice, only spread less evenly.

Promises:

* the set is one key (one slot on a Redis Cluster), written and read by one script;
* `announce()` refreshes this watcher and returns the live count; a failure (Redis down)
  keeps the last count it knew, so a watcher cut off from Redis never reaches for more;
* `room()` / `surplus()` are decided from counts this process keeps (no Redis call): the
  leases it holds, the live watchers it last saw;
* `withdraw()` removes this watcher at once (a clean stop), so the others need not wait.
"""

from __future__ import annotations

import contextlib
import math

from dra_mirror.service.stores.redis import RedisStore

# KEYS: the watchers set; ARGV: holder, ttl ms. Scores are Redis's clock (ms).
ANNOUNCE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return redis.call('ZCARD', KEYS[1])
"""


def watchers_key(prefix: str) -> str:
    return f"{prefix}:watchers"


class FairShare:
    """How many leases this watcher may hold among the live watchers (module docstring)."""

    def __init__(self, store: RedisStore, *, clusters: int, holder: str, ttl: float) -> None:
        self.store = store
        self.clusters = clusters
        self.holder = holder
        self.ttl_ms = max(1, int(ttl * 1000))
        self.key = watchers_key(store.prefix)
        self.held = 0
        self.live = 1
        self._announce = store.redis.register_script(ANNOUNCE)

    @property
    def share(self) -> int:
        return math.ceil(self.clusters / max(1, self.live))

    def room(self) -> bool:
        return self.held < self.share

    def surplus(self) -> bool:
        return self.held > self.share

    async def announce(self) -> int:
        with contextlib.suppress(Exception):  # StoreUnavailable: keep the last count
            found = await self.store._call(
                self._announce(keys=[self.key], args=[self.holder, self.ttl_ms])
            )
            self.live = max(1, int(found))
        return self.live

    async def withdraw(self) -> None:
        with contextlib.suppress(Exception):
            await self.store._call(self.store.redis.zrem(self.key, self.holder))
