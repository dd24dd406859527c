"""One node filter for every caller: nodeName, nodeSelector, required affinity, cordons, node
taints against the pod's tolerations — the same answer from raw objects (the simulator, the
manifests) and from records (the mirror)."""

from __future__ import annotations

from typing import Any

import pytest

from dra_mirror.service.diagnostics import node_filter
from dra_mirror.service.diagnostics.cluster import eligible_nodes, pods_eligible_nodes
from dra_mirror.service.model.normalize import normalize
from dra_mirror.service.model.records import NODE, POD, NodeRecord, PodRecord


def node(name: str, *, taints: list[dict] = (), cordoned: bool = False, ready: bool = True) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "uid": f"uid-{name}", "labels": {"pool": "x"}},
        "spec": {"taints": list(taints), **({"unschedulable": True} if cordoned else {})},
        "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }


def pod(*, tolerations: list[dict] = (), node_name: str | None = None) -> dict:
    spec: dict[str, Any] = {"containers": [{"name": "main"}], "tolerations": list(tolerations)}
    if node_name:
        spec["nodeName"] = node_name
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ns", "uid": "uid-p"},
        "spec": spec,
    }


GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
CASES = [
    ("untolerated NoSchedule", [GPU_TAINT], [], "node(s) had untolerated taint {nvidia.com/gpu: present}"),
    ("tolerated by key and value", [GPU_TAINT],
     [{"key": "nvidia.com/gpu", "operator": "Equal", "value": "present"}], None),
    ("tolerated by Exists", [GPU_TAINT], [{"key": "nvidia.com/gpu", "operator": "Exists"}], None),
    ("other value", [GPU_TAINT], [{"key": "nvidia.com/gpu", "value": "absent"}],
     "node(s) had untolerated taint {nvidia.com/gpu: present}"),
    ("other effect", [GPU_TAINT], [{"key": "nvidia.com/gpu", "operator": "Exists",
                                    "effect": "NoExecute"}],
     "node(s) had untolerated taint {nvidia.com/gpu: present}"),
    ("tolerate everything", [{"key": "a", "effect": "NoExecute"}], [{"operator": "Exists"}], None),
    ("PreferNoSchedule never filters", [{"key": "a", "effect": "PreferNoSchedule"}], [], None),
]  # fmt: skip


@pytest.mark.parametrize(
    ("case", "taints", "tolerations", "expected"), CASES, ids=[c[0] for c in CASES]
)
def test_node_taints_against_tolerations_raw_and_records_alike(
    case: str, taints: list, tolerations: list, expected: str | None
) -> None:
    raw_node, raw_pod = node("n1", taints=taints), pod(tolerations=tolerations)
    from_raw = node_filter.misfit(
        node_filter.PodTerms.of_spec(raw_pod["spec"]), node_filter.NodeFacts.of_raw(raw_node)
    )
    pod_record = normalize(POD, raw_pod, cluster="c")
    node_record = normalize(NODE, raw_node, cluster="c")
    assert isinstance(pod_record, PodRecord) and isinstance(node_record, NodeRecord)
    from_record = node_filter.misfit(
        node_filter.PodTerms.of_record(pod_record), node_filter.NodeFacts.of_record(node_record)
    )
    assert from_raw == from_record == expected


def test_cordoned_and_not_ready_nodes_need_their_tolerations() -> None:
    terms = node_filter.PodTerms()
    assert node_filter.misfit(terms, node_filter.NodeFacts.of_raw(node("c", cordoned=True))) == (
        node_filter.UNSCHEDULABLE
    )
    tolerant = node_filter.PodTerms(
        tolerations=({"key": "node.kubernetes.io/unschedulable", "operator": "Exists"},)
    )
    assert (
        node_filter.misfit(tolerant, node_filter.NodeFacts.of_raw(node("c", cordoned=True))) is None
    )
    assert node_filter.misfit(terms, node_filter.NodeFacts.of_raw(node("r", ready=False))) == (
        "node(s) had untolerated taint {node.kubernetes.io/not-ready: }"
    )


def test_node_name_names_the_only_node() -> None:
    terms = node_filter.PodTerms.of_spec(pod(node_name="n2")["spec"])
    nodes = [node_filter.NodeFacts.of_raw(node(n)) for n in ("n1", "n2", "n3")]
    assert node_filter.eligible(terms, nodes) == ["n2"]
    assert node_filter.misfit(terms, nodes[0]) == node_filter.NODE_NAME


def _records(*raw: dict) -> list[NodeRecord]:
    return [r for n in raw if isinstance(r := normalize(NODE, n, cluster="c"), NodeRecord)]


def test_eligible_nodes_leave_out_tainted_nodes_the_pod_does_not_tolerate() -> None:
    nodes = _records(node("plain"), node("gpu", taints=[GPU_TAINT]))
    assert eligible_nodes({}, nodes) == ["plain"]
    tolerating = ({"key": "nvidia.com/gpu", "operator": "Exists"},)
    assert eligible_nodes({}, nodes, tolerations=tolerating) == ["gpu", "plain"]


def test_a_waiting_pods_taints_and_tolerations_narrow_explains_nodes() -> None:
    nodes = _records(node("plain"), node("gpu", taints=[GPU_TAINT]))
    intolerant = normalize(POD, pod(), cluster="c")
    tolerant = normalize(
        POD, pod(tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists"}]), cluster="c"
    )
    assert isinstance(intolerant, PodRecord) and isinstance(tolerant, PodRecord)
    assert pods_eligible_nodes([intolerant], nodes) == ["plain"]
    assert pods_eligible_nodes([tolerant], nodes) is None  # nothing rules a node out
