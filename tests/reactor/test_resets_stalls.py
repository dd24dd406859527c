"""A reactor against the simulator over HTTP when the API server's resourceVersions reset or a
watch stalls: claims deleted while the claims watch was failing do not survive a restore that
restarted the counter lower (every kind relists once any kind sees the reset), and a stalled
stream is counted in the cluster's status and watched again."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from dra_mirror.service.http.readiness import StoreHealth, readiness
from dra_mirror.service.reactor.reactor import run_reactors
from dra_mirror.service.sim.run import ClusterSpec
from dra_mirror.service.stores.memory import MemoryStore
from tests.clusters.conftest import FAST, eventually
from tests.clusters.world import all_truth, claim, small_world
from tests.clusters.world import serving as served_by
from tests.reactor.test_reactor import SETTINGS, mirrored


async def test_claims_deleted_during_a_reset_do_not_survive_as_ghosts(tmp_path: Path) -> None:
    world = small_world("east", nodes=3)
    for i in range(6):
        world.create("resourceclaims", claim(f"batch-{i}"))
    for i in range(30):  # the counter well past what a restart renumbers
        world.patch("nodes", None, "node-0", {"metadata": {"labels": {"tick": str(i)}}})
    store = MemoryStore()
    async with served_by(tmp_path, ClusterSpec(world)) as (sim, connections):
        async with await run_reactors(
            connections,
            sinks=[store],
            status_sink=store,
            settings=SETTINGS,
            tune_gc=False,
            open_index=store.open_index,
        ) as reactors:
            await reactors.wait_synced()
            reactor = reactors.by_name["east"]
            current = str(world.resource_version)
            # each kind's stream ends (2 s) with a bookmark at the cluster's version
            await eventually(  # every kind served (no DeviceTaintRule here)
                lambda: all(
                    w.resource_version == current
                    for kind, w in reactor.watchers.items()
                    if kind in reactor.listed
                )
            )
            served = sim.served["east"]
            # The ResourceClaim watch fails with 503 from now on, and the API server comes
            # back from an etcd restore: its counter starts again at 1, every stream ends.
            served.apply_faults(
                {"errors": {"code": 503, "count": 10**6, "path": "resourceclaims"},
                 "restart": {"base": 1}}
            )  # fmt: skip
            # The other kinds reconnect: "too large resource version"; they relist.
            await eventually(lambda: reactor.status.relists >= 5)
            # Meanwhile seven claims are deleted and the counter passes the claims' position.
            deleted = ["claim-1", "waiting", *(f"batch-{i}" for i in range(5))]
            for name in deleted:
                world.delete("resourceclaims", "default", name)
            while world.resource_version <= int(current) + 10:
                world.patch("nodes", None, "node-1", {"metadata": {"labels": {"t": "x"}}})
                world.patch("nodes", None, "node-1", {"metadata": {"labels": {"t": "y"}}})
            served.apply_faults({"errors": None})
            # The claims watch relists instead of resuming from its old position, which the
            # restored server has passed: the deleted claims are gone from the mirror.
            await eventually(lambda: reactor.status.relists >= 6 and reactor.status.connected)
            await eventually(lambda: not reactor._pending and reactor.feed.empty())
            claims = {r.meta.name for r in await store.list("ResourceClaim", cluster="east")}
            assert not claims & set(deleted)
            assert await mirrored(store, "east") == all_truth(world)
            assert reactor.resets.generation == 1  # one reset, however many kinds saw it


async def test_a_stalled_watch_is_counted_in_the_status_and_watched_again(
    tmp_path: Path,
) -> None:
    world = small_world("east")
    store = MemoryStore()
    # the first watch stream after a list goes silent for an hour (whichever kind it is)
    spec = ClusterSpec(world, faults={"stallWatch": {"seconds": 3600, "afterEvents": 0}})
    # bookmarks every 0.2 s (real time): two silent intervals are 0.4 s
    watch = replace(FAST, bookmark_interval=0.2, stall_intervals=2.0, watch_timeout=60)
    settings = replace(SETTINGS, watch=watch)
    async with served_by(tmp_path, spec, bookmark_interval=0.2) as (_sim, connections):
        async with await run_reactors(
            connections,
            sinks=[store],
            status_sink=store,
            settings=settings,
            tune_gc=False,
            open_index=store.open_index,
        ) as reactors:
            await reactors.wait_synced()
            reactor = reactors.by_name["east"]
            await eventually(lambda: sum(reactor.status.stalls.values()) == 1)
            world.create("resourceclaims", claim("after-stall"))

            async def exact() -> bool:
                return await mirrored(store, "east") == all_truth(world)

            await eventually(exact)
            await eventually(lambda: reactor.status.connected and reactor.status.error is None)
            assert reactor.status.relists == 0  # watched again from its position

            async def pushed() -> bool:
                [status] = await store.clusters()
                return sum(status.stalls.values()) == 1 and status.connected

            await eventually(pushed)


class WatchedMarks:
    """A sink that keeps the `cluster_watched` marks it is given, in order, after what."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, ...]] = []

    async def apply(self, changes) -> None:
        self.calls.append(("changes", changes.at))

    async def cluster_started(self, cluster: str, at: str) -> None:
        self.calls.append(("started", at))

    async def record_gap(self, cluster: str, start: str, end: str) -> None:
        self.calls.append(("gap", start))

    async def cluster_watched(self, cluster: str, until: str) -> None:
        self.calls.append(("watched", until))


