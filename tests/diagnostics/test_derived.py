"""Derived attributes (KEP-6080): a CEL error at run time aborts scheduling (explainClaim says
so), and lint's limits. Claims are shaped as the KEP's "Core Manifest Example: GPU & NIC NUMA
Alignment" writes them (SOURCES.md), over the simulator's demo cluster, whose NVIDIA GPUs
publish `resource.kubernetes.io/numaNode` and no longer the driver's own `numa`."""

from __future__ import annotations

from typing import Any

import pytest

from dra_mirror.service.diagnostics.derived import MAX_PER_REQUEST, failures
from dra_mirror.service.diagnostics.lint import lint_manifests
from dra_mirror.service.diagnostics.lint_cluster import lint_cluster
from dra_mirror.service.diagnostics.placement import Unsatisfiable, allocate
from dra_mirror.service.model.normalize import normalize
from dra_mirror.service.model.records import Allocation, ClaimRecord, key_of
from tests.diagnostics.conftest import Cluster

NUMA_OLD = "device.attributes['gpu.nvidia.com'].numa"  # the attribute the driver dropped
NUMA = "device.attributes['resource.kubernetes.io'].numaNode"


def alignment_claim(gpu_expression: str, *, name: str = "aligned") -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "training", "uid": f"uid-{name}"},
        "spec": {
            "devices": {
                "requests": [
                    {"name": "gpu", "exactly": {
                        "deviceClassName": "gpu.nvidia.com", "count": 1,
                        "derivedAttributes": [{"name": "custom/numa", "expression": gpu_expression}],
                    }},
                    {"name": "nic", "exactly": {
                        "deviceClassName": "network-interface", "count": 1,
                        "derivedAttributes": [{"name": "custom/numa", "expression": "0"}],
                    }},
                ],
                "constraints": [{"matchAttribute": "custom/numa", "requests": ["gpu", "nic"]}],
            }
        },
    }  # fmt: skip


def claim(raw: dict[str, Any]) -> ClaimRecord:
    record = normalize("ResourceClaim", raw, cluster="east")
    assert isinstance(record, ClaimRecord)
    return record


def test_a_cel_error_at_run_time_aborts_scheduling(east: Cluster):
    broken = claim(alignment_claim(NUMA_OLD))
    [failure] = failures(broken, east.classes, east.devices)
    assert (failure.request, failure.name, failure.expression) == ("gpu", "custom/numa", NUMA_OLD)
    assert failure.device.startswith("gpu.nvidia.com/") and "numa" in failure.message
    diagnosis = east.explain(broken)
    assert diagnosis.verdict == "derived-attribute-error"
    assert diagnosis.message.startswith("request gpu: derived attribute 'custom/numa'")
    assert "kube-scheduler aborts the allocation" in diagnosis.message
    assert "the pod stays Pending" in diagnosis.message


def test_an_expression_that_evaluates_everywhere_is_no_reason(east: Cluster):
    working = claim(alignment_claim(NUMA))
    assert failures(working, east.classes, east.devices) == []
    assert east.explain(working).verdict != "derived-attribute-error"


@pytest.mark.parametrize(
    ("expression", "says"),
    [("1.5", "must evaluate to a scalar or a list of scalars, got DOUBLE"),
     ("device.attributes['gpu.nvidia.com']", "got MAP"),
     ("device.attributes[", "")],
)  # fmt: skip
def test_values_of_another_type_and_broken_expressions_fail_too(east, expression, says):
    [failure] = failures(claim(alignment_claim(expression)), east.classes, east.devices)
    assert says in failure.message
    # a list of scalars is a valid value (KEP-5491 list semantics)
    listed = claim(alignment_claim(f"[{NUMA}, 1]"))
    assert failures(listed, east.classes, east.devices) == []


def derived(n: int, prefix: str = "custom/a") -> list[dict[str, str]]:
    return [{"name": f"{prefix}{i}", "expression": "1"} for i in range(n)]


