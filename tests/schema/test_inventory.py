"""Inventory side of the contract: clusters, classes, slices, pools, devices — each answer
checked against truth computed from the raw objects in `world.py`."""

from __future__ import annotations

from . import world
from .conftest import LOADED_AT

DEVICE_FIELDS = """
  cluster driver pool name uuid attributes qualifiedAttributes shareable status nodeName taints
  consumesCounters
  capacity { name qualifiedName value number
             requestPolicy { default validValues validRange { min max step } } }
  remainingCapacity { name value }
  allocations { request shareID consumedCapacity adminAccess claim { namespace name } device { name } }
  slice { name } node { name } classes { name } pods { namespace name }
"""


async def all_devices(gql, **filters) -> list[dict]:
    args = "".join(f", {k}: {v}" for k, v in filters.items())
    found, after = [], None
    while True:
        data = await gql(
            "query($after: String) { devices(first: 5, after: $after" + args + ") {"
            " totalCount pageInfo { hasNextPage endCursor } edges { node {"
            + DEVICE_FIELDS
            + "} } } }",
            after=after,
        )
        page = data["devices"]
        found += [e["node"] for e in page["edges"]]
        if not page["pageInfo"]["hasNextPage"]:
            assert page["totalCount"] == len(found)
            return found
        after = page["pageInfo"]["endCursor"]


def key(d: dict) -> tuple:
    return (d["cluster"], d["driver"], d["pool"], d["name"])


async def test_clusters_status_and_counts(gql):
    data = await gql(
        "{ clusters { name status { connected synced lastEventAt error apiVersion events relists malformed }"
        ' counts { devices freeDevices claims pendingClaims } } cluster(name: "west") { name }'
        ' missing: cluster(name: "nowhere") { name } }'
    )
    valid = world.valid_devices()
    held = world.holders()
    for cluster in data["clusters"]:
        name = cluster["name"]
        claims = [c for cl, c in world.objects("ResourceClaim") if cl == name]
        pending = [
            c
            for c in claims
            if not c["status"].get("allocation") and not c["metadata"].get("deletionTimestamp")
        ]
        assert cluster["counts"]["devices"] == sum(1 for k in valid if k[0] == name)
        assert cluster["counts"]["claims"] == len(claims)
        assert cluster["counts"]["pendingClaims"] == len(pending)
        assert cluster["status"]["connected"] and cluster["status"]["synced"]
        assert cluster["status"]["apiVersion"] == "v1"
        assert cluster["status"]["lastEventAt"] == LOADED_AT and cluster["status"]["error"] is None
        assert cluster["status"]["malformed"] == {} and cluster["status"]["relists"] == 0
    east = data["clusters"][0]
    # Free in east: only the 2g MIG partition (gpu-0 is blocked by the 1g partition's counters).
    free = [k for k in valid if k[0] == "east" and k not in held]
    assert east["counts"]["freeDevices"] == len(free) - 1
    assert [c["name"] for c in data["clusters"]] == ["east", "west"]
    assert data["cluster"] == {"name": "west"} and data["missing"] is None


async def test_every_valid_device_with_its_fields(gql):
    devices = await all_devices(gql)
    valid = world.valid_devices()
    assert [key(d) for d in devices] == sorted(valid)  # old generation gpu-9 absent, sorted by key
    held = world.holders()
    for d in devices:
        raw = valid[key(d)]
        domain = d["driver"]
        assert d["uuid"] == raw["attributes"].get("uuid", {}).get("string")
        # As the slice writes them, and qualified with the driver's domain beside them.
        assert d["attributes"] == {k: next(iter(v.values())) for k, v in raw["attributes"].items()}
        assert d["qualifiedAttributes"] == {
            f"{domain}/{k}": next(iter(v.values())) for k, v in raw["attributes"].items()
        }
        assert d["nodeName"] == raw["_node"] and d["node"] == {"name": raw["_node"]}
        assert d["shareable"] == raw.get("allowMultipleAllocations", False)
        assert [c["name"] for c in d["capacity"]] == sorted(raw["capacity"])
        assert [c["qualifiedName"] for c in d["capacity"]] == sorted(
            f"{domain}/{k}" for k in raw["capacity"]
        )
        holders = sorted((ns, name, share) for ns, name, share in held.get(key(d), []))
        got = sorted(
            (a["claim"]["namespace"], a["claim"]["name"], a["shareID"]) for a in d["allocations"]
        )
        assert got == holders
        assert all(a["device"]["name"] == d["name"] for a in d["allocations"])
        assert d["taints"] == []


