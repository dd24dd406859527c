"""Per-cluster leases in Redis: exactly one replica watches (and writes) a cluster at a time.

A lease is the key `PREFIX:{cluster}:lease` holding the holder's random id with a TTL
(`SET NX PX`). Taking it also draws a fencing token — `INCR PREFIX:{cluster}:fence_counter`
joined with the holder id — and stores it in `PREFIX:{cluster}:fence`. Every write batch of the
Redis store compares that fence with its own token inside the same atomic script
(service.stores.redis_writes), so a replica that lost its lease (paused past its TTL, cut off
from Redis, or Redis restarted empty) cannot write even if it does not know yet.

Promises:

* `acquire()` is one script: it takes a free lease, or confirms one this holder already has;
  it returns the token, or None when another replica holds it. Taking it carries the layout
  marker of the writer's indexes over to the new token when the marker named the fence it
  replaces (service.stores.redis_index: the indexes are whole, readers keep using them);
* `renew()` extends the TTL while the key still names this holder, and takes the lease back
  when the key expired but the cluster's fence is still this holder's token — nobody took the
  cluster meanwhile (taking it changes the fence), so this holder's index is still what Redis
  holds: a Redis that was down longer than the TTL and came back with its data (its
  append-only file) costs no fresh start. One script; False means the lease is gone — stop
  writing, and acquire again (the new token forces a fresh start: the store reloads the
  cluster and the watcher relists);
* `release()` deletes the key only if it is still ours, so a successor may take over at once;
* when the holder dies, the key expires and another replica's `acquire()` succeeds within
  the TTL (plus its retry interval).

`hold_leases(...)` runs the loop for many clusters: try to acquire every `retry_interval`,
renew every `renew_interval`; on each acquisition it awaits `on_acquired(cluster, token)`,
on each loss `on_lost(cluster)`. A renewal that fails because Redis does not answer is not a
loss: the holder keeps watching and retries (its writes wait meanwhile, and are fenced: if
another replica took the cluster while this one could not reach Redis, they are refused and
the next renewal that answers says the lease is gone). Only an answer that the lease is no
longer this holder's ends it. `resign[cluster]` (an `asyncio.Event`), when set, makes the
holder give the lease up and take it again with a new token — a fresh start — as a loss of
the history outbox's fences asks (service.reactor.leased). The leases spread over the watchers:
each takes at most its fair share of the clusters and hands back a surplus when another
watcher joins (`service.stores.lease_share`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass

from redis.exceptions import RedisError

from dra_mirror.service.stores.lease_share import FairShare
from dra_mirror.service.stores.redis import RedisStore
from dra_mirror.service.stores.redis_keys import LAYOUT

log = logging.getLogger(__name__)

# KEYS: lease, fence, fence_counter, layout; ARGV: holder, ttl ms, layout version.
# A new holder carries the layout marker over when the marker names the fence it replaces:
# the writer before it kept the indexes whole, and nobody wrote since (docs/redis.md).
ACQUIRE = """
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  local previous = redis.call('GET', KEYS[2]) or ''
  local token = redis.call('INCR', KEYS[3]) .. ':' .. ARGV[1]
  redis.call('SET', KEYS[2], token)
  if redis.call('GET', KEYS[4]) == ARGV[3] .. ':' .. previous then
    redis.call('SET', KEYS[4], ARGV[3] .. ':' .. token)
  end
  return token
end
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return redis.call('GET', KEYS[2])
end
return false
"""
# KEYS: lease, fence; ARGV: holder, ttl ms, token. An expired lease whose fence is still this
# holder's token is taken back: nobody acquired the cluster since (acquiring changes the fence).
RENEW = """
local holder = redis.call('GET', KEYS[1])
if holder == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
if not holder and ARGV[3] ~= '' and redis.call('GET', KEYS[2]) == ARGV[3] then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
return 0
"""
RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""


@dataclass(frozen=True)
class LeaseSettings:
    """How long a lease lasts and how often holders and candidates act."""

    ttl: float = 10.0
    """Seconds a lease outlives its last renewal: the longest takeover after a holder dies."""
    renew_interval: float = 3.0
    """Seconds between renewals (well under `ttl`)."""
    retry_interval: float = 2.0
    """Seconds between attempts to take a lease another replica holds."""


class Lease:
    """One cluster's lease, seen by one holder id."""

    def __init__(
        self, store: RedisStore, cluster: str, *, ttl: float = 10.0, holder: str | None = None
    ) -> None:
        self.store = store
        self.cluster = cluster
        self.keys = store.keys(cluster)
        self.ttl_ms = max(1, int(ttl * 1000))
        self.holder = holder or secrets.token_hex(8)
        self.token: str | None = None
        redis = store.redis
        self._acquire = redis.register_script(ACQUIRE)
        self._renew = redis.register_script(RENEW)
        self._release = redis.register_script(RELEASE)

    async def acquire(self) -> str | None:
        keys = [self.keys.lease, self.keys.fence, self.keys.fence_counter, self.keys.layout]
        args: list[str | int | bytes] = [self.holder, self.ttl_ms, LAYOUT]
        found = await self.store._call(self._acquire(keys=keys, args=args))
        self.token = found.decode() if found else None
        return self.token

    async def renew(self) -> bool:
        renewed = await self.store._call(
            self._renew(
                keys=[self.keys.lease, self.keys.fence],
                args=[self.holder, self.ttl_ms, self.token or ""],
            )
        )
        if not renewed:
            self.token = None
        return bool(renewed)

    async def release(self) -> None:
        self.token = None
        await self.store._call(self._release(keys=[self.keys.lease], args=[self.holder]))


