"""Each injectable fault, set through `POST /sim/faults` and observed with kubernetes_asyncio."""

from __future__ import annotations

import asyncio
import json
import time

import httpx
import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from dra_mirror.service.sim.run import Simulator
from dra_mirror.service.sim.store import ClusterStore
from tests.sim.conftest import claim_body
from tests.sim.test_watch import collect

CLAIMS = "/apis/resource.k8s.io/v1/resourceclaims"


async def set_faults(sim: Simulator, faults: dict) -> dict:
    async with httpx.AsyncClient(base_url=sim.url("alpha")) as http:
        response = await http.post("/sim/faults", json=faults)
        assert response.status_code == 200, response.text
        return response.json()


async def raw_watch(api: client.ApiClient, **params: str):
    query = [("watch", "true"), *params.items()]
    return await api.call_api(CLAIMS, "GET", query_params=query, _preload_content=False)


async def test_drop_watch_after_events(sim: Simulator, api: client.ApiClient, store: ClusterStore):
    start = str(store.resource_version)
    for i in range(5):
        store.create("resourceclaims", claim_body(f"c{i}"))
    await set_faults(sim, {"dropWatchAfterEvents": 2})
    # The stream ends after two events although it asked for 30 s.
    response = await raw_watch(api, resourceVersion=start, timeoutSeconds="30")
    lines = (await response.read()).decode().splitlines()
    assert [json.loads(line)["object"]["metadata"]["name"] for line in lines] == ["c0", "c1"]
    await set_faults(sim, {"dropWatchAfterEvents": None})
    response = await raw_watch(api, resourceVersion=start, timeoutSeconds="1")
    assert len((await response.read()).decode().splitlines()) == 5


async def test_drop_watches_ends_the_open_streams_at_once(
    sim: Simulator, api: client.ApiClient, store: ClusterStore
):
    store.create("resourceclaims", claim_body("before"))
    start = str(store.resource_version)
    response = await raw_watch(api, resourceVersion=start, timeoutSeconds="30")
    await asyncio.sleep(0.2)  # the stream is open and quiet
    began = time.monotonic()
    answer = await set_faults(sim, {"dropWatches": True})
    assert "dropWatches" not in answer.get("faults", answer)  # an action, not a setting
    assert (await response.read()) == b""  # ended without an event, long before its 30 s
    assert time.monotonic() - began < 10
    # the versions are kept: a watch from the same position goes on as before
    store.create("resourceclaims", claim_body("after"))
    again = await raw_watch(api, resourceVersion=start, timeoutSeconds="1")
    names = [json.loads(line)["object"]["metadata"]["name"] for line in
             (await again.read()).decode().splitlines()]  # fmt: skip
    assert names == ["after"]


async def test_expire_next_watches(sim: Simulator, api: client.ApiClient, store: ClusterStore):
    await set_faults(sim, {"expireWatches": 2})
    claims = client.ResourceV1Api(api)
    for _ in range(2):
        with pytest.raises(ApiException) as error:
            await collect(
                claims.list_resource_claim_for_all_namespaces,
                resource_version=str(store.resource_version),
                timeout_seconds=5,
            )
        assert error.value.status == 410
    store.create("resourceclaims", claim_body("third"))
    events = await collect(
        claims.list_resource_claim_for_all_namespaces,
        count=1,
        resource_version="0",
        timeout_seconds=5,
    )
    assert events[0]["type"] == "ADDED"


@pytest.mark.parametrize("code", [429, 500, 503])
async def test_errors_with_retry_after(sim: Simulator, api: client.ApiClient, code: int):
    await set_faults(
        sim, {"errors": {"code": code, "count": 2, "retryAfter": 3, "path": "resourceclaims"}}
    )
    claims = client.ResourceV1Api(api)
    # Other paths are not affected.
    await claims.list_resource_slice()
    for _ in range(2):
        with pytest.raises(ApiException) as error:
            await claims.list_resource_claim_for_all_namespaces()
        assert error.value.status == code
        assert error.value.headers["Retry-After"] == "3"
        assert json.loads(error.value.body)["details"]["retryAfterSeconds"] == 3
    await claims.list_resource_claim_for_all_namespaces()


async def test_error_path_glob(sim: Simulator, api: client.ApiClient):
    await set_faults(sim, {"errors": {"code": 500, "count": 1, "path": "/api/v1/*"}})
    await client.ResourceV1Api(api).list_resource_slice()  # not under /api/v1
    with pytest.raises(ApiException) as error:
        await client.CoreV1Api(api).list_node()
    assert error.value.status == 500
    await client.CoreV1Api(api).list_node()


