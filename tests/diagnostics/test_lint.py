"""lint over manifests (one test per rule, each with a manifest that must not trigger it) and
over the real upstream workload files; lint_cluster over the simulator's demo world."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from dra_mirror.service.diagnostics.lint import ClusterFacts, Finding, lint_manifests
from dra_mirror.service.diagnostics.lint_cluster import lint_cluster
from dra_mirror.service.sim.scenario import build_world, load_scenario
from tests.diagnostics.conftest import Cluster, mirror


def deployment(
    pod_spec: dict[str, Any], *, replicas: int = 1, name: str = "app", ns: str = "ml"
) -> dict:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"replicas": replicas, "template": {"spec": pod_spec}},
    }


def pod_spec(
    *, claims=("gpu",), listed=("gpu",), template="one-gpu", claim_name=None, **extra
) -> dict:
    resource_claims = []
    for name in claims:
        entry: dict[str, Any] = {"name": name}
        if claim_name:
            entry["resourceClaimName"] = claim_name
        else:
            entry["resourceClaimTemplateName"] = template
        resource_claims.append(entry)
    container: dict[str, Any] = {
        "name": "main",
        "image": "cuda",
        "resources": {"claims": [{"name": n} for n in listed]},
    }
    container["resources"].update(extra.pop("resources", {}))
    return {"resourceClaims": resource_claims, "containers": [container], **extra}


def rules(findings: list[Finding]) -> list[tuple[str, str, str]]:
    return [(f.rule, f.severity, f.path) for f in findings]


def test_a_correct_workload_has_no_findings() -> None:
    assert lint_manifests([deployment(pod_spec())]) == []


def test_container_lists_an_undeclared_claim() -> None:
    [f] = lint_manifests([deployment(pod_spec(claims=("gpu",), listed=("gpu", "gpus")))])
    assert (f.rule, f.severity, f.object) == (
        "container-claim-unknown",
        "error",
        "Deployment ml/app",
    )
    assert f.path == "spec.template.spec.containers[0].resources.claims[1]"
    assert "'gpus'" in f.message and "rejected" in f.message


def test_declared_claim_no_container_lists() -> None:
    findings = lint_manifests(
        [{"kind": "Pod", "metadata": {"name": "p"}, "spec": pod_spec(listed=())}]
    )
    assert rules(findings) == [("claim-not-used", "warning", "spec.resourceClaims[0]")]
    assert findings[0].object == "Pod default/p"


def test_device_plugin_limit_beside_a_claim() -> None:
    spec = pod_spec(resources={"limits": {"nvidia.com/gpu": 1}})
    assert rules(lint_manifests([deployment(spec)])) == [
        ("device-plugin-and-dra", "warning", "spec.template.spec.containers[0].resources.limits")
    ]
    # The old way alone is not this mistake.
    old_way = {"containers": [{"name": "main", "resources": {"limits": {"nvidia.com/gpu": 1}}}]}
    assert lint_manifests([deployment(old_way)]) == []


def test_device_plugin_limit_is_quiet_where_no_device_plugin_runs() -> None:
    # A DRA-only cluster (GPU Operator's GPUCluster mode) advertises no nvidia.com/gpu: a
    # limit there is an extended resource DRA serves, not a device plugin's.
    spec = pod_spec(resources={"limits": {"nvidia.com/gpu": 1}})
    assert lint_manifests([deployment(spec)], ClusterFacts(advertised=frozenset())) == []
    with_plugin = ClusterFacts(advertised=frozenset({"nvidia.com/gpu"}))
    assert [f.rule for f in lint_manifests([deployment(spec)], with_plugin)] == [
        "device-plugin-and-dra"
    ]


def test_node_name_pinned_on_a_pod_with_claims() -> None:
    findings = lint_manifests(
        [{"kind": "Pod", "metadata": {"name": "p"}, "spec": pod_spec(nodeName="n1")}]
    )
    assert rules(findings) == [("node-name-pinned", "warning", "spec.nodeName")]
    assert "nodeSelector" in findings[0].message


def test_class_missing_in_claims_and_templates() -> None:
    claim = {
        "kind": "ResourceClaim",
        "metadata": {"name": "c", "namespace": "ml"},
        "spec": {
            "devices": {
                "requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.cmo"}}]
            }
        },
    }
    template = {
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "t", "namespace": "ml"},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": "gpu",
                            "firstAvailable": [
                                {"name": "big", "deviceClassName": "gpu.nvidia.com"},
                                {"name": "small", "deviceClassName": "mig.nvidia.cmo"},
                            ],
                        }
                    ]
                }
            }
        },
    }
    facts = ClusterFacts(classes={"gpu.nvidia.com", "mig.nvidia.com"})
    findings = lint_manifests([claim, template], facts)
    assert [(f.rule, f.object, f.path) for f in findings] == [
        ("class-missing", "ResourceClaim ml/c", "spec.devices.requests[0]"),
        ("class-missing", "ResourceClaimTemplate ml/t", "spec.spec.devices.requests[0]"),
    ]
    assert "'gpu.nvidia.cmo'" in findings[0].message and "'mig.nvidia.cmo'" in findings[1].message
    # Without knowing the cluster's classes, nothing is claimed.
    assert lint_manifests([claim, template]) == []


def test_claim_in_another_namespace() -> None:
    facts = ClusterFacts(claims={("inference", "shared-h200")})
    spec = pod_spec(claim_name="shared-h200")
    [f] = lint_manifests([deployment(spec, ns="ml")], facts)
    assert (f.rule, f.severity, f.path) == (
        "claim-other-namespace",
        "error",
        "spec.template.spec.resourceClaims[0]",
    )
    assert "inference" in f.message
    assert lint_manifests([deployment(spec, ns="inference")], facts) == []


def test_template_where_replicas_were_meant_to_share() -> None:
    facts = ClusterFacts(
        template_classes={("ml", "one-gpu"): ("gpu.nvidia.com",)},
        free_devices={"gpu.nvidia.com": {"n1": 2, "n2": 4}},
        node_labels={"n1": {"pool": "a"}, "n2": {"pool": "b"}},
    )
    pinned = pod_spec(nodeSelector={"pool": "a"})
    [f] = lint_manifests([deployment(pinned, replicas=3)], facts)
    assert (f.rule, f.path) == ("template-per-replica", "spec.template.spec.resourceClaims[0]")
    assert "have 2 free: replica 3 onward stays Pending" in f.message
    assert lint_manifests([deployment(pinned, replicas=2)], facts) == []
    assert lint_manifests([deployment(pod_spec(), replicas=6)], facts) == []
    # The template may come with the manifests themselves.
    template = {
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "one-gpu", "namespace": "ml"},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]
                }
            }
        },
    }
    local = ClusterFacts(free_devices=facts.free_devices, node_labels=facts.node_labels)
    assert (
        rules(lint_manifests([template, deployment(pinned, replicas=3)], local))[0][0]
        == "template-per-replica"
    )


def test_malformed_manifest_is_reported_not_raised() -> None:
    bad = {"kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": "not-a-list"}}
    [f] = lint_manifests([bad, None])
    assert (f.rule, f.object) == ("manifest-invalid", "Pod default/p")


@pytest.mark.parametrize(
    "name",
    [
        "nvidia-quickstart-v1-gpu-test4-mig.yaml",
        "nvidia-quickstart-v1beta1-gpu-test4-mig.yaml",
        "nvidia-quickstart-v1-gpu-test-mps.yaml",
        "dra-example-driver-prioritized-alternatives.yaml",
        "nvidia-bats-gpu-simple-mig.yaml",
    ],
)
def test_upstream_workloads_are_clean(shared_dir: Path, name: str) -> None:
    docs = list(yaml.safe_load_all((shared_dir / "fixtures" / "upstream" / name).read_text()))
    facts = ClusterFacts(classes={"gpu.nvidia.com", "mig.nvidia.com", "gpu.example.com"})
    assert lint_manifests(docs, facts) == []


def test_upstream_extended_resource_pod_uses_limits_only(shared_dir: Path) -> None:
    path = shared_dir / "fixtures" / "upstream" / "nvidia-extended-resources-mig-1g-12gb.yaml"
    docs = list(yaml.safe_load_all(path.read_text()))
    # The pod asks through limits (nvidia.com/mig-1g.12gb) and declares no claim: nothing to say.
    assert lint_manifests(docs, ClusterFacts(classes={"mig-1g-12gb.gpu.nvidia.com"})) == []


def test_lint_cluster_on_the_demo_world(east: Cluster) -> None:
    findings = lint_cluster(
        classes=east.classes,
        devices=east.devices,
        claims=east.claims,
        pods=east.pods,
        nodes=east.nodes,
    )
    assert [(f.rule, f.object) for f in findings] == [
        ("gpu-node-without-driver", "Node east-legacy-0"),
        ("template-per-replica", f"ReplicaSet training/{findings[1].object.split('/')[1]}"),
    ]
    assert findings[1].object.startswith("ReplicaSet training/trainer-")
    assert (
        "3 replicas each got their own claim from a template and 1 stay Pending"
        in findings[1].message
    )


def test_lint_cluster_is_quiet_on_a_dra_only_cluster() -> None:
    # No device plugin: the evaluator's `limits: nvidia.com/gpu` beside its claim is served by
    # DRA (the class's extendedResourceName), and every GPU node publishes its devices.
    cluster = mirror(build_world(load_scenario("dra-only")).stores["dra-only"])
    evaluator = [p for p in cluster.pods if p.meta.name.startswith("evaluator-")]
    assert evaluator and evaluator[0].claims
    assert "nvidia.com/gpu" in evaluator[0].containers[0].limits
    findings = lint_cluster(
        classes=cluster.classes,
        devices=cluster.devices,
        claims=cluster.claims,
        pods=cluster.pods,
        nodes=cluster.nodes,
    )
    assert findings == []
