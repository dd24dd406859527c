"""A device held by a claim and published by no slice, asked every way a person names it.

The oracle compares whoHolds by driver/pool/device and the claim's devices; these ask the rest
of the graph in the same places, over the memory store and over Redis (also after a second
watcher took the cluster over, seeded from what Redis held): whoHolds by the uuid the device
had when it was last published, by its bare name and by node/name; Pod.devices and
Node.devices; `devices(published: false)`; and the allocation's `slice` as null beside the
other devices of the same claim.
"""

from __future__ import annotations

from tests.oracle import objects as o
from tests.oracle.system import Answer, System

GPU = "gpu.nvidia.com"
H200 = o.device("gpu-0", uuid="GPU-21f6a090", capacity={"memory": "143771Mi"})
SLICE = o.slice_("n1-gpu", GPU, "n1", [H200], node_name="n1")
OTHER = o.slice_("n2-gpu", GPU, "n2", [o.device("gpu-0", uuid="GPU-other")], node_name="n2")
HELD = o.claim(
    "train",
    results=[o.result("gpu", GPU, "n1", "gpu-0")],
    node_name="n1",
    reserved=[("p", "uid-p")],
)
POD = o.pod("p", uid="uid-p", claims=["train"], phase="Running", node_name="n1")

WHO = """query($cluster: String!, $device: String!) { whoHolds(device: $device, cluster: $cluster) {
  claim { name } pods { name } device { driver pool name uuid published nodeName slice { name }
  status } } }"""
POD_DEVICES = """query($cluster: String!) { pods(cluster: $cluster) { nodes { name
  devices { name pool published } } } }"""
NODE_DEVICES = """query($cluster: String!) { nodes(cluster: $cluster) { name
  devices { pool name published } } }"""
LISTED = """query($cluster: String!) {
  published: devices(cluster: $cluster) { nodes { pool name published } }
  held: devices(cluster: $cluster, published: false) { nodes { pool name published uuid } }
  both: devices(cluster: $cluster, published: null) { totalCount } }"""
CLAIM = """query($cluster: String!) { resourceClaim(cluster: $cluster, namespace: "team-a",
  name: "both") { allocation { devices { device { pool published slice { name } }
  claim { name } } } } }"""


def data(answer: Answer) -> dict:
    assert answer.errors == [], answer.errors
    assert answer.data is not None
    return answer.data


async def holders(system: System, store: object, device: str) -> list[dict]:
    return data(await system.run(store, WHO, device=device))["whoHolds"]


def stores(system: System) -> list[object]:
    return system.watcher.stores()


async def test_a_withdrawn_device_is_found_by_every_name_it_had(redis_scenario) -> None:
    system = redis_scenario.system
    await redis_scenario.show(SLICE, HELD, POD, o.node("n1"))
    await redis_scenario.show(gone=(SLICE,))  # the driver withdrew its slices
    for store in stores(system):
        for name in ("GPU-21f6a090", f"{GPU}/n1/gpu-0", "n1/gpu-0", "gpu-0"):
            found = await holders(system, store, name)
            assert [h["claim"]["name"] for h in found] == ["train"], (store, name)
            [held] = found
            assert held["pods"] == [{"name": "p"}]
            assert held["device"] == {
                "driver": GPU, "pool": "n1", "name": "gpu-0", "uuid": "GPU-21f6a090",
                "published": False, "nodeName": "n1", "slice": None, "status": "HELD",
            }  # fmt: skip
        pods = data(await system.run(store, POD_DEVICES))["pods"]["nodes"]
        assert pods == [{"name": "p", "devices": [{"name": "gpu-0", "pool": "n1", "published": False}]}]  # fmt: skip
        nodes = data(await system.run(store, NODE_DEVICES))["nodes"]
        assert nodes == [{"name": "n1", "devices": [{"pool": "n1", "name": "gpu-0", "published": False}]}]  # fmt: skip
        listed = data(await system.run(store, LISTED))
        assert listed["published"]["nodes"] == []
        assert listed["held"]["nodes"] == [{"pool": "n1", "name": "gpu-0", "published": False, "uuid": "GPU-21f6a090"}]  # fmt: skip
        assert listed["both"]["totalCount"] == 1


async def test_publishing_it_again_makes_it_a_device_of_its_slice(redis_scenario) -> None:
    system = redis_scenario.system
    await redis_scenario.show(HELD)  # the claim before the slices: no uuid known yet
    for store in stores(system):
        assert await holders(system, store, "GPU-21f6a090") == []
        [held] = await holders(system, store, f"{GPU}/n1/gpu-0")
        assert held["device"]["published"] is False and held["device"]["uuid"] is None
    await redis_scenario.show(SLICE)
    for store in stores(system):
        [held] = await holders(system, store, "GPU-21f6a090")
        assert held["device"]["published"] is True
        assert held["device"]["slice"] == {"name": "n1-gpu"}
        listed = data(await system.run(store, LISTED))
        assert listed["held"]["nodes"] == [] and listed["both"]["totalCount"] == 1


async def test_a_takeover_keeps_the_uuid_of_a_withdrawn_device(redis_scenario) -> None:
    await redis_scenario.show(SLICE, HELD)
    await redis_scenario.show(gone=(SLICE,))
    await redis_scenario.handover()  # a new watcher, seeded from Redis, lists every kind
    system = redis_scenario.system
    for store in stores(system)[1:]:  # the Redis store, written by the new watcher
        [held] = await holders(system, store, "GPU-21f6a090")
        assert held["device"]["published"] is False and held["claim"]["name"] == "train"


async def test_one_missing_slice_leaves_the_other_devices_of_the_answer(scenario) -> None:
    both = o.claim("both", results=[o.result("a", GPU, "n1", "gpu-0"), o.result("b", GPU, "n2", "gpu-0")])  # fmt: skip
    await scenario.show(OTHER, both)
    system = scenario.system
    devices = data(await system.run(system.watcher.memory, CLAIM))["resourceClaim"]
    assert sorted(
        (d["device"]["pool"], d["device"]["published"], d["device"]["slice"], d["claim"]["name"])
        for d in devices["allocation"]["devices"]
    ) == [("n1", False, None, "both"), ("n2", True, {"name": "n2-gpu"}, "both")]