async def test_stalled_watch_goes_silent(
    sim: Simulator, api: client.ApiClient, store: ClusterStore
):
    start = str(store.resource_version)
    store.create("resourceclaims", claim_body("first"))
    store.create("resourceclaims", claim_body("second"))
    await set_faults(sim, {"stallWatch": {"seconds": 3, "afterEvents": 1, "count": 1}})
    response = await raw_watch(
        api, resourceVersion=start, allowWatchBookmarks="true", timeoutSeconds="30"
    )
    first = json.loads(await response.content.readline())
    assert first["object"]["metadata"]["name"] == "first"
    # Nothing at all (not even a bookmark, sent every 0.2 s otherwise) while stalled.
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(response.content.readline(), timeout=0.5)
    response.close()
    assert "stallWatch" not in await set_faults(sim, {})  # used up by that one stream


async def test_slow_watch_delays_each_event(
    sim: Simulator, api: client.ApiClient, store: ClusterStore
):
    start = str(store.resource_version)
    for i in range(4):
        store.create("resourceclaims", claim_body(f"c{i}"))
    await set_faults(sim, {"slowWatch": {"delay": 0.1}})
    began = time.monotonic()
    response = await raw_watch(api, resourceVersion=start, timeoutSeconds="1")
    lines = (await response.read()).decode().splitlines()
    assert len(lines) == 4
    assert time.monotonic() - began >= 0.4  # four events, each held back 0.1 s


async def test_restart_resets_resource_versions(
    sim: Simulator, api: client.ApiClient, store: ClusterStore
):
    for i in range(5):
        store.create("resourceclaims", claim_body(f"c{i}"))
    for i in range(3, 5):
        store.delete("resourceclaims", "default", f"c{i}")
    claims = client.ResourceV1Api(api)
    page = await claims.list_resource_claim_for_all_namespaces(limit=2)
    old_rv = page.metadata.resource_version
    uid = page.items[0].metadata.uid
    response = await raw_watch(api, resourceVersion=old_rv, timeoutSeconds="30")

    await set_faults(sim, {"restart": True})
    assert await response.read() == b""  # the open watch was dropped
    with pytest.raises(ApiException) as error:
        await claims.list_resource_claim_for_all_namespaces(
            limit=2, _continue=page.metadata._continue
        )
    assert error.value.status == 410
    with pytest.raises(ApiException) as error:
        await collect(
            claims.list_resource_claim_for_all_namespaces,
            resource_version=old_rv,
            timeout_seconds=2,
        )
    assert error.value.status == 410
    relisted = await claims.list_resource_claim_for_all_namespaces()
    assert int(relisted.metadata.resource_version) < int(old_rv)
    assert relisted.items[0].metadata.uid == uid
    status = await api.call_api(
        "/sim/status", "GET", response_types_map={200: "object"}, _return_http_data_only=True
    )
    assert status["restarts"] == 1


async def test_future_watches_wait_silently_as_the_watch_cache_does(
    sim: Simulator, api: client.ApiClient, store: ClusterStore
):
    for i in range(3):
        store.create("resourceclaims", claim_body(f"c{i}"))
    await set_faults(sim, {"restart": {"base": 1}, "futureWatches": "wait"})
    ahead = store.resource_version + 2  # a position the restarted store has not reached
    response = await raw_watch(
        api, resourceVersion=str(ahead), allowWatchBookmarks="true", timeoutSeconds="30"
    )
    # accepted, and silent: no event, not even a bookmark (sent every 0.2 s otherwise)
    assert response.status == 200
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(response.content.readline(), timeout=0.5)
    for i in range(4):
        store.create("resourceclaims", claim_body(f"n{i}"))
    # once the counter passes the position, only what comes after it is sent
    first = json.loads(await response.content.readline())
    assert (first["type"], first["object"]["metadata"]["name"]) == ("ADDED", "n2")
    response.close()
    await set_faults(sim, {"futureWatches": None})
    response = await raw_watch(api, resourceVersion=str(store.resource_version + 5))
    error = json.loads(await response.content.readline())
    assert (error["type"], error["object"]["code"]) == ("ERROR", 410)
    response.close()


async def test_hidden_api_version(sim: Simulator, api: client.ApiClient):
    await set_faults(sim, {"hideVersions": ["v1beta1", "v1beta2"]})
    groups = await client.ApisApi(api).get_api_versions()
    dra = next(g for g in groups.groups if g.name == "resource.k8s.io")
    assert [v.version for v in dra.versions] == ["v1"]
    with pytest.raises(ApiException) as error:
        await client.ResourceV1beta1Api(api).list_resource_claim_for_all_namespaces()
    assert error.value.status == 404
    await set_faults(sim, {"hideVersions": None})
    await client.ResourceV1beta1Api(api).list_resource_claim_for_all_namespaces()
