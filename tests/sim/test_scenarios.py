"""Shipped scenarios: they load, pass the API server's validation, and show the demo's truth."""

from __future__ import annotations

from pathlib import Path

import pytest

from dra_mirror.service.model.records import DELETE_PROTECTION_FINALIZER, POD_CLAIM_NAME_ANNOTATION
from dra_mirror.service.sim import hardware
from dra_mirror.service.sim.scenario import (
    ScenarioError,
    World,
    build_stores,
    build_world,
    list_scenarios,
    load_scenario,
    parse_scenario,
)
from dra_mirror.service.sim.store import ClusterStore

CREATE_ORDER = (
    "namespaces",
    "deviceclasses",
    "nodes",
    "resourceslices",
    "resourceclaimtemplates",
    "resourceclaims",
    "pods",
)


@pytest.fixture(scope="module")
def demo() -> World:
    return build_world(load_scenario("demo"))


def pods_of(store: ClusterStore, prefix: str) -> list[dict]:
    return [p for p in store.list("pods") if p["metadata"]["name"].startswith(prefix)]


def claim_of(store: ClusterStore, pod: dict, entry: str) -> dict:
    statuses = {s["name"]: s["resourceClaimName"] for s in pod["status"]["resourceClaimStatuses"]}
    claim = store.get("resourceclaims", pod["metadata"]["namespace"], statuses[entry])
    assert claim is not None
    return claim


def test_shipped_scenarios_are_listed_and_load():
    names = list_scenarios()
    assert {"demo", "churn", "scale-500", "scale-5000"} <= set(names)
    for name in names:
        scenario = load_scenario(name)
        assert scenario.name == name and scenario.clusters and scenario.description


def test_a_path_loads_and_errors_name_the_problem(tmp_path: Path):
    path = tmp_path / "mine.yaml"
    path.write_text("clusters:\n  - name: a\n    versions: [v2]\n")
    with pytest.raises(ScenarioError, match=r"mine\.yaml.*versions"):
        load_scenario(path)
    with pytest.raises(ScenarioError, match="no scenario 'nope'"):
        load_scenario("nope")
    with pytest.raises(ScenarioError, match="unknown profile"):
        parse_scenario(
            {"clusters": [{"name": "a", "nodes": [{"name": "n", "devices": [{"profile": "tpu"}]}]}]}
        )
    with pytest.raises(ScenarioError, match="faults"):
        parse_scenario({"clusters": [{"name": "a", "faults": {"explode": True}}]})
    path.write_text("clusters:\n  - name: a\n    versions: [v1beta2]\n")
    assert load_scenario(str(path)).clusters[0].versions == ("v1beta2",)


@pytest.mark.parametrize("name", [n for n in list_scenarios() if n != "scale-5000"])
def test_every_object_passes_the_servers_validation(name: str):
    """Re-create every built object through the store's client path (validate=True)."""
    for spec in build_stores(load_scenario(name)):
        fresh = ClusterStore("check", default_namespaces=())
        for plural in CREATE_ORDER:
            for obj in spec.store.iter_objects(plural):
                meta = {
                    k: v
                    for k, v in obj["metadata"].items()
                    if k not in ("uid", "resourceVersion", "creationTimestamp", "managedFields")
                }
                fresh.create(plural, {**obj, "metadata": meta})
                if plural == "resourceclaims" and obj.get("status"):
                    current = fresh.get(plural, meta["namespace"], meta["name"])
                    fresh.update(plural, {**current, "status": obj["status"]}, subresource="status")
        assert fresh.count("pods") == spec.store.count("pods")


def test_demo_who_runs_and_who_waits(demo: World):
    east = demo.stores["east"]
    phases = {p["metadata"]["name"].rsplit("-", 2)[0]: [] for p in east.list("pods")}
    for pod in east.list("pods"):
        phases[pod["metadata"]["name"].rsplit("-", 2)[0]].append(pod["status"]["phase"])
    assert {k: sorted(v) for k, v in phases.items()} == {
        "inference-server": ["Running"] * 3,
        "mig-worker": ["Running"],
        "trainer": ["Pending", "Running", "Running"],
        "notebook": ["Running"],
        "gateway": ["Running"] * 2,
        "cuda-legacy": ["Running"],
        "mig-ext": ["Running"],
    }
    pending = next(p for p in pods_of(east, "trainer-") if p["status"]["phase"] == "Pending")
    condition = next(c for c in pending["status"]["conditions"] if c["type"] == "PodScheduled")
    assert condition["status"] == "False" and condition["reason"] == "Unschedulable"
    assert condition["message"].startswith(
        "0/4 nodes are available: 1 cannot allocate all claims, "
        "3 node(s) didn't match Pod's node affinity/selector."
    )
    waiting = claim_of(east, pending, "gpu")
    assert "status" not in waiting or not waiting["status"].get("allocation")
    legacy = pods_of(east, "cuda-legacy-")[0]
    assert legacy["spec"]["nodeName"] == "east-legacy-0" and "resourceClaims" not in legacy["spec"]
    for pod in pods_of(east, "trainer-") + pods_of(east, "mig-worker-"):
        assert pod["spec"].get("nodeName") in (None, "east-h200-1")