async def test_device_statuses(gql):
    devices = {key(d): d for d in await all_devices(gql)}
    status = {k: d["status"] for k, d in devices.items()}
    gpu, nic = world.GPU, world.NIC
    assert status[("east", gpu, "n1", "gpu-0")] == "BLOCKED"  # 1g partition holds memory-slice-0
    assert status[("east", gpu, "n1", "gpu-0-mig-1g")] == "HELD"
    assert status[("east", gpu, "n1", "gpu-0-mig-2g")] == "FREE"  # its slices 1-2 are still free
    assert status[("east", gpu, "n1", "gpu-1")] == "HELD"
    assert status[("east", nic, "n1", "eth1")] == "SHARED"
    held = world.holders()
    for k, s in status.items():
        if k in held:
            assert s in {"HELD", "SHARED"}
    # the status filter returns exactly the devices with that status
    for wanted in ("FREE", "HELD", "SHARED", "BLOCKED"):
        filtered = await all_devices(gql, status=wanted)
        assert sorted(key(d) for d in filtered) == sorted(
            k for k, s in status.items() if s == wanted
        )


async def test_shared_device_capacity_and_pods(gql):
    (eth1,) = await all_devices(gql, driver=f'"{world.NIC}"')
    bandwidth = f"{world.NIC}/bandwidth"
    assert eth1["capacity"] == [
        {
            "name": "bandwidth",
            "qualifiedName": bandwidth,
            "value": "10G",
            "number": 10e9,
            "requestPolicy": {
                "default": "1G",
                "validValues": None,
                "validRange": {"min": "1G", "max": "10G", "step": "1G"},
            },
        }
    ]
    # 10G minus the shares' consumedCapacity (1G + 2G)
    assert eth1["remainingCapacity"] == [{"name": "bandwidth", "value": "7G"}]
    assert sorted(a["consumedCapacity"][bandwidth] for a in eth1["allocations"]) == ["1G", "2G"]
    expected_pods = sorted(
        ("team-a", p)
        for ns, claim, _ in world.holders()[("east", world.NIC, "n1", "eth1")]
        for p in world.claim_consumers("east", ns, claim)
    )
    assert sorted((p["namespace"], p["name"]) for p in eth1["pods"]) == expected_pods
    assert eth1["classes"] == [{"name": "nic.example.com"}]