def test_lint_limits_derived_attributes_per_request():
    body = alignment_claim(NUMA)
    body["spec"]["devices"]["requests"][0]["exactly"]["derivedAttributes"] = [
        {"name": "custom/numa", "expression": NUMA},
        *derived(MAX_PER_REQUEST),
    ]
    body["spec"]["devices"]["constraints"] += [
        {"distinctAttribute": f"custom/a{i}", "requests": ["gpu"]} for i in range(MAX_PER_REQUEST)
    ]
    # 33 constraints are over the API's own list limit too (api-invalid): only the derived
    # attributes' findings are this test's.
    [finding] = [f for f in lint_manifests([body]) if f.rule.startswith("derived")]
    assert (finding.rule, finding.severity, finding.path) == (
        "derived-attributes-limit", "error",
        "spec.devices.requests[0].exactly.derivedAttributes",
    )  # fmt: skip
    body["spec"]["devices"]["requests"][0]["exactly"]["derivedAttributes"].pop()
    assert [f for f in lint_manifests([body]) if f.rule.startswith("derived")] == []


def test_lint_warns_of_a_derived_attribute_no_constraint_uses():
    body = alignment_claim(NUMA)
    body["spec"]["devices"]["requests"][1]["exactly"]["derivedAttributes"].append(
        {"name": "custom/speed", "expression": "1"}
    )
    body["spec"]["devices"]["constraints"] = [{"matchAttribute": "custom/numa"}]  # all requests
    [finding] = lint_manifests([body])
    assert (finding.rule, finding.severity) == ("derived-attribute-unused", "warning")
    assert "'custom/speed'" in finding.message and "'nic'" in finding.message


def test_lint_reads_subrequests_templates_and_v1beta1():
    template = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "t", "namespace": "ml"},
        "spec": {"spec": {"devices": {
            "requests": [{"name": "gpu", "firstAvailable": [
                {"name": "big", "deviceClassName": "gpu.nvidia.com", "derivedAttributes": derived(1)},
                {"name": "small", "deviceClassName": "mig.nvidia.com", "derivedAttributes": derived(1, "custom/b")},
            ]}],
            # "gpu" covers both subrequests; nothing names custom/b0
            "constraints": [{"matchAttribute": "custom/a0", "requests": ["gpu"]}],
        }}},
    }  # fmt: skip
    [finding] = lint_manifests([template])
    assert finding.path == "spec.spec.devices.requests[0].firstAvailable[1].derivedAttributes"
    flat = {
        "apiVersion": "resource.k8s.io/v1beta1", "kind": "ResourceClaim",
        "metadata": {"name": "c", "namespace": "ml"},
        "spec": {"devices": {"requests": [{"name": "gpu", "deviceClassName": "gpu.nvidia.com",
                                           "derivedAttributes": derived(1)}]}},
    }  # fmt: skip
    [finding] = lint_manifests([flat])
    assert finding.path == "spec.devices.requests[0].derivedAttributes"


def test_lint_cluster_reads_the_mirrored_claims(east: Cluster):
    body = alignment_claim(NUMA, name="unused-speed")
    body["spec"]["devices"]["requests"][1]["exactly"]["derivedAttributes"].append(
        {"name": "custom/speed", "expression": "1"}
    )
    extra = claim(body)
    findings = lint_cluster(
        classes=east.classes,
        devices=east.devices,
        claims={**east.claims, key_of(extra): extra},
        pods=east.pods,
        nodes=east.nodes,
    )
    [finding] = [f for f in findings if f.rule.startswith("derived")]
    assert (finding.rule, finding.object, finding.path) == (
        "derived-attribute-unused", "ResourceClaim training/unused-speed",
        "spec.devices.requests[1]",
    )  # fmt: skip


def test_the_allocator_matches_constraints_on_derived_values(east: Cluster):
    # The demo's H200 nodes have four GPUs each, all on NUMA node 0 (resource.kubernetes.io/
    # numaNode); the NIC's derived value is a constant: 0 aligns, 1 cannot.
    aligned = claim(alignment_claim(NUMA))
    allocation = allocate(aligned, classes=east.classes, devices=east.devices, ledger=east.ledger)
    assert isinstance(allocation, Allocation)
    assert {r.request for r in allocation.results} == {"gpu", "nic"}
    body = alignment_claim(NUMA, name="apart")
    body["spec"]["devices"]["requests"][1]["exactly"]["derivedAttributes"][0]["expression"] = "1"
    apart = allocate(claim(body), classes=east.classes, devices=east.devices, ledger=east.ledger)
    assert isinstance(apart, Unsatisfiable)
    assert {v.verdict for v in apart.requests} == {"constraints"}