Acquired = Callable[[str, str], Awaitable[None]]
Lost = Callable[[str], Awaitable[None]]


async def hold_leases(
    store: RedisStore,
    clusters: Sequence[str],
    *,
    on_acquired: Acquired,
    on_lost: Lost,
    settings: LeaseSettings | None = None,
    holder: str | None = None,
    resign: Mapping[str, asyncio.Event] | None = None,
) -> None:
    """Hold (or wait for) the lease of every cluster until cancelled; then release them."""
    settings = settings or LeaseSettings()
    holder = holder or secrets.token_hex(8)
    leases = {c: Lease(store, c, ttl=settings.ttl, holder=holder) for c in clusters}
    share = FairShare(store, clusters=len(leases), holder=holder, ttl=settings.ttl)
    resign = resign or {}
    await share.announce()
    try:
        await asyncio.gather(
            _announce(share, settings),
            *(
                _hold(lease, on_acquired, on_lost, settings, share, _event(resign, lease.cluster))
                for lease in leases.values()
            ),
        )
    finally:
        for lease in leases.values():
            if lease.token is not None:
                with contextlib.suppress(Exception):
                    await asyncio.shield(lease.release())
        await asyncio.shield(share.withdraw())


def _event(events: Mapping[str, asyncio.Event], cluster: str) -> asyncio.Event:
    found = events.get(cluster)
    return found if found is not None else asyncio.Event()


async def _announce(share: FairShare, settings: LeaseSettings) -> None:
    while True:
        await asyncio.sleep(settings.renew_interval)
        await share.announce()


async def _resigned(resign: asyncio.Event, seconds: float) -> bool:
    """Wait `seconds`, or less if `resign` is set meanwhile: whether it was."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(seconds):
            await resign.wait()
    return resign.is_set()


async def _hold(
    lease: Lease,
    on_acquired: Acquired,
    on_lost: Lost,
    settings: LeaseSettings,
    share: FairShare,
    resign: asyncio.Event,
) -> None:
    loop = asyncio.get_running_loop()
    context = {"cluster": lease.cluster, "holder": lease.holder}
    while True:
        if not share.room():  # this watcher holds its share: leave the lease to the others
            await asyncio.sleep(settings.retry_interval)
            continue
        share.held += 1  # counted before the await: the other leases' attempts see it
        try:
            token = await lease.acquire()
        except (RedisError, OSError, Exception) as error:  # StoreUnavailable: try again later
            log.warning(
                "lease: cannot reach Redis (%s); retrying in %.1fs",
                error,
                settings.retry_interval,
                extra=context,
            )
            token = None
        if token is None:
            share.held -= 1
            await asyncio.sleep(settings.retry_interval)
            continue
        log.info("lease taken (token %s): watching", token, extra=context)
        resign.clear()  # a fresh start: what asked for one is answered by it
        try:
            await on_acquired(lease.cluster, token)
        except Exception:  # a bug starting the watch: let another replica try
            log.exception("starting the watch failed; releasing the lease", extra=context)
            share.held -= 1
            await on_lost(lease.cluster)
            with contextlib.suppress(Exception):
                await lease.release()
            await asyncio.sleep(settings.retry_interval)
            continue
        renewed_at = loop.time()
        unreachable_said = False
        while True:
            if await _resigned(resign, settings.renew_interval):
                log.warning("giving the lease up to start the cluster afresh: the history "
                            "outbox lost its entries", extra=context)  # fmt: skip
                share.held -= 1
                lease.token = None
                await on_lost(lease.cluster)
                with contextlib.suppress(Exception):
                    await lease.release()
                break
            try:
                if await lease.renew():
                    if unreachable_said:
                        log.warning("lease renewed after %.1fs without an answer from Redis; "
                                    "the watch went on", loop.time() - renewed_at,
                                    extra=context)  # fmt: skip
                    renewed_at = loop.time()
                    unreachable_said = False
                    if not share.surplus():
                        continue
                    share.held -= 1  # decided before any await: one hand-back per surplus
                    log.info("lease handed back: %d watchers share %d clusters, at most %d "
                             "each", share.live, share.clusters, share.share, extra=context)  # fmt: skip
                    lease.token = None
                    await on_lost(lease.cluster)
                    with contextlib.suppress(Exception):
                        await lease.release()
                    await asyncio.sleep(settings.ttl)  # let the newcomer take it
                    break
                reason = "another replica holds it, or Redis lost it"
            except Exception as error:
                # Redis does not answer: not a loss. Writes wait for it and are fenced, so the
                # watch goes on; the first renewal that answers says whether it is still ours.
                if loop.time() - renewed_at < settings.ttl:
                    log.warning("lease renewal failed (%s); will retry", error, extra=context)
                elif not unreachable_said:
                    unreachable_said = True
                    log.warning("lease not renewed for %.1fs, longer than its TTL (%s): "
                                "watching on, its writes fenced, until Redis answers",
                                loop.time() - renewed_at, error, extra=context)  # fmt: skip
                continue
            log.warning("lease lost: %s; stopping the watch", reason, extra=context)
            share.held -= 1
            lease.token = None
            await on_lost(lease.cluster)
            break