async def test_device_classes_by_cel_both_ways(gql):
    data = await gql(
        "{ deviceClasses { cluster name selectors config extendedResourceName"
        " devices { cluster driver pool name classes { name } } claims { namespace name requests { deviceClassName } } } }"
    )
    classes = {(c["cluster"], c["name"]): c for c in data["deviceClasses"]}
    assert sorted(classes) == sorted(
        (cl, c["metadata"]["name"]) for cl, c in world.objects("DeviceClass")
    )
    valid = world.valid_devices()

    def is_type(k, kind):
        return k[1] == world.GPU and valid[k]["attributes"]["type"]["string"] == kind

    expected = {
        ("east", "gpu.nvidia.com"): sorted(
            k for k in valid if k[0] == "east" and is_type(k, "gpu")
        ),
        ("east", "mig.nvidia.com"): sorted(
            k for k in valid if k[0] == "east" and is_type(k, "mig")
        ),
        ("east", "nic.example.com"): sorted(
            k for k in valid if k[0] == "east" and k[1] == world.NIC
        ),
        ("west", "gpu.nvidia.com"): sorted(k for k in valid if k[0] == "west"),
    }
    for ident, c in classes.items():
        assert [key(d) for d in c["devices"]] == expected[ident]
        for d in c["devices"]:  # and backwards: each device lists the class
            assert {"name": ident[1]} in d["classes"]
        wanted = sorted(
            (o["metadata"]["namespace"], o["metadata"]["name"])
            for cl, o in world.objects("ResourceClaim")
            if cl == ident[0]
            and o["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] == ident[1]
        )
        assert sorted((x["namespace"], x["name"]) for x in c["claims"]) == wanted
        assert c["selectors"] and c["config"] == [] and c["extendedResourceName"] is None
    by_class = await all_devices(gql, className='"mig.nvidia.com"', cluster='"east"')
    assert [key(d) for d in by_class] == expected[("east", "mig.nvidia.com")]


async def test_resource_slices_pools_and_links(gql):
    data = await gql(
        "{ resourceSlices { cluster name driver nodeName allNodes sharedCounters"
        " pool { name generation resourceSliceCount complete } node { name }"
        " devices { name slice { name } } } }"
    )
    slices = {(s["cluster"], s["name"]): s for s in data["resourceSlices"]}
    assert sorted(slices) == sorted(
        (cl, s["metadata"]["name"]) for cl, s in world.objects("ResourceSlice")
    )
    assert slices[("east", "n1-gpu")]["pool"] == {
        "name": "n1",
        "generation": 1,
        "resourceSliceCount": 2,
        "complete": True,
    }
    assert slices[("east", "n2-gpu")]["pool"]["complete"] is False  # 1 of 2 slices present
    assert slices[("east", "n1-gpu-old")]["pool"]["complete"] is False  # superseded generation
    assert slices[("east", "n1-gpu-old")]["devices"] == []
    counters = slices[("east", "n1-gpu-counters")]["sharedCounters"]
    assert counters[0]["name"] == "gpu-0-counter-set" and len(counters[0]["counters"]) == 8
    for s in slices.values():
        assert s["node"] == {"name": s["nodeName"]} and s["allNodes"] is False
        assert all(d["slice"] == {"name": s["name"]} for d in s["devices"])
    n1 = await gql(
        '{ resourceSlices(cluster: "east", node: "n1", driver: "gpu.nvidia.com") { name } }'
    )
    assert [s["name"] for s in n1["resourceSlices"]] == ["n1-gpu", "n1-gpu-counters", "n1-gpu-old"]


class ProtocolOnly:
    """The real MemoryStore's reads, from a store that keeps no statuses and no index in this
    process: the graph derives statuses from holders and counters."""

    def __init__(self, store) -> None:
        for name in ("clusters", "get", "list", "devices", "list_devices", "lookup", "idle_since",
                     "select", "namespaces"):  # fmt: skip
            setattr(self, name, getattr(store, name))

    async def device_status(self, keys) -> list:
        return [None] * len(keys)

    def index(self, cluster):
        return None


async def test_statuses_derived_through_the_protocol_alone_agree(world_store):
    from dra_mirror.schema import build_schema
    from dra_mirror.schema.context import make_context

    query = "{ devices(first: 100) { edges { node { cluster driver pool name status } } } }"
    answers = []
    for store in (world_store, ProtocolOnly(world_store)):
        context = make_context(store)
        result = await build_schema().execute(query, context_value=context)
        assert result.errors is None
        answers.append(
            {key(e["node"]): e["node"]["status"] for e in result.data["devices"]["edges"]}
        )
    assert answers[0] == answers[1]
    assert answers[1][("east", world.GPU, "n1", "gpu-0")] == "BLOCKED"
    assert sorted(answers[1].values()).count("FREE") == 1


async def test_resource_pools_answer_every_cluster_at_once(gql):
    data = await gql(
        "{ resourcePools { cluster driver poolName generation resourceSliceCount"
        " totalDevices validationError } }"
    )
    pools = {(p["cluster"], p["driver"], p["poolName"]): p for p in data["resourcePools"]}
    named = {(c, s["spec"]["driver"], s["spec"]["pool"]["name"]) for c, s in world.objects("ResourceSlice")}  # fmt: skip
    assert set(pools) == named and {c for c, _, _ in named} == {"east", "west"}
    incomplete = pools[("east", world.GPU, "n2")]  # 1 of its 2 slices present
    assert incomplete["totalDevices"] is None
    assert incomplete["validationError"].startswith("PoolIncomplete:")
    for (cluster, driver, pool), found in pools.items():
        if found["validationError"] is None:
            devices = [k for k in world.valid_devices() if k[:3] == (cluster, driver, pool)]
            assert found["totalDevices"] == len(devices), (cluster, driver, pool)
    west = await gql('{ resourcePools(cluster: "west") { cluster } }')
    assert {p["cluster"] for p in west["resourcePools"]} == {"west"}