async def test_a_quiet_cluster_is_marked_watched_by_its_bookmarks_and_its_clean_stop(
    tmp_path: Path,
) -> None:
    world = small_world("east")
    store, marks = MemoryStore(), WatchedMarks()
    watch = replace(FAST, bookmark_interval=0.2, watch_timeout=60)
    settings = replace(SETTINGS, watch=watch, watched_interval=0.1)
    async with served_by(tmp_path, ClusterSpec(world), bookmark_interval=0.2) as (_s, connections):
        async with await run_reactors(
            connections,
            sinks=[store, marks],
            status_sink=store,
            settings=settings,
            tune_gc=False,
            open_index=store.open_index,
        ) as reactors:
            await reactors.wait_synced()
            last_change = max(at for kind, at in marks.calls if kind == "changes")
            # nothing changes: the bookmarks alone say the cluster is watched, later and later
            await eventually(lambda: len([c for c in marks.calls if c[0] == "watched"]) >= 2)
            watched = [at for kind, at in marks.calls if kind == "watched"]
            assert watched == sorted(watched) and watched[-1] > last_change
            stopping = len(marks.calls)
        # a clean stop says so last, after every batch
        assert marks.calls[-1][0] == "watched" and len(marks.calls) > stopping
        assert marks.calls[-1][1] >= watched[-1]


class Statuses:
    """A status sink that keeps every status pushed (and is the store's, too)."""

    def __init__(self, store: MemoryStore) -> None:
        self.store = store
        self.pushed: list[tuple[bool, str | None]] = []

    async def set_status(self, status) -> None:
        self.pushed.append((status.connected, status.error))
        await self.store.set_status(status)


async def test_a_reset_behind_silent_watches_is_found_in_seconds_and_served_stale(
    tmp_path: Path,
) -> None:
    """An etcd restore as kube-apiserver's watch cache takes it: every watch reconnects from
    a position the server never reached and hears nothing at all (no bookmark). The silent
    streams' position checks (a LIST of one object) find it long before the stall limit (30 s
    here), every kind relists, and the cluster says `stale` — not connected, the reset named —
    until they have: the claims deleted meanwhile do not linger."""
    world = small_world("east", nodes=3)
    for i in range(6):
        world.create("resourceclaims", claim(f"batch-{i}"))
    for i in range(30):  # the counter well past what a restart renumbers
        world.patch("nodes", None, "node-0", {"metadata": {"labels": {"tick": str(i)}}})
    store = MemoryStore()
    statuses = Statuses(store)
    watch = replace(FAST, bookmark_interval=1.0, stall_intervals=30.0, quiet_intervals=0.0,
                    position_check_interval=0.3, watch_timeout=60)  # fmt: skip
    settings = replace(SETTINGS, watch=watch)
    async with served_by(tmp_path, ClusterSpec(world), bookmark_interval=1.0) as (sim, conns):
        async with await run_reactors(
            conns,
            sinks=[store],
            status_sink=statuses,
            settings=settings,
            tune_gc=False,
            open_index=store.open_index,
        ) as reactors:
            await reactors.wait_synced()
            reactor = reactors.by_name["east"]
            await eventually(lambda: reactor.status.connected)
            sim.served["east"].apply_faults({"futureWatches": "wait", "restart": {"base": 1}})
            deleted = ["claim-1", "waiting", *(f"batch-{i}" for i in range(5))]
            for name in deleted:
                world.delete("resourceclaims", "default", name)
            before = len(statuses.pushed)

            async def exact() -> bool:
                return await mirrored(store, "east") == all_truth(world)

            await eventually(exact, within=8)  # the stall limit is 30 s
            assert reactor.resets.generation == 1
            assert sum(reactor.status.stalls.values()) == 0
            stale = [e for c, e in statuses.pushed[before:] if not c]
            assert stale and any("reset" in (e or "") for e in stale), statuses.pushed[before:]
            await eventually(lambda: reactor.status.connected and reactor.status.error is None)


class Gaps(WatchedMarks):
    def __init__(self) -> None:
        super().__init__()
        self.gaps: list[tuple[str, str]] = []

    async def record_gap(self, cluster: str, start: str, end: str) -> None:
        self.gaps.append((start, end))


async def test_a_watch_silent_past_its_bookmark_deadline_is_stale_until_heard_again(
    tmp_path: Path,
) -> None:
    """A stream that misses its bookmark (0.2 s interval, deadline 0.25 s) makes the cluster
    `stale` with the kind and the silence named, before the stall limit (10 s); heard again,
    it is connected: no stall, no relist, and no gap (nothing was missed)."""
    world = small_world("east")
    store, gaps = MemoryStore(), Gaps()
    statuses = Statuses(store)
    spec = ClusterSpec(world, faults={"stallWatch": {"seconds": 1.5, "afterEvents": 0}})
    watch = replace(FAST, bookmark_interval=0.2, stall_intervals=50.0, watch_timeout=60,
                    quiet_intervals=1.25)  # fmt: skip
    settings = replace(SETTINGS, watch=watch)
    async with served_by(tmp_path, spec, bookmark_interval=0.2) as (_sim, connections):
        async with await run_reactors(
            connections,
            sinks=[store, gaps],
            status_sink=statuses,
            settings=settings,
            tune_gc=False,
            open_index=store.open_index,
        ) as reactors:
            await reactors.wait_synced()
            reactor = reactors.by_name["east"]
            await eventually(lambda: not reactor.status.connected, within=5)
            assert "possibly stale" in (reactor.status.error or ""), reactor.status.error

            async def served_stale() -> bool:  # what /readyz answers from the pushed status
                answer = readiness(store=StoreHealth(True), statuses=await store.clusters())
                return answer.ready and answer.clusters == {"east": "stale"}

            await eventually(served_stale, within=5)
            await eventually(lambda: reactor.status.connected, within=10)
            assert reactor.status.error is None
            assert (reactor.status.relists, sum(reactor.status.stalls.values())) == (0, 0)
            assert any(not connected for connected, _ in statuses.pushed)
    assert gaps.gaps == []
