"""Leases spread over watchers (service.stores.lease_share), in one process against the suite's
redis-server: a watcher alone takes all ten clusters; once two more join, the first hands back
its surplus and every watcher holds at most ceil(10 / 3) = 4 (so each holds at least two),
never a cluster held twice; when one stops, the other two take its clusters. Timeouts are
failure bounds, not speed targets."""

from __future__ import annotations

import asyncio
import uuid

from dra_mirror.service.stores.lease import LeaseSettings, hold_leases
from dra_mirror.service.stores.redis import RedisStore

CLUSTERS = [f"c{number}" for number in range(10)]
SETTINGS = LeaseSettings(ttl=1.0, renew_interval=0.2, retry_interval=0.1)


class Watcher:
    """One holder's leases, as `hold_leases` reports them."""

    def __init__(self, store: RedisStore, name: str, owners: dict[str, str]) -> None:
        self.name = name
        self.held: set[str] = set()
        self.owners = owners

        async def acquired(cluster: str, token: str) -> None:
            assert cluster not in owners, f"{cluster} held by {owners[cluster]} and {name}"
            owners[cluster] = name
            self.held.add(cluster)

        async def lost(cluster: str) -> None:
            self.held.discard(cluster)
            owners.pop(cluster, None)

        self.task = asyncio.ensure_future(
            hold_leases(
                store, CLUSTERS, on_acquired=acquired, on_lost=lost, settings=SETTINGS, holder=name
            )
        )

    async def stop(self) -> None:
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)
        for cluster in list(self.held):  # a clean stop released them
            self.owners.pop(cluster, None)
        self.held.clear()


async def until(check, what: str, within: float = 20.0) -> None:
    for _ in range(int(within / 0.05)):
        if check():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"not within {within}s: {what}")


async def test_leases_spread_and_a_stopped_watchers_clusters_are_taken_over(
    redis_url: str,
) -> None:
    store = RedisStore.from_url(redis_url, prefix=f"test-share-{uuid.uuid4().hex[:8]}")
    owners: dict[str, str] = {}
    watchers: list[Watcher] = []
    try:
        watchers.append(Watcher(store, "a", owners))
        await until(lambda: len(watchers[0].held) == 10, "a watcher alone takes every cluster")
        watchers += [Watcher(store, "b", owners), Watcher(store, "c", owners)]

        def spread() -> bool:
            counts = sorted(len(w.held) for w in watchers)
            return sum(counts) == 10 and counts[-1] <= 4

        await until(spread, "three watchers hold at most 4 clusters each")
        assert all(len(w.held) >= 2 for w in watchers), [w.held for w in watchers]
        first = watchers.pop(0)
        await first.stop()

        def taken_over() -> bool:
            return sum(len(w.held) for w in watchers) == 10 and all(
                len(w.held) <= 5 for w in watchers
            )

        await until(taken_over, "the two left hold all ten, five each")
        assert set(owners) == set(CLUSTERS)
    finally:
        for watcher in watchers:
            await watcher.stop()
        await store.close()
