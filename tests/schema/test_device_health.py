"""Device health as the kubelet reports it (containerStatuses[].allocatedResourcesStatus),
shown per device on the pod and on the claim's allocation."""

from __future__ import annotations

import httpx
from asgi_lifespan import LifespanManager

from dra_mirror.service.model.normalize import normalize
from dra_mirror.service.runtime.compose import compose_app
from dra_mirror.service.settings import Settings
from dra_mirror.service.stores.memory import MemoryStore
from tests.feeding import feed

from . import world

GPU = "gpu.nvidia.com"


def _objects() -> dict[str, list[dict]]:
    pod = world.pod("ml", "trainer", node_name="n1", phase="Running", claims={"gpu": "gpus"},
                    uid="uid-ml-trainer")  # fmt: skip
    pod["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
    pod["spec"]["schedulingGroup"] = {"podGroupName": "trainers"}
    pod["status"]["extendedResourceClaimStatus"] = {
        "resourceClaimName": "trainer-extended-resources-x1",
        "requestMappings": [{"containerName": "main", "resourceName": "nvidia.com/gpu",
                             "requestName": "container-0-request-0"}],
    }  # fmt: skip
    pod["status"]["containerStatuses"] = [{
        "name": "main", "image": "busybox", "ready": True, "restartCount": 0,
        "allocatedResourcesStatus": [{"name": "claim:gpu", "resources": [
            {"resourceID": f"{GPU}/n1/gpu-0", "health": "Unhealthy", "message": "XID 79"},
            {"resourceID": f"{GPU}/n1/gpu-1", "health": "Healthy"},
        ]}],
    }]  # fmt: skip
    return {
        "ResourceSlice": [
            world.slice_(
                "n1-gpu",
                GPU,
                "n1",
                "n1",
                [world.gpu("gpu-0", "GPU-0"), world.gpu("gpu-1", "GPU-1")],
            )
        ],
        "ResourceClaim": [
            world.claim(
                "ml",
                "gpus",
                "gpu",
                count=2,
                reserved=["trainer"],
                results=[
                    world.result(
                        GPU,
                        "n1",
                        "gpu-0",
                        bindingConditions=["dra.example.com/attached"],
                        bindingFailureConditions=["dra.example.com/failed"],
                    ),
                    world.result(GPU, "n1", "gpu-1", skipNodeOperations=["*"]),
                ],
            )
        ],
        "Pod": [pod],
    }


QUERY = """{
  pods(cluster: "c", namespace: "ml") { edges { node { name podGroupName
    extendedResourceRequests { container resourceName request }
    deviceHealth { container resource claimName request driver pool deviceName health message
                   device { name uuid } } } } }
  resourceClaim(cluster: "c", namespace: "ml", name: "gpus") {
    allocation { devices { device { name } health { container health message }
                           bindingConditions bindingFailureConditions skipNodeOperations } } }
}"""


async def test_the_health_the_kubelet_reports_is_shown_per_device() -> None:
    store = MemoryStore()
    objects = _objects()
    upserts = [normalize(kind, raw, cluster="c") for kind, raws in objects.items() for raw in raws]
    await feed(store, "c", upserts=upserts, at="2026-01-01T02:00:00Z")
    app = compose_app(Settings(), store=store)
    async with LifespanManager(app) as manager:
        transport = httpx.ASGITransport(app=manager.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://mirror") as http:
            body = (await http.post("/graphql", json={"query": QUERY})).json()
    assert "errors" not in body, body
    (pod,) = [e["node"] for e in body["data"]["pods"]["edges"]]
    assert pod["deviceHealth"] == [
        {"container": "main", "resource": "claim:gpu", "claimName": "gpus", "request": None,
         "driver": GPU, "pool": "n1", "deviceName": "gpu-0", "health": "Unhealthy",
         "message": "XID 79", "device": {"name": "gpu-0", "uuid": "GPU-0"}},
        {"container": "main", "resource": "claim:gpu", "claimName": "gpus", "request": None,
         "driver": GPU, "pool": "n1", "deviceName": "gpu-1", "health": "Healthy",
         "message": None, "device": {"name": "gpu-1", "uuid": "GPU-1"}},
    ]  # fmt: skip
    assert pod["podGroupName"] == "trainers"
    assert pod["extendedResourceRequests"] == [
        {"container": "main", "resourceName": "nvidia.com/gpu", "request": "container-0-request-0"}
    ]
    devices = body["data"]["resourceClaim"]["allocation"]["devices"]
    assert [(d["bindingConditions"], d["bindingFailureConditions"], d["skipNodeOperations"])
            for d in devices] == [(["dra.example.com/attached"], ["dra.example.com/failed"], []),
                                  ([], [], ["*"])]  # fmt: skip
    assert {d["device"]["name"]: d["health"] for d in devices} == {
        "gpu-0": [{"container": "main", "health": "Unhealthy", "message": "XID 79"}],
        "gpu-1": [{"container": "main", "health": "Healthy", "message": None}],
    }
