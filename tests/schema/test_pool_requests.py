"""ResourcePoolStatusRequests in the graph (KEP-5677, second alpha, resource.k8s.io/v1alpha3):
each reported pool beside the mirror's own status of it, and where they differ. Objects are
shaped after kubernetes/api resource/v1alpha3/types.go (SOURCES.md): the controller's answer
counts a shared device once, skips admin-access results, makes a tainted device unavailable, and
carries `partitionSummary` / `shareableSummary`."""

from __future__ import annotations

from typing import Any

import httpx
from asgi_lifespan import LifespanManager

from dra_mirror.service.model.normalize import normalize
from dra_mirror.service.runtime.compose import compose_app
from dra_mirror.service.settings import Settings
from dra_mirror.service.stores.memory import MemoryStore
from tests.feeding import feed

from . import world

GPU = "gpu.nvidia.com"


def shared_gpu(name: str, **extra: Any) -> dict[str, Any]:
    device = world.gpu(name, f"GPU-{name}")
    device["allowMultipleAllocations"] = True
    device["capacity"]["memory"]["requestPolicy"] = {
        "default": "0", "validRange": {"min": "0", "max": "143771Mi", "step": "1Mi"}
    }  # fmt: skip
    device.update(extra)
    return device


def cluster_objects() -> dict[str, list[dict[str, Any]]]:
    tainted = shared_gpu(
        "gpu-2", taints=[{"key": "gpu.nvidia.com/xid", "value": "79", "effect": "NoExecute"}]
    )
    slices = world.slice_("n1-gpu", GPU, "n1", "n1",
                          [shared_gpu("gpu-0"), shared_gpu("gpu-1"), tainted])  # fmt: skip
    share = lambda i, gi: world.result(GPU, "n1", "gpu-0", shareID=f"s{i}",  # noqa: E731
                                       consumedCapacity={"memory": f"{gi}Gi"})  # fmt: skip
    claims = [world.claim("ml", f"share-{i}", GPU, results=[share(i, 8)], node_name="n1",
                          capacity={"memory": "8Gi"}) for i in range(3)]  # fmt: skip
    # an observer: admin access consumes nothing and is not counted
    claims.append(world.claim("ops", "watcher", GPU, node_name="n1", results=[
        world.result(GPU, "n1", "gpu-1", adminAccess=True)]))  # fmt: skip
    return {"ResourceSlice": [slices], "ResourceClaim": claims}


def request(name: str, *, allocated: int, pools: int = 1) -> dict[str, Any]:
    pool = {
        "driver": GPU, "poolName": "n1", "generation": 1, "resourceSliceCount": 1,
        "nodeName": "n1", "totalDevices": 3, "allocatedDevices": allocated,
        "availableDevices": 3 - allocated - 1, "unavailableDevices": 1,
        "shareableSummary": {
            "fullyAvailableDevices": 2, "partiallyAvailableDevices": 1,
            "capacity": [{"name": "memory", "total": "431313Mi", "consumed": "24Gi",
                          "available": "406737Mi"}],
        },
    }  # fmt: skip
    return {
        "apiVersion": "resource.k8s.io/v1alpha3",
        "kind": "ResourcePoolStatusRequest",
        "metadata": world.meta(name),
        "spec": {"driver": GPU, "limit": 10},
        "status": {
            "poolCount": pools,
            "pools": [pool],
            "conditions": [{"type": "Complete", "status": "True", "reason": "Calculated",
                            "message": "", "lastTransitionTime": world.CREATED}],
        },
    }  # fmt: skip


QUERY = """{ resourcePoolStatusRequests(cluster: "c") {
  name driver poolName limit answered poolCount conditions
  pools { poolName totalDevices allocatedDevices availableDevices unavailableDevices
          shareableSummary partitionSummary
          mirrored { totalDevices allocatedDevices availableDevices unavailableDevices }
          differences { field reported mirrored } }
  unreportedPools { poolName } } }"""


async def test_reported_pools_beside_the_mirror_and_where_they_differ() -> None:
    store = MemoryStore()
    objects = cluster_objects()
    objects["ResourcePoolStatusRequest"] = [
        request("agrees", allocated=1),  # the three shares of gpu-0 count once
        request("stale", allocated=2),  # answered when two devices were held
        {"apiVersion": "resource.k8s.io/v1alpha3", "kind": "ResourcePoolStatusRequest",
         "metadata": world.meta("waiting"), "spec": {"driver": GPU, "poolName": "n1"}},
    ]  # fmt: skip
    records = [normalize(kind, raw, cluster="c") for kind, raws in objects.items() for raw in raws]
    await feed(store, "c", upserts=records, at="2026-01-01T02:00:00Z")
    app = compose_app(Settings(), store=store)
    async with LifespanManager(app) as manager:
        transport = httpx.ASGITransport(app=manager.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://mirror") as http:
            body = (await http.post("/graphql", json={"query": QUERY})).json()
    assert "errors" not in body, body
    agrees, stale, waiting = body["data"]["resourcePoolStatusRequests"]
    mirrored = {"totalDevices": 3, "allocatedDevices": 1, "availableDevices": 1,
                "unavailableDevices": 1}  # fmt: skip
    assert agrees["answered"] and agrees["poolCount"] == 1 and agrees["limit"] == 10
    assert agrees["conditions"][0]["type"] == "Complete"
    [pool] = agrees["pools"]
    assert pool["mirrored"] == mirrored and pool["differences"] == []
    assert pool["shareableSummary"]["partiallyAvailableDevices"] == 1
    assert pool["partitionSummary"] == [] and agrees["unreportedPools"] == []
    [pool] = stale["pools"]
    assert pool["differences"] == [
        {"field": "allocatedDevices", "reported": "2", "mirrored": "1"},
        {"field": "availableDevices", "reported": "0", "mirrored": "1"},
    ]
    assert (waiting["answered"], waiting["poolCount"], waiting["pools"]) == (False, None, [])
    assert (waiting["poolName"], waiting["limit"]) == ("n1", 100)
