"""Every link walks back: following a relation and then its inverse returns to the start."""

from __future__ import annotations


async def test_claim_consumers_walk_back_to_the_claim(gql):
    data = await gql(
        "{ resourceClaims(first: 5, state: RESERVED) { edges { node { name"
        " consumers { claims { claim { name } } extendedResourceClaim { name } } } } } }"
    )
    edges = data["resourceClaims"]["edges"]
    assert edges
    for edge in edges:
        claim = edge["node"]
        for pod in claim["consumers"]:
            assert {"claim": {"name": claim["name"]}} in pod["claims"]


async def test_device_pods_and_pod_devices_agree(gql):
    data = await gql(
        "{ devices(first: 5, status: HELD) { edges { node { name pool"
        " pods { name devices { name pool } } allocations { claim { allocation { devices { device { name pool } } } } } } } } }"
    )
    for edge in data["devices"]["edges"]:
        device = edge["node"]
        me = {"name": device["name"], "pool": device["pool"]}
        for pod in device["pods"]:
            assert me in pod["devices"]
        for allocation in device["allocations"]:
            assert {"device": me} in allocation["claim"]["allocation"]["devices"]


async def test_node_page_walk(gql):
    # The page a dashboard draws for one node: node -> devices -> allocations -> claims -> pods.
    data = await gql(
        '{ nodes(cluster: "east") { name devices { name status allocations { claim {'
        " name consumers { name nodeName node { name } } } } } } }"
    )
    n1 = next(n for n in data["nodes"] if n["name"] == "n1")
    consumers = {
        p["name"] for d in n1["devices"] for a in d["allocations"] for p in a["claim"]["consumers"]
    }
    assert consumers == {"web-0", "web-1", "web-2", "train-0"}
    for d in n1["devices"]:
        for a in d["allocations"]:
            for p in a["claim"]["consumers"]:
                assert p["node"] == {"name": "n1"} == {"name": p["nodeName"]}


async def test_class_claims_walk_back_through_requests(gql):
    data = await gql("{ deviceClasses { name claims { requests { deviceClassName } } } }")
    for c in data["deviceClasses"]:
        for claim in c["claims"]:
            assert {"deviceClassName": c["name"]} in claim["requests"]
