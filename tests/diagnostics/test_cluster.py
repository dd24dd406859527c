"""Cluster facts: the driver a class names, GPU-looking nodes, and the scheduler's
NodeResourcesFit arithmetic (init containers, terminal pods)."""

from __future__ import annotations

from dra_mirror.service.diagnostics.cluster import (
    driver_of_selectors,
    gpu_nodes,
    node_shortfall,
    pod_requests,
)
from dra_mirror.service.model.records import Container, Meta, NodeRecord, PodRecord
from tests.diagnostics.builders import CLUSTER


def pod(
    name: str, *containers: Container, node: str | None = "n1", phase: str = "Running"
) -> PodRecord:
    return PodRecord(
        meta=Meta(cluster=CLUSTER, name=name, namespace="default", uid=f"uid-{name}"),
        phase=phase,
        node_name=node,
        containers=containers,
    )


def node(name: str = "n1", *, capacity=None, labels=None, **allocatable: str) -> NodeRecord:
    return NodeRecord(
        meta=Meta(cluster=CLUSTER, name=name, labels=labels or {}),
        capacity=capacity or {},
        allocatable=allocatable,
    )


def test_driver_named_by_a_class() -> None:
    assert driver_of_selectors(["device.driver == 'gpu.nvidia.com' && x"]) == "gpu.nvidia.com"
    assert driver_of_selectors(
        ['device.attributes["a.io"].x', 'device.driver=="cni.dra.networking.x-k8s.io"']
    ) == ("cni.dra.networking.x-k8s.io")
    assert driver_of_selectors(["device.attributes['gpu.nvidia.com'].type == 'gpu'"]) is None


def test_gpu_looking_nodes() -> None:
    nodes = [
        node("plugin", capacity={"nvidia.com/gpu": "4"}),
        node("gfd", labels={"nvidia.com/gpu.present": "true"}),
        node("nfd", labels={"feature.node.kubernetes.io/pci-10de.present": "true"}),
        node("zero", capacity={"nvidia.com/gpu": "0"}),
        node("cpu", labels={"kubernetes.io/os": "linux"}),
    ]
    assert [n.meta.name for n in gpu_nodes(nodes)] == ["gfd", "nfd", "plugin"]


def test_pod_requests_take_the_larger_of_containers_and_init() -> None:
    p = pod(
        "p",
        Container(name="a", requests={"cpu": "500m", "memory": "1Gi"}),
        Container(
            name="b", requests={"cpu": "1"}, limits={"memory": "2Gi"}
        ),  # limits default requests
        Container(name="init", init=True, requests={"cpu": "4", "memory": "1Gi"}),
    )
    assert {k: str(v) for k, v in pod_requests(p).items()} == {
        "cpu": "4",
        "memory": str(3 * 1024**3),
    }


def test_node_shortfall_counts_bound_pods_but_not_finished_ones() -> None:
    n1 = node(cpu="8", memory="16Gi")
    waiting = pod("waiting", Container(name="m", requests={"cpu": "2"}), node=None, phase="Pending")
    busy = pod("busy", Container(name="m", requests={"cpu": "6500m"}))
    done = pod("done", Container(name="m", requests={"cpu": "8"}), phase="Succeeded")
    elsewhere = pod("elsewhere", Container(name="m", requests={"cpu": "8"}), node="n2")
    assert node_shortfall(waiting, n1, [busy, done, elsewhere, waiting]) == ("cpu", "8500m", "8")
    assert node_shortfall(waiting, n1, [done, elsewhere]) is None
    big = pod("big", Container(name="m", requests={"memory": "20Gi"}), node=None, phase="Pending")
    assert node_shortfall(big, n1, []) == ("memory", "20Gi", "16Gi")


