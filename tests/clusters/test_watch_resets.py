"""Watchers against the simulator over HTTP when the cluster's resourceVersions reset or a
stream stalls: evidence seen by one kind relists every kind of the cluster (so objects deleted
meanwhile do not survive as ghosts), a stream silent for two bookmark intervals is ended and
watched again, and a silent watch from a position the server never reached is found."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

from dra_mirror.service.clusters.discovery import DraVersions
from dra_mirror.service.clusters.errors import ServerError, WatchStalled
from dra_mirror.service.clusters.resets import ClusterResets
from dra_mirror.service.clusters.transport import ClusterApi
from dra_mirror.service.clusters.watching import (
    Connected,
    Failed,
    KindWatcher,
    Listed,
    Observed,
    WatchMessage,
)
from dra_mirror.service.model.records import key_of
from dra_mirror.service.sim.run import ClusterSpec
from tests.clusters.conftest import FAST, FakeTime, eventually
from tests.clusters.world import claim, serving, small_world, truth

# the stall watchdog on, at kube-apiserver's bookmark interval (the clock is the test's)
WATCHED = replace(FAST, bookmark_interval=60.0, stall_intervals=2.0)
# streams that would stay open (silent) for minutes without the watchdog
LONG = replace(WATCHED, watch_timeout=300, stream_grace=30.0)


class Watches:
    """Running watchers of one cluster, sharing one ClusterResets, and what each emitted."""

    def __init__(self) -> None:
        self.watchers: dict[str, KindWatcher] = {}
        self.messages: dict[str, list[WatchMessage]] = {}

    def of(self, kind: str, cls: type) -> list:
        return [m for m in self.messages[kind] if isinstance(m, cls)]


@contextlib.asynccontextmanager
async def watching(connection, *kinds: str, settings=WATCHED, time=None) -> AsyncIterator[Watches]:
    watches = Watches()
    api = ClusterApi(connection.name, connection.api_client)
    versions = DraVersions(api)
    resets = ClusterResets(connection.name)
    tasks = []
    for kind in kinds:
        messages: list[WatchMessage] = []

        async def emit(message: WatchMessage, messages=messages) -> None:
            messages.append(message)

        watcher = KindWatcher(
            kind, api=api, versions=versions, emit=emit, settings=settings, resets=resets,
            sleep=time.sleep if time else asyncio.sleep,
            clock=time.clock if time else asyncio.get_running_loop().time,
        )  # fmt: skip
        watches.watchers[kind], watches.messages[kind] = watcher, messages
        tasks.append(asyncio.create_task(watcher.run()))
    try:
        yield watches
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def _records(listed: Listed) -> dict:
    return {key_of(r): r for r in listed.records}


async def test_a_stalled_stream_is_watched_again_after_two_silent_bookmark_intervals(
    tmp_path: Path, fake_time: FakeTime
) -> None:
    store = small_world("east")
    # the first watch after the list goes silent for an hour: no event, no bookmark
    spec = ClusterSpec(store, faults={"stallWatch": {"seconds": 3600, "afterEvents": 0}})
    async with serving(tmp_path, spec) as (_sim, [east]):
        async with watching(east, "ResourceClaim", settings=LONG, time=fake_time) as watches:
            await eventually(lambda: watches.of("ResourceClaim", Connected))
            await eventually(lambda: fake_time.waiting == 1)  # the watchdog's wait
            fake_time.advance(100)
            await asyncio.sleep(0.05)
            assert not watches.of("ResourceClaim", Failed)  # quiet, not yet stalled
            fake_time.advance(21)
            await eventually(lambda: watches.of("ResourceClaim", Failed))
            (stalled,) = watches.of("ResourceClaim", Failed)
            assert isinstance(stalled.error, WatchStalled) and stalled.retry_in == 0.0
            assert "no event or bookmark for 120s" in str(stalled.error)
            store.create("resourceclaims", claim("after-stall"))
            await eventually(lambda: watches.of("ResourceClaim", Observed))
            observed = watches.of("ResourceClaim", Observed)
            assert [o.event.record.meta.name for o in observed] == ["after-stall"]
            assert len(watches.of("ResourceClaim", Listed)) == 1  # resumed, not relisted
            assert watches.watchers["ResourceClaim"].stalls == 1


async def test_a_reset_seen_by_one_kind_relists_a_kind_that_was_failing(tmp_path: Path) -> None:
    store = small_world("east")
    for i in range(30):  # move the counter well past what a restart renumbers
        store.patch("nodes", None, "node-0", {"metadata": {"labels": {"tick": str(i)}}})
    async with serving(tmp_path, ClusterSpec(store)) as (sim, [east]):
        async with watching(east, "Node", "ResourceClaim") as watches:
            current = str(store.resource_version)
            # every stream ends with a bookmark at the cluster's version (2 s streams)
            await eventually(
                lambda: all(w.resource_version == current for w in watches.watchers.values())
            )
            served = sim.served["east"]
            # the claims watch fails from now on; etcd is restored: the counter starts again
            served.apply_faults(
                {"errors": {"code": 503, "count": 10**6, "path": "resourceclaims"},
                 "restart": {"base": 1}}
            )  # fmt: skip
            # the nodes reconnect first: "too large resource version", they relist
            await eventually(lambda: len(watches.of("Node", Listed)) == 2)
            # (a claims stream open when etcd restarted may first end "too large" itself)
            await eventually(
                lambda: any(
                    isinstance(f.error, ServerError) for f in watches.of("ResourceClaim", Failed)
                )
            )
            # meanwhile claims are deleted, and the counter passes the claims' old position
            store.delete("resourceclaims", "default", "claim-1")
            store.delete("resourceclaims", "default", "waiting")
            while store.resource_version <= int(current) + 5:
                store.patch("nodes", None, "node-1", {"metadata": {"labels": {"t": "x"}}})
                store.patch("nodes", None, "node-1", {"metadata": {"labels": {"t": "y"}}})
            served.apply_faults({"errors": None})
            # the claims relist (they would otherwise resume from their old position, which
            # the server now passed, and never hear of the deletions)
            await eventually(lambda: len(watches.of("ResourceClaim", Listed)) == 2)
            relisted = watches.of("ResourceClaim", Listed)[-1]
            assert _records(relisted) == truth(store, "ResourceClaim")
            assert watches.watchers["Node"].resets.generation == 1


async def test_a_list_older_than_the_kind_served_is_a_reset(tmp_path: Path) -> None:
    store = small_world("east")
    for i in range(30):
        store.patch("nodes", None, "node-0", {"metadata": {"labels": {"tick": str(i)}}})
    # watches from a position the server has not reached are accepted, silently, as
    # kube-apiserver's watch cache accepts them
    spec = ClusterSpec(store, faults={"futureWatches": "wait"})
    async with serving(tmp_path, spec) as (sim, [east]):
        async with watching(east, "Node", "ResourceClaim") as watches:
            current = str(store.resource_version)
            await eventually(
                lambda: all(w.resource_version == current for w in watches.watchers.values())
            )
            # restored, and the nodes' next watch is refused with a plain 410: their relist
            # is older than what they served, the only evidence there is
            sim.served["east"].apply_faults({"restart": {"base": 1}, "expireWatches": 1})
            store.delete("resourceclaims", "default", "claim-1")
            await eventually(lambda: len(watches.of("Node", Listed)) == 2)
            # the claims were watching silently from the future: they relist too
            await eventually(lambda: len(watches.of("ResourceClaim", Listed)) == 2)
            relisted = watches.of("ResourceClaim", Listed)[-1]
            assert _records(relisted) == truth(store, "ResourceClaim")
            assert int(relisted.resource_version) < int(current)


async def test_a_silent_watch_from_the_future_is_found_after_a_stall(
    tmp_path: Path, fake_time: FakeTime
) -> None:
    store = small_world("east")
    for i in range(30):
        store.patch("nodes", None, "node-0", {"metadata": {"labels": {"tick": str(i)}}})
    spec = ClusterSpec(store, faults={"futureWatches": "wait"})
    async with serving(tmp_path, spec) as (sim, [east]):
        async with watching(east, "Node", settings=LONG, time=fake_time) as watches:
            await eventually(lambda: watches.of("Node", Connected))
            sim.served["east"].apply_faults({"restart": {"base": 1}})  # ends the stream
            store.delete("nodes", None, "node-2")
            # the watch resumes from its old position: accepted, and silent
            await eventually(lambda: len(watches.of("Node", Connected)) == 2)
            await eventually(lambda: fake_time.waiting == 1)
            fake_time.advance(121)
            # stalled; the kind's current version is older than the position: relisted
            await eventually(lambda: len(watches.of("Node", Listed)) == 2)
            assert _records(watches.of("Node", Listed)[-1]) == truth(store, "Node")
            assert watches.watchers["Node"].resets.generation == 1
