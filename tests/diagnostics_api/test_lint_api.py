"""lint and lintManifests through GraphQL over the mirrored simulator: the cluster checks name
what the simulator's objects say (GPU nodes without a slice, a ReplicaSet whose replicas got
template claims and wait, a class of a driver that publishes nothing); manifests are linted
offline (the upstream workload files are clean), against a cluster's facts (a class the
cluster lacks, a claim in another namespace, more replicas than free devices), and rule by rule
on a bad workload; text that is not YAML is a GraphQL error."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.diagnostics_api.conftest import Mirrored

LINT = """query Lint($cluster: String!) {
  lint(cluster: $cluster) { rule severity object path message } }"""
LINT_MANIFESTS = """query Lint($yaml: String!, $cluster: String) {
  lintManifests(yaml: $yaml, cluster: $cluster) { rule severity object path message } }"""
WORKLOADS = (
    "dra-example-driver-prioritized-alternatives.yaml",
    "nvidia-bats-gpu-simple-mig.yaml",
    "nvidia-quickstart-v1-gpu-test-mps.yaml",
    "nvidia-quickstart-v1-gpu-test4-mig.yaml",
    "nvidia-quickstart-v1beta1-gpu-test4-mig.yaml",
    "nvidia-extended-resources-mig-1g-12gb.yaml",
)


def gpu_nodes_without_slices(m: Mirrored, cluster: str) -> list[str]:
    with_slices = {s["spec"].get("nodeName") for s in m.raw(cluster, "resourceslices")}
    return sorted(
        n["metadata"]["name"]
        for n in m.raw(cluster, "nodes")
        if "nvidia.com/gpu" in (n.get("status") or {}).get("capacity", {})
        and n["metadata"]["name"] not in with_slices
    )


async def test_lint_a_mirrored_cluster(mirrored: Mirrored) -> None:
    east = (await mirrored.data(LINT, cluster="east"))["lint"]
    assert (
        [f["object"] for f in east if f["rule"] == "gpu-node-without-driver"]
        == [f"Node {n}" for n in gpu_nodes_without_slices(mirrored, "east")]
        == ["Node east-legacy-0"]
    )
    [replicas] = [f for f in east if f["rule"] == "template-per-replica"]
    waiting = [
        p
        for p in mirrored.raw("east", "pods")
        if p["status"].get("phase") == "Pending" and p["metadata"]["namespace"] == "training"
    ]
    [owner] = {o["name"] for p in waiting for o in p["metadata"]["ownerReferences"]}
    assert (replicas["severity"], replicas["object"]) == ("WARNING", f"ReplicaSet training/{owner}")
    assert f"and {len(waiting)} stay Pending" in replicas["message"]
    manual = (await mirrored.data(LINT, cluster="manual"))["lint"]
    assert [(f["rule"], f["object"]) for f in manual] == [
        ("class-matches-nothing", "DeviceClass gpu.amd.com"),
        ("gpu-node-without-driver", "Node legacy-0"),
    ]
    assert not any(
        s["spec"]["driver"] == "gpu.amd.com" for s in mirrored.raw("manual", "resourceslices")
    )
    assert (await mirrored.data(LINT, cluster="nowhere"))["lint"] == []


@pytest.mark.parametrize("name", WORKLOADS)
async def test_upstream_workloads_offline_are_clean(
    mirrored: Mirrored, shared_dir: Path, name: str
) -> None:
    text = (shared_dir / "fixtures" / "upstream" / name).read_text()
    assert (await mirrored.data(LINT_MANIFESTS, yaml=text))["lintManifests"] == []


def class_names(docs: list[Any]) -> set[str]:
    """Every deviceClassName a manifest's claims and templates ask for (v1 and v1beta1)."""
    found: set[str] = set()

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                if k == "deviceClassName":
                    found.add(v)
                walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)

    walk(docs)
    return found


@pytest.mark.parametrize("name", WORKLOADS[:2])
async def test_upstream_workloads_against_a_cluster(
    mirrored: Mirrored, shared_dir: Path, name: str
) -> None:
    text = (shared_dir / "fixtures" / "upstream" / name).read_text()
    found = (await mirrored.data(LINT_MANIFESTS, yaml=text, cluster="east"))["lintManifests"]
    classes = {c["metadata"]["name"] for c in mirrored.raw("east", "deviceclasses")}
    missing = class_names(list(yaml.safe_load_all(text))) - classes
    flagged = {
        re.search(r"names DeviceClass '([^']+)'", f["message"])[1]  # type: ignore[index]
        for f in found
        if f["rule"] == "class-missing"
    }
    assert flagged == missing
    assert all(f["severity"] == "ERROR" for f in found if f["rule"] == "class-missing")
    if name.startswith("dra-example-driver"):
        assert missing == {"gpu.example.com"}  # the example driver is not in the demo


