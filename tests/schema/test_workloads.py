"""Demand side of the contract: claims, templates, pods, nodes — answers checked against the
raw objects of `world.py` (and, for time-derived fields, against the fixed load time)."""

from __future__ import annotations

from . import world
from .conftest import LOADED_AT

CLAIM_FIELDS = """
  cluster namespace name uid state origin templateName createdAt pendingSeconds idle idleSince
  template { name }
  requests { name deviceClassName allocationMode count selectors adminAccess capacity tolerations
             firstAvailable { name } }
  allocation { nodeName allocatedAt node { name } devices { request shareID device { driver pool name } claim { name } } }
  consumers { namespace name uid phase }
"""


async def all_claims(gql, **filters) -> list[dict]:
    args = "".join(f", {k}: {v}" for k, v in filters.items())
    found, after = [], None
    while True:
        data = await gql(
            "query($after: String) { resourceClaims(first: 4, after: $after" + args + ") {"
            " totalCount pageInfo { hasNextPage endCursor } edges { cursor node {"
            + CLAIM_FIELDS
            + "} } } }",
            after=after,
        )
        page = data["resourceClaims"]
        found += [e["node"] for e in page["edges"]]
        if not page["pageInfo"]["hasNextPage"]:
            assert page["totalCount"] == len(found)
            return found
        after = page["pageInfo"]["endCursor"]


def expected_state(raw: dict) -> str:
    if raw["metadata"].get("deletionTimestamp"):
        return "DELETING"
    if raw["status"].get("reservedFor"):
        return "RESERVED"
    return "ALLOCATED" if raw["status"].get("allocation") else "PENDING"


def running_pods() -> set[tuple[str, str, str]]:
    return {
        (cl, p["metadata"]["namespace"], p["metadata"]["name"])
        for cl, p in world.objects("Pod")
        if p["status"]["phase"] == "Running"
    }


