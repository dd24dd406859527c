"""explainClaim through GraphQL over the mirrored simulator (real watch path, real uvicorn):
each row of the manual's "When Nothing Is Allocated" table staged in cluster `manual` gives its
exact diagnosis, and the demo world's pending trainer, idle notebook claim and healthy shared
claim give theirs. Counts are checked against the simulator's own objects."""

from __future__ import annotations

from typing import Any

from tests.diagnostics_api.conftest import A100, EXPLAIN, H200, NO_PROFILE, Mirrored, claim_named


async def explain(m: Mirrored, cluster: str, prefix: str, namespace: str = "ops", **kw: Any):
    name = claim_named(m.raw(cluster, "resourceclaims"), namespace, prefix)
    data = await m.data(EXPLAIN, cluster=cluster, namespace=namespace, name=name, **kw)
    d = data["explainClaim"]
    assert (d["cluster"], d["namespace"], d["name"]) == (cluster, namespace, name)
    return d


def pod_of(m: Mirrored, cluster: str, prefix: str, namespace: str = "ops") -> dict[str, Any]:
    [pod] = [
        p
        for p in m.raw(cluster, "pods")
        if p["metadata"]["namespace"] == namespace and p["metadata"]["name"].startswith(prefix)
    ]
    return pod


async def test_the_device_class_does_not_exist(mirrored: Mirrored) -> None:
    d = await explain(mirrored, "manual", "typo-")
    assert (d["state"], d["verdict"]) == ("pending", "CLASS_MISSING")
    assert d["message"] == "request gpu: DeviceClass gpu.nvidia.cmo does not exist"
    [r] = d["requests"]
    assert (r["deviceClassName"], r["classExists"], r["classDevices"]) == (
        "gpu.nvidia.cmo",
        False,
        0,
    )
    pod = pod_of(mirrored, "manual", "typo-")
    assert d["pods"] == [{"namespace": "ops", "name": pod["metadata"]["name"]}]


async def test_no_device_matches_the_conditions(mirrored: Mirrored) -> None:
    d = await explain(mirrored, "manual", "h200-")
    assert d["verdict"] == "NO_MATCH"
    assert d["message"] == (
        f"request gpu: no device matches the conditions: {H200!r} rejected 2 of 2 "
        "(GPU nodes where gpu.nvidia.com publishes no devices: legacy-0)"
    )
    [r] = d["requests"]
    gpus = [
        dev
        for s in mirrored.raw("manual", "resourceslices")
        if s["spec"]["driver"] == "gpu.nvidia.com"
        for dev in s["spec"].get("devices", [])
    ]
    assert r["classDevices"] == len(gpus) == 2
    assert r["selectors"] == [{"expression": H200, "passing": 0, "rejected": 2}]
    assert (r["freeOrShareable"], r["verdict"]) == (0, "NO_MATCH")
    assert d["nodesWithoutDriver"] == ["legacy-0"]


async def test_no_devices_left_held_by_an_idle_claim(mirrored: Mirrored) -> None:
    d = await explain(mirrored, "manual", "a100-")
    assert d["verdict"] == "ALL_HELD"
    assert d["message"] == (
        "request gpu: no devices left: every matching device is held by ops/forgotten (idle); "
        "1 of them idle (GPU nodes where gpu.nvidia.com publishes no devices: legacy-0)"
    )
    [r] = d["requests"]
    assert r["selectors"] == [{"expression": A100, "passing": 1, "rejected": 1}]
    assert r["heldBy"] == [{"namespace": "ops", "name": "forgotten"}]
    [holder] = d["holders"]
    assert holder["claim"] == {"namespace": "ops", "name": "forgotten"}
    assert (holder["idle"], holder["running"], holder["pods"]) == (True, False, [])
    assert holder["idleSince"] is not None  # the store's idle clock, filled in by the glue
    assert holder["resourceClaim"] == {"name": "forgotten", "state": "ALLOCATED"}


async def test_sharing_is_off_and_another_pod_took_the_device_first(mirrored: Mirrored) -> None:
    first = pod_of(mirrored, "manual", "first-")
    assert (first["status"]["phase"], first["spec"]["nodeName"]) == ("Running", "h100-0")
    d = await explain(mirrored, "manual", "second-")
    assert d["verdict"] == "SHARING_OFF"
    [holder] = d["holders"]
    first_name = first["metadata"]["name"]
    assert holder["running"] and holder["pods"] == [{"namespace": "ops", "name": first_name}]
    assert d["message"].startswith(
        f"request gpu: sharing is off and another pod took the device first: ops/{first_name} "
        f"(through ops/{holder['claim']['name']})"
    )


