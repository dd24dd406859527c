"""One kind's list + watch against the simulator over HTTP, through the real kubernetes_asyncio
client: paging, events, 410 relists, dropped and stalled streams, restarts, bookmarks,
Retry-After, version discovery and malformed objects."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import pytest

from dra_mirror.service.clusters.discovery import DraVersions
from dra_mirror.service.clusters.errors import (
    Expired,
    NotServed,
    ServerError,
    Throttled,
    Unreachable,
)
from dra_mirror.service.clusters.transport import ClusterApi
from dra_mirror.service.clusters.watching import (
    Bookmarked,
    Connected,
    Failed,
    KindWatcher,
    Listed,
    Observed,
    Skipped,
    WatchMessage,
    WatchSettings,
)
from dra_mirror.service.model.records import key_of
from dra_mirror.service.sim.run import ClusterSpec
from tests.clusters.conftest import FAST, RecordingSleep, eventually
from tests.clusters.world import claim, device_slice, serving, small_world, truth


class Watch:
    """A running KindWatcher and everything it emitted."""

    def __init__(self, watcher: KindWatcher, messages: list[WatchMessage]) -> None:
        self.watcher = watcher
        self.messages = messages

    def of(self, cls: type) -> list:
        return [m for m in self.messages if isinstance(m, cls)]


@contextlib.asynccontextmanager
async def watching(
    connection,
    kind: str,
    *,
    settings: WatchSettings = FAST,
    sleep=asyncio.sleep,
    api=None,
    rediscover_after: float = 300.0,
) -> AsyncIterator[Watch]:
    messages: list[WatchMessage] = []

    async def emit(message: WatchMessage) -> None:
        messages.append(message)

    api = api or ClusterApi(connection.name, connection.api_client)
    watcher = KindWatcher(
        kind,
        api=api,
        versions=DraVersions(api, max_age=rediscover_after),
        emit=emit,
        sleep=sleep,
        settings=settings,
    )
    task = asyncio.create_task(watcher.run())
    try:
        yield Watch(watcher, messages)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_paged_list_then_events_in_order(tmp_path: Path) -> None:
    store = small_world("east", nodes=5)
    async with serving(tmp_path, ClusterSpec(store)) as (_sim, [east]):
        paged = replace(FAST, page_size=2)  # 5 claims + "waiting": three pages
        async with watching(east, "ResourceClaim", settings=paged) as watch:
            await eventually(lambda: watch.of(Listed))
            [listed] = watch.of(Listed)
            assert {key_of(r): r for r in listed.records} == truth(store, "ResourceClaim")
            assert listed.resource_version == str(store.resource_version)
            assert listed.api_version == "v1"

            store.create("resourceclaims", claim("new"))
            store.patch("resourceclaims", "default", "new", {"metadata": {"labels": {"a": "b"}}})
            store.delete("resourceclaims", "default", "new")
            await eventually(lambda: len(watch.of(Observed)) == 3)
            events = watch.of(Observed)
            assert [e.event.type for e in events] == ["ADDED", "MODIFIED", "DELETED"]
            assert {e.event.record.meta.name for e in events} == {"new"}
            assert events[1].event.record.meta.labels == {"a": "b"}
            assert watch.watcher.resource_version == str(store.resource_version)
            assert len(watch.of(Listed)) == 1


async def test_expired_continue_token_restarts_the_list(tmp_path: Path) -> None:
    store = small_world("east", nodes=4)
    async with serving(tmp_path, ClusterSpec(store)) as (sim, [east]):
        pages: list[str] = []

        class RestartAfterFirstPage(ClusterApi):
            async def get(self, path, params=None, *, time_limit=60.0):
                pages.append(str((params or {}).get("continue", "")))
                body = await super().get(path, params, time_limit=time_limit)
                if len(pages) == 1:
                    # an etcd restore between two pages: the continue token is now stale
                    sim.served["east"].apply_faults({"restart": True})
                return body

        api = RestartAfterFirstPage("east", east.api_client)
        async with watching(east, "Pod", settings=replace(FAST, page_size=1), api=api) as watch:
            await eventually(lambda: watch.of(Listed))
            [listed] = watch.of(Listed)
            assert {key_of(r): r for r in listed.records} == truth(store, "Pod")
            assert listed.resource_version == str(store.resource_version)
            # page 1, its continue token refused (410), then the whole list again from page 1
            assert pages[0] == "" and pages[1] != "" and pages[2] == ""
            assert not watch.of(Failed)


async def test_watch_410_relists(tmp_path: Path) -> None:
    store = small_world("east")
    async with serving(tmp_path, ClusterSpec(store)) as (sim, [east]):
        async with watching(
            east, "ResourceClaim", settings=replace(FAST, watch_timeout=1)
        ) as watch:
            await eventually(lambda: watch.of(Listed) and watch.of(Connected))
            # faults apply to streams opened after them: the current stream ends by its
            # timeout (with a bookmark), the watch after it gets 410
            sim.served["east"].apply_faults({"dropWatchAfterEvents": 1, "expireWatches": 1})
            store.create("resourceclaims", claim("late"))
            await eventually(lambda: len(watch.of(Listed)) == 2)
            relisted = watch.of(Listed)[1]
            assert {key_of(r): r for r in relisted.records} == truth(store, "ResourceClaim")
            assert not watch.of(Failed)  # a 410 is routine, not a failure


async def test_watches_expiring_right_after_each_list_back_off(
    tmp_path: Path, recording_sleep: RecordingSleep
) -> None:
    store = small_world("east")
    spec = ClusterSpec(store, faults={"expireWatches": 3})
    async with serving(tmp_path, spec) as (_sim, [east]):
        async with watching(east, "Node", sleep=recording_sleep) as watch:
            await eventually(lambda: len(watch.of(Listed)) == 4)
            failures = watch.of(Failed)
            assert [f.attempt for f in failures] == [1, 2, 3]
            assert all(isinstance(f.error, Expired) for f in failures)
            assert len(recording_sleep.delays) == 3  # a pause before each relist
            store.create("nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n9"}})
            await eventually(lambda: watch.of(Observed))


async def test_dropped_streams_lose_and_repeat_nothing(tmp_path: Path) -> None:
    store = small_world("east")
    async with serving(tmp_path, ClusterSpec(store)) as (sim, [east]):
        async with watching(east, "ResourceClaim") as watch:
            await eventually(lambda: watch.of(Listed))
            sim.served["east"].apply_faults({"dropWatchAfterEvents": 2})
            for i in range(7):
                store.create("resourceclaims", claim(f"burst-{i}"))
            await eventually(lambda: len(watch.of(Observed)) == 7)
            names = [m.event.record.meta.name for m in watch.of(Observed)]
            assert names == [f"burst-{i}" for i in range(7)]
            assert len(watch.of(Listed)) == 1  # resumed from the last resourceVersion each time


async def test_stalled_stream_times_out_and_resumes(tmp_path: Path) -> None:
    store = small_world("east")
    async with serving(tmp_path, ClusterSpec(store)) as (sim, [east]):
        settings = replace(FAST, watch_timeout=1, stream_grace=0.5)
        async with watching(east, "ResourceClaim", settings=settings) as watch:
            await eventually(lambda: watch.of(Listed))
            sim.served["east"].apply_faults({"stallWatch": {"seconds": 30, "afterEvents": 0}})
            await eventually(lambda: watch.of(Failed))
            assert isinstance(watch.of(Failed)[0].error, Unreachable)
            store.create("resourceclaims", claim("after-stall"))
            await eventually(lambda: watch.of(Observed))
            assert watch.of(Observed)[0].event.record.meta.name == "after-stall"
            assert len(watch.of(Listed)) == 1


async def test_restart_resetting_resource_versions_relists(tmp_path: Path) -> None:
    store = small_world("east")
    async with serving(tmp_path, ClusterSpec(store)) as (sim, [east]):
        async with watching(east, "Node") as watch:
            await eventually(lambda: watch.of(Listed))
            before = watch.of(Listed)[0].resource_version
            sim.served["east"].apply_faults({"restart": {"base": 1}})
            await eventually(lambda: len(watch.of(Listed)) == 2)
            after = watch.of(Listed)[1]
            assert int(after.resource_version) < int(before)
            assert after.resource_version == str(store.resource_version)
            assert {key_of(r): r for r in after.records} == truth(store, "Node")
            store.create("nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n9"}})
            await eventually(lambda: watch.of(Observed))
            assert watch.of(Observed)[0].event.record.meta.name == "n9"


async def test_bookmarks_advance_the_resource_version(tmp_path: Path) -> None:
    store = small_world("east")
    async with serving(tmp_path, ClusterSpec(store)) as (_sim, [east]):
        async with watching(east, "DeviceClass", settings=replace(FAST, watch_timeout=1)) as watch:
            await eventually(lambda: watch.of(Listed))
            listed_at = watch.of(Listed)[0].resource_version
            for i in range(3):  # other kinds move the cluster's resourceVersion on
                store.create("resourceclaims", claim(f"other-{i}"))
            moved = str(store.resource_version)
            assert moved != listed_at
            # the stream ends by timeout with a bookmark at the cluster's current version
            await eventually(lambda: any(b.resource_version == moved for b in watch.of(Bookmarked)))
            assert watch.watcher.resource_version == moved
            assert not watch.of(Observed)


@pytest.mark.parametrize(("code", "error"), [(429, Throttled), (503, ServerError)])
async def test_retry_after_is_honoured(
    tmp_path: Path, recording_sleep: RecordingSleep, code: int, error: type
) -> None:
    store = small_world("east")
    faults = {"errors": {"code": code, "count": 2, "retryAfter": 7, "path": "/pods"}}
    async with serving(tmp_path, ClusterSpec(store, faults=faults)) as (_sim, [east]):
        async with watching(east, "Pod", sleep=recording_sleep) as watch:
            await eventually(lambda: watch.of(Listed))
            assert recording_sleep.delays[:2] == [7.0, 7.0]
            failures = watch.of(Failed)
            assert [f.attempt for f in failures] == [1, 2]
            assert all(isinstance(f.error, error) and f.retry_in == 7.0 for f in failures)
            assert {key_of(r): r for r in watch.of(Listed)[0].records} == truth(store, "Pod")


async def test_v1beta1_only_cluster(tmp_path: Path) -> None:
    store = small_world("old")
    async with serving(tmp_path, ClusterSpec(store, versions=("v1beta1",))) as (_sim, [old]):
        for kind in ("ResourceSlice", "ResourceClaim"):
            async with watching(old, kind) as watch:
                await eventually(lambda w=watch: w.of(Listed))
                [listed] = watch.of(Listed)
                assert listed.api_version == "v1beta1"
                assert {key_of(r): r for r in listed.records} == truth(store, kind)


async def test_disappearing_version_is_rediscovered(tmp_path: Path) -> None:
    store = small_world("east")
    spec = ClusterSpec(store, versions=("v1", "v1beta1"))
    async with serving(tmp_path, spec) as (sim, [east]):
        async with watching(
            east, "ResourceSlice", settings=replace(FAST, watch_timeout=1)
        ) as watch:
            await eventually(lambda: watch.of(Listed))
            assert watch.of(Listed)[0].api_version == "v1"
            sim.served["east"].apply_faults({"hideVersions": ["v1"], "dropWatchAfterEvents": 1})
            store.create("resourceslices", device_slice("node-9"))
            await eventually(lambda: len(watch.of(Listed)) == 2)
            relisted = watch.of(Listed)[1]
            assert relisted.api_version == "v1beta1"
            assert {key_of(r): r for r in relisted.records} == truth(store, "ResourceSlice")
            assert isinstance(watch.of(Failed)[0].error, NotServed)


async def test_upgraded_cluster_is_followed_without_a_relist(tmp_path: Path) -> None:
    store = small_world("east")
    faults = {"hideVersions": ["v1"]}  # an older cluster: v1beta1 only, for now
    spec = ClusterSpec(store, versions=("v1", "v1beta1"), faults=faults)
    async with serving(tmp_path, spec) as (sim, [east]):
        settings = replace(FAST, watch_timeout=1)
        async with watching(east, "ResourceClaim", settings=settings, rediscover_after=0) as watch:
            await eventually(lambda: watch.of(Listed))
            assert watch.of(Listed)[0].api_version == "v1beta1"
            sim.served["east"].apply_faults({"hideVersions": None})  # the upgrade
            await eventually(lambda: watch.watcher.api_version == "v1")
            await eventually(
                lambda: watch.of(Connected) and watch.of(Connected)[-1].api_version == "v1"
            )
            store.create("resourceclaims", claim("after-upgrade"))
            await eventually(lambda: watch.of(Observed))
            assert watch.of(Observed)[0].event.record.meta.name == "after-upgrade"
            assert len(watch.of(Listed)) == 1 and not watch.of(Failed)


async def test_no_dra_version_is_reported_and_retried(
    tmp_path: Path, recording_sleep: RecordingSleep
) -> None:
    store = small_world("bare")
    faults = {"hideVersions": ["v1", "v1beta2", "v1beta1"]}
    async with serving(tmp_path, ClusterSpec(store, faults=faults)) as (sim, [bare]):
        async with watching(bare, "DeviceClass", sleep=recording_sleep) as watch:
            await eventually(lambda: len(watch.of(Failed)) >= 3)
            assert all(isinstance(f.error, NotServed) for f in watch.of(Failed))
            assert "resource.k8s.io" in str(watch.of(Failed)[0].error)
            assert not watch.of(Listed)
            sim.served["bare"].apply_faults({"hideVersions": None})
            await eventually(lambda: watch.of(Listed))
            assert {key_of(r): r for r in watch.of(Listed)[0].records} == truth(
                store, "DeviceClass"
            )


async def test_malformed_object_is_skipped_and_the_rest_listed(tmp_path: Path) -> None:
    store = small_world("east")
    broken = device_slice("node-bad")
    broken["spec"]["devices"] = "not a list"
    store.bulk_load("resourceslices", [broken])
    async with serving(tmp_path, ClusterSpec(store)) as (_sim, [east]):
        async with watching(east, "ResourceSlice") as watch:
            await eventually(lambda: watch.of(Listed))
            [skipped] = watch.of(Skipped)
            assert skipped.malformed.ref == "east/ResourceSlice/node-bad-gpu.example.com"
            assert skipped.resource_version == broken["metadata"]["resourceVersion"] != ""
            listed = {key_of(r): r for r in watch.of(Listed)[0].records}
            assert listed == truth(store, "ResourceSlice")
            assert len(listed) == 3 and len(store.list("resourceslices")) == 4