async def test_every_claim_with_its_fields(gql):
    claims = await all_claims(gql)
    raw = {
        (cl, c["metadata"]["namespace"], c["metadata"]["name"]): c
        for cl, c in world.objects("ResourceClaim")
    }
    assert [(c["cluster"], c["namespace"], c["name"]) for c in claims] == sorted(raw)
    running = running_pods()
    for c in claims:
        r = raw[(c["cluster"], c["namespace"], c["name"])]
        assert c["uid"] == r["metadata"]["uid"] and c["createdAt"] == world.CREATED
        assert c["state"] == expected_state(r)
        owners = r["metadata"].get("ownerReferences", [])
        assert c["origin"] == ("TEMPLATE" if owners else "MANUAL")
        assert c["template"] == ({"name": "single-gpu"} if owners else None)
        assert c["templateName"] == ("single-gpu" if owners else None)
        exactly = r["spec"]["devices"]["requests"][0]["exactly"]
        assert c["requests"] == [
            {
                "name": "req",
                "deviceClassName": exactly["deviceClassName"],
                "allocationMode": "ExactCount",
                "count": 1,
                "selectors": [],
                "adminAccess": False,
                "capacity": exactly.get("capacity", {}).get("requests", {}),
                "tolerations": [],
                "firstAvailable": [],
            }
        ]
        allocation = r["status"].get("allocation")
        if allocation is None:
            assert c["allocation"] is None
        else:
            node = allocation["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]["values"][0]
            assert c["allocation"]["nodeName"] == node and c["allocation"]["node"] == {"name": node}
            assert c["allocation"]["allocatedAt"] is None  # the world's API server did not set it
            assert [
                (d["device"]["driver"], d["device"]["pool"], d["device"]["name"], d["shareID"])
                for d in c["allocation"]["devices"]
            ] == [
                (x["driver"], x["pool"], x["device"], x.get("shareID"))
                for x in allocation["devices"]["results"]
            ]
            assert all(
                d["claim"]["name"] == c["name"] and d["request"] == "req"
                for d in c["allocation"]["devices"]
            )
        reserved = sorted(x["name"] for x in r["status"].get("reservedFor", []))
        assert sorted(p["name"] for p in c["consumers"]) == reserved
        idle = allocation is not None and not any(
            (c["cluster"], c["namespace"], p) in running for p in reserved
        )
        assert c["idle"] is idle
        assert c["idleSince"] == (LOADED_AT if idle else None)
        if c["state"] == "PENDING":  # created 00:00, asked at 03:00
            assert c["pendingSeconds"] == 3 * 3600.0
        else:
            assert c["pendingSeconds"] is None


async def test_claim_filters(gql):
    everything = await all_claims(gql)
    for state in ("PENDING", "ALLOCATED", "RESERVED", "DELETING"):
        got = await all_claims(gql, state=state)
        assert got == [c for c in everything if c["state"] == state]
    idle = await all_claims(gql, idle="true")
    assert [(c["namespace"], c["name"]) for c in idle] == [("team-c", "idle-claim")]
    assert len(await all_claims(gql, idle="false")) == len(everything) - 1
    team_b = await all_claims(gql, namespace='"team-b"', cluster='"east"')
    assert [c["name"] for c in team_b] == ["job-0-gpu-abcde", "job-1-gpu-fghij"]
    one = await gql(
        '{ resourceClaim(cluster: "east", namespace: "team-a", name: "shared-gpu") { name state } '
        'none: resourceClaim(cluster: "east", namespace: "team-a", name: "nope") { name } }'
    )
    assert one == {"resourceClaim": {"name": "shared-gpu", "state": "RESERVED"}, "none": None}


async def test_templates_and_their_claims(gql):
    data = await gql(
        "{ resourceClaimTemplates { cluster namespace name requests { name deviceClassName }"
        " claims { name origin template { name } } } }"
    )
    assert data["resourceClaimTemplates"] == [
        {
            "cluster": "east",
            "namespace": "team-b",
            "name": "single-gpu",
            "requests": [{"name": "req", "deviceClassName": "gpu.nvidia.com"}],
            "claims": [
                {
                    "name": "job-0-gpu-abcde",
                    "origin": "TEMPLATE",
                    "template": {"name": "single-gpu"},
                },
                {
                    "name": "job-1-gpu-fghij",
                    "origin": "TEMPLATE",
                    "template": {"name": "single-gpu"},
                },
            ],
        }
    ]


POD_FIELDS = """cluster namespace name uid phase nodeName createdAt node { name }
  claims { name claimName templateName containers claim { name } }
  containers { name init limits claims }
  devices { driver pool name }"""


async def test_pods_with_claims_and_devices(gql):
    data = await gql("{ pods(first: 5) { totalCount } }")
    assert data["pods"]["totalCount"] == len(world.objects("Pod"))
    raw = {
        (cl, p["metadata"]["namespace"], p["metadata"]["name"]): p for cl, p in world.objects("Pod")
    }
    claims = {
        (cl, c["metadata"]["namespace"], c["metadata"]["name"]): c
        for cl, c in world.objects("ResourceClaim")
    }
    found, after = [], None
    while True:
        page = (
            await gql(
                "query($after: String) { pods(first: 5, after: $after) { pageInfo { hasNextPage endCursor }"
                " edges { node { " + POD_FIELDS + " } } } }",
                after=after,
            )
        )["pods"]
        found += [e["node"] for e in page["edges"]]
        if not page["pageInfo"]["hasNextPage"]:
            break
        after = page["pageInfo"]["endCursor"]
    assert [(p["cluster"], p["namespace"], p["name"]) for p in found] == sorted(raw)
    for p in found:
        r = raw[(p["cluster"], p["namespace"], p["name"])]
        assert p["phase"] == r["status"]["phase"] and p["nodeName"] == r["spec"].get("nodeName")
        assert p["uid"] == r["metadata"]["uid"] and p["createdAt"] == world.CREATED
        assert p["node"] == ({"name": p["nodeName"]} if p["nodeName"] else None)
        generated = {
            s["name"]: s["resourceClaimName"] for s in r["status"].get("resourceClaimStatuses", [])
        }
        expected_claims = []
        for pc in r["spec"]["resourceClaims"]:
            name = pc.get("resourceClaimName") or generated[pc["name"]]
            expected_claims.append(
                {
                    "name": pc["name"],
                    "claimName": name,
                    "templateName": pc.get("resourceClaimTemplateName"),
                    "containers": ["main"],
                    "claim": {"name": name},
                }
            )
        assert p["claims"] == expected_claims
        devices = []
        for pc in expected_claims:
            allocation = claims[(p["cluster"], p["namespace"], pc["claimName"])]["status"].get(
                "allocation"
            )
            for x in (allocation or {}).get("devices", {}).get("results", []):
                devices.append({"driver": x["driver"], "pool": x["pool"], "name": x["device"]})
        assert p["devices"] == devices
    legacy = next(p for p in found if p["name"] == "legacy")
    assert legacy["containers"] == [
        {"name": "main", "init": False, "limits": {"nvidia.com/gpu": "1"}, "claims": []}
    ]


async def test_pod_filters(gql):
    users = await gql(
        "{ pods(usesDevices: true, first: 100) { edges { node { name } } }"
        " nonUsers: pods(usesDevices: false) { edges { node { name } } } }"
    )
    assert [e["node"]["name"] for e in users["nonUsers"]["edges"]] == ["legacy"]
    assert len(users["pods"]["edges"]) == 5  # page size capped at 5 in these tests
    on_n1 = await gql('{ pods(node: "n1", namespace: "team-a") { edges { node { name } } } }')
    assert [e["node"]["name"] for e in on_n1["pods"]["edges"]] == ["train-0", "web-0", "web-1"]


async def test_nodes_both_ways(gql):
    data = await gql(
        "{ nodes { cluster name labels ready allocatable slices { name node { name } }"
        " devices { name node { name } } pods { name node { name } } } }"
    )
    assert [(n["cluster"], n["name"]) for n in data["nodes"]] == [
        ("east", "n1"),
        ("east", "n2"),
        ("west", "w1"),
    ]
    valid = world.valid_devices()
    for n in data["nodes"]:
        me = {"name": n["name"]}
        assert n["ready"] is True and n["allocatable"]["nvidia.com/gpu"] == "2"
        assert n["labels"]["topology.kubernetes.io/zone"] in {"a", "b", "c"}
        assert sorted(s["name"] for s in n["slices"]) == sorted(
            s["metadata"]["name"]
            for cl, s in world.objects("ResourceSlice")
            if cl == n["cluster"] and s["spec"]["nodeName"] == n["name"]
        )
        assert sorted(d["name"] for d in n["devices"]) == sorted(
            k[3] for k, d in valid.items() if k[0] == n["cluster"] and d["_node"] == n["name"]
        )
        assert sorted(p["name"] for p in n["pods"]) == sorted(
            p["metadata"]["name"]
            for cl, p in world.objects("Pod")
            if cl == n["cluster"] and p["spec"].get("nodeName") == n["name"]
        )
        for item in n["slices"] + n["devices"] + n["pods"]:
            assert item["node"] == me