BAD = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: many, namespace: training}
spec:
  replicas: 6
  template:
    spec:
      nodeSelector: {kubernetes.io/hostname: east-h200-0}
      resourceClaims:
        - {name: gpu, resourceClaimTemplateName: single-h200}
      containers:
        - name: main
          image: cuda
          resources:
            claims: [{name: gpu}]
---
apiVersion: v1
kind: Pod
metadata: {name: careless, namespace: default}
spec:
  nodeName: east-h200-0
  resourceClaims:
    - {name: gpu, resourceClaimName: shared-h200}
    - {name: spare, resourceClaimTemplateName: single-h200}
  containers:
    - name: main
      image: cuda
      resources:
        claims: [{name: gpu}, {name: gpus}]
        limits: {nvidia.com/gpu: "1"}
"""


async def test_a_bad_workload_rule_by_rule(mirrored: Mirrored) -> None:
    offline = (await mirrored.data(LINT_MANIFESTS, yaml=BAD))["lintManifests"]
    online = (await mirrored.data(LINT_MANIFESTS, yaml=BAD, cluster="east"))["lintManifests"]
    pod_rules = {
        "container-claim-unknown": "ERROR",
        "claim-not-used": "WARNING",
        "device-plugin-and-dra": "WARNING",
        "node-name-pinned": "WARNING",
    }
    assert {f["rule"]: f["severity"] for f in offline} == pod_rules
    assert {f["object"] for f in offline} == {"Pod default/careless"}
    by_rule = {f["rule"]: f for f in online}
    # shared-h200 exists only in namespace inference: claims are namespaced, the pod waits.
    assert by_rule["claim-other-namespace"]["severity"] == "ERROR"
    assert "inference" in by_rule["claim-other-namespace"]["message"]
    spread = by_rule["template-per-replica"]
    assert spread["object"] == "Deployment training/many"
    assert "6 replicas" in spread["message"] and "single-h200" in spread["message"]
    # Free whole GPUs on east-h200-0: not allocated, and none of their MIG partitions either.
    taken = {
        r["device"]
        for c in mirrored.raw("east", "resourceclaims")
        for r in ((c.get("status") or {}).get("allocation") or {})
        .get("devices", {})
        .get("results", [])
        if r["pool"] == "east-h200-0" and r["driver"] == "gpu.nvidia.com"
    }
    gpus = [
        d["name"]
        for s in mirrored.raw("east", "resourceslices")
        if s["spec"]["pool"]["name"] == "east-h200-0" and s["spec"]["driver"] == "gpu.nvidia.com"
        for d in s["spec"].get("devices", [])
        if d["attributes"]["type"]["string"] == "gpu"
    ]
    free = [g for g in gpus if not any(t == g or t.startswith(f"{g}-mig-") for t in taken)]
    assert f"(1) have {len(free)} free: replica {len(free) + 1} onward" in spread["message"]
    assert set(by_rule) == {*pod_rules, "claim-other-namespace", "template-per-replica"}


async def test_text_that_is_not_yaml_is_an_error(mirrored: Mirrored) -> None:
    body = await mirrored.query(LINT_MANIFESTS, yaml="kind: Pod\n  spec: [")
    assert body["data"] is None
    [error] = body["errors"]
    assert error["extensions"]["code"] == "BAD_YAML"
    assert error["message"].startswith("not YAML: ")


async def test_hostile_yaml_is_a_clear_error(mirrored: Mirrored) -> None:
    deep = "kind: Pod\nspec: " + "[" * 5000 + "]" * 5000
    laughs = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 9)}]\n" for i in range(8)
    )
    for text in (deep, laughs):
        body = await mirrored.query(LINT_MANIFESTS, yaml=text)
        [error] = body["errors"]
        assert error["extensions"]["code"] == "BAD_YAML", error
        assert "nest" in error["message"] or "aliases expanded" in error["message"]