def test_eligible_nodes_by_node_selector() -> None:
    from dra_mirror.service.diagnostics.cluster import eligible_nodes

    nodes = [
        node("a", labels={"pool": "x"}),
        node("b", labels={"pool": "y"}),
        node("c", labels={"pool": "x"}),
    ]
    assert eligible_nodes({"pool": "x"}, nodes) == ["a", "c"]
    assert eligible_nodes({}, nodes) == ["a", "b", "c"]


def _affinity(*terms: dict) -> dict:
    return {"nodeSelectorTerms": list(terms)}


def _expr(key: str, operator: str, *values: str) -> dict:
    return {"key": key, "operator": operator, **({"values": list(values)} if values else {})}


NODES = [
    node("a", labels={"pool": "x", "gpus": "8"}),
    node("b", labels={"pool": "y", "gpus": "2"}),
    node("c", labels={"pool": "x"}),
    node("d", labels={"gpus": "many"}),
]


def test_eligible_nodes_by_required_node_affinity() -> None:
    from dra_mirror.service.diagnostics.cluster import eligible_nodes

    def admitted(*expressions: dict, selector: dict | None = None) -> list[str]:
        return eligible_nodes(selector or {}, NODES, _affinity({"matchExpressions": expressions}))

    assert admitted(_expr("pool", "In", "x", "z")) == ["a", "c"]
    assert admitted(_expr("pool", "NotIn", "x")) == ["b", "d"]  # an absent label is not in
    assert admitted(_expr("gpus", "Exists")) == ["a", "b", "d"]
    assert admitted(_expr("gpus", "DoesNotExist")) == ["c"]
    # Gt/Lt compare integers; a label that is not one ("many") or absent never passes.
    assert admitted(_expr("gpus", "Gt", "4")) == ["a"]
    assert admitted(_expr("gpus", "Lt", "4")) == ["b"]
    assert admitted(_expr("gpus", "Gt", "x")) == []
    assert admitted(_expr("gpus", "Gt", "1", "2")) == []
    assert admitted(_expr("pool", "Like", "x")) == []
    # Expressions of a term are ANDed, with the nodeSelector too.
    assert admitted(_expr("pool", "In", "x"), _expr("gpus", "Exists")) == ["a"]
    assert admitted(_expr("gpus", "Exists"), selector={"pool": "y"}) == ["b"]
    # Terms are ORed; matchFields name nodes; an empty term or no terms admit nothing.
    by_name = {"matchFields": [_expr("metadata.name", "In", "d")]}
    either = _affinity({"matchExpressions": [_expr("pool", "In", "y")]}, by_name)
    assert eligible_nodes({}, NODES, either) == ["b", "d"]
    assert eligible_nodes({}, NODES, _affinity({})) == []
    assert eligible_nodes({}, NODES, _affinity()) == []
    assert eligible_nodes({}, NODES, None) == ["a", "b", "c", "d"]
    cordoned = [NodeRecord(meta=NODES[0].meta, unschedulable=True), *NODES[1:]]
    assert eligible_nodes({"pool": "x"}, cordoned) == ["c"]


def test_the_nodes_every_waiting_pod_may_use() -> None:
    from dra_mirror.service.diagnostics.cluster import pods_eligible_nodes

    def constrained(name: str, selector: dict, affinity: dict | None = None) -> PodRecord:
        return PodRecord(
            meta=Meta(cluster=CLUSTER, name=name, namespace="default"),
            node_selector=selector,
            required_node_affinity=affinity,
        )

    free = pod("free", node=None, phase="Pending")
    in_x = constrained("in-x", {"pool": "x"})
    counted = constrained(
        "counted", {}, _affinity({"matchExpressions": [_expr("gpus", "Lt", "9")]})
    )
    assert pods_eligible_nodes([free], NODES) is None  # nothing said: every node
    assert pods_eligible_nodes([], NODES) is None
    assert pods_eligible_nodes([free, in_x], NODES) == ["a", "c"]
    assert pods_eligible_nodes([counted], NODES) == ["a", "b"]
    assert pods_eligible_nodes([in_x, counted], NODES) == ["a"]  # one node for all of them