def test_demo_shared_claim_has_three_consumers(demo: World):
    east = demo.stores["east"]
    shared = east.get("resourceclaims", "inference", "shared-h200")
    replicas = pods_of(east, "inference-server-")
    assert sorted(r["uid"] for r in shared["status"]["reservedFor"]) == sorted(
        p["metadata"]["uid"] for p in replicas
    )
    assert {r["resource"] for r in shared["status"]["reservedFor"]} == {"pods"}
    result = shared["status"]["allocation"]["devices"]["results"][0]
    assert (result["pool"], result["device"]) == ("east-h200-0", "gpu-0")
    assert {p["spec"]["nodeName"] for p in replicas} == {"east-h200-0"}
    assert DELETE_PROTECTION_FINALIZER in shared["metadata"]["finalizers"]
    slices = [s for s in east.list("resourceslices") if s["spec"]["nodeName"] == "east-h200-0"]
    gpu0 = next(d for s in slices for d in s["spec"].get("devices", []) if d["name"] == "gpu-0")
    assert gpu0["attributes"]["uuid"]["string"] == hardware.H200.real_uuid


def test_demo_generated_claims_look_like_kubernetes_makes_them(demo: World):
    east = demo.stores["east"]
    for pod in pods_of(east, "trainer-"):
        claim = claim_of(east, pod, "gpu")
        meta = claim["metadata"]
        assert meta["generateName"] == f"{pod['metadata']['name']}-gpu-"
        assert (
            meta["name"].startswith(meta["generateName"])
            and len(meta["name"]) == len(meta["generateName"]) + 5
        )
        assert meta["annotations"] == {POD_CLAIM_NAME_ANNOTATION: "gpu"}
        assert meta["labels"] == {"team": "training"}  # copied from the template
        assert meta["ownerReferences"] == [
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "name": pod["metadata"]["name"],
                "uid": pod["metadata"]["uid"],
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
        template = east.get("resourceclaimtemplates", "training", "single-h200")
        assert claim["spec"] == template["spec"]["spec"]
        if pod["status"]["phase"] == "Running":
            assert meta["finalizers"] == [DELETE_PROTECTION_FINALIZER]
            assert claim["status"]["reservedFor"] == [
                {"resource": "pods", "name": pod["metadata"]["name"], "uid": pod["metadata"]["uid"]}
            ]
            selector = claim["status"]["allocation"]["nodeSelector"]["nodeSelectorTerms"][0]
            assert selector["matchFields"][0]["values"] == ["east-h200-1"]
        else:
            assert "finalizers" not in meta


def test_demo_idle_mig_and_nic_shares(demo: World):
    east = demo.stores["east"]
    idle = east.get("resourceclaims", "research", "notebook-gpu")
    assert idle["status"]["allocation"]["devices"]["results"][0]["device"] == "gpu-0"
    assert not idle["status"].get("reservedFor") and not idle["metadata"].get("finalizers")
    mig = claim_of(east, pods_of(east, "mig-worker-")[0], "mig")
    devices = [r["device"] for r in mig["status"]["allocation"]["devices"]["results"]]
    # gpu-0 is held whole by the idle claim, so all three partitions land on gpu-1.
    assert devices == ["gpu-1-mig-1g18gb-19-0", "gpu-1-mig-1g18gb-19-1", "gpu-1-mig-3g71gb-9-4"]
    shares = [claim_of(east, p, "net") for p in pods_of(east, "gateway-")]
    results = [c["status"]["allocation"]["devices"]["results"][0] for c in shares]
    assert {(r["pool"], r["device"]) for r in results} == {("east-a100-0", "eth0")}
    assert len({r["shareID"] for r in results}) == 2
    for r in results:
        assert r["consumedCapacity"] == {
            f"{hardware.NIC_DRIVER}/bandwidth": "10G",
            f"{hardware.NIC_DRIVER}/maxVirtualDevices": "1",
        }


def test_demo_extended_resource_claim_is_made_by_the_scheduler(demo: World):
    east = demo.stores["east"]
    pod = pods_of(east, "mig-ext-")[0]
    status = pod["status"]["extendedResourceClaimStatus"]
    assert status["requestMappings"] == [
        {
            "containerName": "main",
            "resourceName": "nvidia.com/mig-1g.18gb",
            "requestName": "container-0-request-0",
        }
    ]
    claim = east.get("resourceclaims", "research", status["resourceClaimName"])
    meta = claim["metadata"]
    assert meta["generateName"] == f"{pod['metadata']['name']}-extended-resources-"
    assert meta["annotations"] == {"resource.kubernetes.io/extended-resource-claim": "true"}
    assert meta["ownerReferences"][0]["uid"] == pod["metadata"]["uid"]
    request = claim["spec"]["devices"]["requests"][0]
    assert request["exactly"]["deviceClassName"] == "mig-1g-18gb.gpu.nvidia.com"
    (result,) = claim["status"]["allocation"]["devices"]["results"]
    assert result["request"] == "container-0-request-0"
    assert "-mig-1g18gb-19-" in result["device"] and result["pool"] == pod["spec"]["nodeName"]


def test_demo_west_and_determinism(demo: World):
    west = demo.stores["west"]
    assert build_stores(load_scenario("demo"))[1].versions == ("v1beta1",)
    pair = west.get("resourceclaims", "batch", "h100-pair")
    assert not (pair.get("status") or {}).get("allocation")
    again = build_world(load_scenario("demo"))
    for name, store in demo.stores.items():
        other = again.stores[name]
        for plural in ("resourceclaims", "pods", "resourceslices"):
            assert [strip(o) for o in store.list(plural)] == [strip(o) for o in other.list(plural)]


def strip(obj: dict) -> dict:
    """An object without what follows the wall clock."""
    meta = {
        k: v
        for k, v in obj["metadata"].items()
        if k not in ("creationTimestamp", "managedFields", "deletionTimestamp")
    }
    status = obj.get("status")
    if isinstance(status, dict):
        status = {k: v for k, v in status.items() if k not in ("conditions", "startTime")}
        status.pop("containerStatuses", None)
    return {**obj, "metadata": meta, "status": status}


@pytest.mark.slow
def test_scale_5000_counts():
    (spec,) = build_stores(load_scenario("scale-5000"))
    store = spec.store
    assert store.count("nodes") == 5000
    assert store.count("resourceslices") == 5000
    assert store.count("resourceclaims") == 40_000
    assert store.count("pods") == 40_000
    devices = sum(len(s["spec"]["devices"]) for s in store.iter_objects("resourceslices"))
    assert devices == 40_000
    running = sum(1 for p in store.iter_objects("pods") if p["status"]["phase"] == "Running")
    allocated = sum(1 for c in store.iter_objects("resourceclaims") if c.get("status"))
    assert running == allocated == 38_000


def test_dra_only_serves_the_old_limits_through_dra():
    """GPU Operator's GPUCluster mode: no device plugin, every GPU through DRA."""
    store = build_world(load_scenario("dra-only")).stores["dra-only"]
    for node in store.list("nodes"):
        assert not any("/" in name for name in node["status"]["capacity"])
        assert node["metadata"]["labels"]["feature.node.kubernetes.io/pci-10de.present"] == "true"
    [gpu_class] = [
        c for c in store.list("deviceclasses") if c["metadata"]["name"] == "gpu.nvidia.com"
    ]
    assert gpu_class["spec"]["extendedResourceName"] == "nvidia.com/gpu"
    pods = store.list("pods")
    assert pods and all(p["status"]["phase"] == "Running" for p in pods)
    for pod in pods_of(store, "cuda-legacy-") + pods_of(store, "evaluator-"):
        status = pod["status"]["extendedResourceClaimStatus"]
        assert status["requestMappings"][0]["resourceName"] == "nvidia.com/gpu"
        claim = store.get(
            "resourceclaims", pod["metadata"]["namespace"], status["resourceClaimName"]
        )
        assert (
            claim["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"]
            == "gpu.nvidia.com"
        )
        assert claim["status"]["allocation"]["devices"]["results"][0]["device"].startswith("gpu-")
    # The evaluator holds two GPUs: one by its claim, one by its limit.
    [evaluator] = pods_of(store, "evaluator-")
    held = {
        r["device"]
        for c in store.list("resourceclaims")
        if c["metadata"]["ownerReferences"][0]["uid"] == evaluator["metadata"]["uid"]
        for r in c["status"]["allocation"]["devices"]["results"]
    }
    assert len(held) == 2
