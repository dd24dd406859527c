"""WATCH through kubernetes_asyncio: start after a resourceVersion, initial events,
bookmarks, timeoutSeconds, selectors, 410 Expired for versions outside the window."""

from __future__ import annotations

import asyncio
import itertools
import json
import time

import pytest
from kubernetes_asyncio import client, watch
from kubernetes_asyncio.client.exceptions import ApiException

from dra_mirror.service.sim.run import ClusterSpec, Simulator
from dra_mirror.service.sim.store import ClusterStore
from tests.sim.conftest import api_client_for, claim_body

GROUP = "resource.k8s.io"


async def collect(func, *args, count: int = 0, **kwargs) -> list[dict]:
    """Events of one watch: the first `count`, or all until the server ends the stream."""
    seen: list[dict] = []
    async with watch.Watch(return_type="object") as w:
        async for event in w.stream(func, *args, **kwargs):
            seen.append(event)
            if count and len(seen) >= count:
                break
    return seen


def names(events: list[dict]) -> list[tuple[str, str]]:
    return [(e["type"], e["object"]["metadata"].get("name", "")) for e in events]


async def test_watch_from_resource_version_sees_later_changes(
    api: client.ApiClient, store: ClusterStore
):
    store.create("resourceclaims", claim_body("before"))
    listed = await client.ResourceV1Api(api).list_resource_claim_for_all_namespaces()
    rv = listed.metadata.resource_version

    async def changes() -> None:
        await asyncio.sleep(0.05)
        store.create("resourceclaims", claim_body("after"))
        store.patch("resourceclaims", "default", "after", {"metadata": {"labels": {"x": "y"}}})
        store.delete("resourceclaims", "default", "before")

    task = asyncio.create_task(changes())
    events = await collect(
        client.CustomObjectsApi(api).list_cluster_custom_object,
        GROUP,
        "v1",
        "resourceclaims",
        count=3,
        resource_version=rv,
        timeout_seconds=5,
    )
    await task
    assert names(events) == [("ADDED", "after"), ("MODIFIED", "after"), ("DELETED", "before")]


async def test_watch_from_zero_sends_current_objects_first(
    api: client.ApiClient, store: ClusterStore
):
    store.create("resourceclaims", claim_body("a"))
    store.create("resourceclaims", claim_body("b"))
    events = await collect(
        client.ResourceV1Api(api).list_resource_claim_for_all_namespaces,
        count=2,
        resource_version="0",
        timeout_seconds=5,
    )
    assert names(events) == [("ADDED", "a"), ("ADDED", "b")]


async def test_bookmarks_and_timeout_end_the_stream(api: client.ApiClient, store: ClusterStore):
    start = store.resource_version
    store.create("resourceclaims", claim_body("a"))
    seen = await collect(
        client.CustomObjectsApi(api).list_cluster_custom_object,
        GROUP,
        "v1",
        "resourceclaims",
        resource_version=str(start),
        allow_watch_bookmarks=True,
        timeout_seconds=1,
    )
    # The stream ended by itself (timeoutSeconds) after the ADDED and at least one bookmark.
    assert seen[0]["type"] == "ADDED"
    bookmarks = [e["object"] for e in seen if e["type"] == "BOOKMARK"]
    assert bookmarks and bookmarks[-1] == {
        "kind": "ResourceClaim",
        "apiVersion": "resource.k8s.io/v1",
        "metadata": {"resourceVersion": str(store.resource_version)},
    }


async def test_send_initial_events_ends_with_annotated_bookmark(
    api: client.ApiClient, store: ClusterStore
):
    store.create("resourceclaims", claim_body("a"))
    response = await api.call_api(
        "/apis/resource.k8s.io/v1/resourceclaims",
        "GET",
        query_params=[
            ("watch", "true"),
            ("sendInitialEvents", "true"),
            ("resourceVersionMatch", "NotOlderThan"),
            ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", "1"),
        ],
        _preload_content=False,
    )
    lines = [line for line in (await response.read()).decode().splitlines() if line]
    events = [json.loads(line) for line in lines]
    assert events[0]["type"] == "ADDED" and events[0]["object"]["metadata"]["name"] == "a"
    assert events[1]["type"] == "BOOKMARK"
    assert events[1]["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}


async def test_selector_moves_become_added_and_deleted(api: client.ApiClient, store: ClusterStore):
    store.create("resourceclaims", claim_body("c", labels={"app": "web"}))
    rv = str(store.resource_version)

    async def relabel() -> None:
        await asyncio.sleep(0.05)
        store.patch("resourceclaims", "default", "c", {"metadata": {"labels": {"app": "db"}}})
        store.patch("resourceclaims", "default", "c", {"metadata": {"labels": {"app": "web"}}})

    task = asyncio.create_task(relabel())
    events = await collect(
        client.ResourceV1Api(api).list_resource_claim_for_all_namespaces,
        count=2,
        resource_version=rv,
        label_selector="app=web",
        timeout_seconds=5,
    )
    await task
    assert names(events) == [("DELETED", "c"), ("ADDED", "c")]


async def test_expired_resource_version_is_410(tmp_path):
    store = ClusterStore("small", window=5)
    async with Simulator([ClusterSpec(store)], kubeconfig_path=tmp_path / "kc") as sim:
        old = store.resource_version
        for i in range(10):
            store.create("resourceclaims", claim_body(f"c{i}"))
        assert sim.kubeconfig_path is not None
        async with await api_client_for(sim.kubeconfig_path, "small") as api:
            with pytest.raises(ApiException) as error:
                await collect(
                    client.ResourceV1Api(api).list_resource_claim_for_all_namespaces,
                    resource_version=str(old),
                    timeout_seconds=2,
                )
            assert error.value.status == 410
            with pytest.raises(ApiException) as error:
                await client.ResourceV1Api(api).list_resource_claim_for_all_namespaces(
                    resource_version=str(old), resource_version_match="Exact"
                )
            assert error.value.status == 410


async def test_a_quiet_kind_hears_a_bookmark_every_interval_while_others_change(
    api: client.ApiClient, store: ClusterStore
):
    """Events of other kinds wake every stream; the bookmark of a quiet kind still comes one
    interval (0.2 s here) after the last, not up to two intervals later."""
    start = str(store.resource_version)
    stamps: list[float] = []

    async def churn() -> None:  # a node changes every 0.195 s: never quiet for a whole interval
        store.create("nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}})
        for i in range(20):
            await asyncio.sleep(0.195)
            store.patch("nodes", None, "n", {"metadata": {"labels": {"tick": str(i)}}})

    task = asyncio.create_task(churn())
    try:
        async with watch.Watch(return_type="object") as w:
            async for event in w.stream(
                client.CustomObjectsApi(api).list_cluster_custom_object,
                GROUP, "v1", "resourceclaims", resource_version=start,
                allow_watch_bookmarks=True, timeout_seconds=3,
            ):  # fmt: skip
                if event["type"] == "BOOKMARK":
                    stamps.append(time.monotonic())
    finally:
        task.cancel()
    gaps = [b - a for a, b in itertools.pairwise(stamps)]
    assert len(stamps) >= 8 and max(gaps) < 0.33, gaps