async def test_the_driver_publishes_no_devices(mirrored: Mirrored) -> None:
    d = await explain(mirrored, "manual", "amd-")
    assert d["verdict"] == "DRIVER_MISSING"
    assert d["nodesWithoutDriver"] == ["legacy-0"]
    assert d["message"] == (
        "request gpu: the driver gpu.amd.com publishes no devices (no ResourceSlice from it); "
        "GPU nodes without its devices: legacy-0"
    )


async def test_a_selector_that_fails_to_evaluate_is_reported_as_such(mirrored: Mirrored) -> None:
    d = await explain(mirrored, "manual", "profile-")
    assert d["verdict"] == "SELECTOR_ERROR"
    [r] = d["requests"]
    [error] = r["selectorErrors"]
    assert error["expression"] == NO_PROFILE
    assert "profile" in error["message"]
    assert d["message"].startswith(f"request gpu: a selector failed: {NO_PROFILE!r}: ")


async def test_the_demo_trainer_replica_waits_for_held_gpus(mirrored: Mirrored) -> None:
    [waiting] = [
        p
        for p in mirrored.raw("east", "pods")
        if p["metadata"]["namespace"] == "training" and p["status"].get("phase") == "Pending"
    ]
    prefix = waiting["metadata"]["name"] + "-gpu-"
    # The deployment is pinned to east-h200-1 by nodeSelector: the mirror keeps the pod's
    # nodeSelector, so no eligible nodes need to be given.
    assert waiting["spec"]["nodeSelector"] == {"kubernetes.io/hostname": "east-h200-1"}
    d = await explain(mirrored, "east", prefix, "training")
    assert d["verdict"] == "ALL_HELD"
    [r] = d["requests"]
    h200_1 = [
        dev
        for s in mirrored.raw("east", "resourceslices")
        if s["spec"].get("nodeName") == "east-h200-1" and s["spec"]["driver"] == "gpu.nvidia.com"
        for dev in s["spec"].get("devices", [])
        if dev["attributes"]["type"]["string"] == "gpu"
    ]
    assert (r["classDevices"], r["freeOrShareable"]) == (len(h200_1), 0) == (4, 0)
    idle = [h["claim"]["name"] for h in d["holders"] if h["idle"]]
    assert idle == ["notebook-gpu"]
    assert "; 1 of them idle; its pods may use 1 of " in d["message"]
    assert "held by research/notebook-gpu (idle), " in d["message"]
    # The pod's own pin keeps it off the H200s free on east-h200-0: said, never "all held" alone.
    assert d["message"].endswith(
        "nodeSelector kubernetes.io/hostname=east-h200-1; matching devices are free on nodes its "
        "pods may not use: east-h200-0"
    )
    # The same as naming the pinned node; naming other nodes overrides what the pod says.
    pinned = await explain(mirrored, "east", prefix, "training", eligible=["east-h200-1"])
    assert (pinned["verdict"], pinned["message"]) == (d["verdict"], d["message"])
    elsewhere = await explain(mirrored, "east", prefix, "training", eligible=["east-h200-0"])
    assert elsewhere["verdict"] == "ALLOCATABLE"
    assert "on node east-h200-0" in elsewhere["message"]


async def test_allocated_claims_pass_or_fail_the_checklist(mirrored: Mirrored) -> None:
    shared = await explain(mirrored, "east", "shared-h200", "inference")
    assert shared["verdict"] == "OK"
    assert [c["name"] for c in shared["checks"]] == [
        "allocated",
        "node",
        "devices",
        "consumers",
        "running",
    ]
    assert all(c["ok"] for c in shared["checks"])
    users = sorted(
        p["metadata"]["name"]
        for p in mirrored.raw("east", "pods")
        if any(
            c.get("resourceClaimName") == "shared-h200" for c in p["spec"].get("resourceClaims", [])
        )
    )
    assert sorted(p["name"] for p in shared["pods"]) == users and len(users) == 3
    notebook = await explain(mirrored, "east", "notebook-gpu", "research")
    assert notebook["verdict"] == "IDLE"
    assert notebook["message"] == (
        "allocated (gpu.nvidia.com/east-h200-1/gpu-0) but no consumer pod is Running"
    )
    assert [c["ok"] for c in notebook["checks"]] == [True, True, True, False, False]


async def test_an_unknown_claim_is_null(mirrored: Mirrored) -> None:
    data = await mirrored.data(EXPLAIN, cluster="manual", namespace="ops", name="nope")
    assert data["explainClaim"] is None
    data = await mirrored.data(EXPLAIN, cluster="nowhere", namespace="ops", name="forgotten")
    assert data["explainClaim"] is None
