"""The simulator's scheduler and explainClaim agree on which nodes a pod may use: a pod lands
only on a node that its nodeSelector and required node affinity admit, by the same rules
`explainClaim` reports as the claim's eligible nodes."""

from __future__ import annotations

from typing import Any

import pytest

from dra_mirror.service.diagnostics.cluster import eligible_nodes
from dra_mirror.service.model.normalize import normalize
from dra_mirror.service.model.records import NODE, POD, NodeRecord, PodRecord
from dra_mirror.service.sim.scenario import World, build_world, load_scenario
from dra_mirror.service.sim.shapes import pod_object

HOSTNAME = "kubernetes.io/hostname"
PRODUCT = "nvidia.com/gpu.product"


def _term(*expressions: dict[str, Any], fields: tuple[dict[str, Any], ...] = ()) -> dict:
    term: dict[str, Any] = {}
    if expressions:
        term["matchExpressions"] = list(expressions)
    if fields:
        term["matchFields"] = list(fields)
    return term


AFFINITIES = {
    "hostname-not-in": [_term({"key": HOSTNAME, "operator": "NotIn", "values": ["east-a100-0"]})],
    "product-in": [_term({"key": PRODUCT, "operator": "In", "values": ["NVIDIA-H200"]})],
    "label-does-not-exist": [_term({"key": PRODUCT, "operator": "DoesNotExist"})],
    "label-exists-and-not-in": [
        _term(
            {"key": PRODUCT, "operator": "Exists"},
            {"key": HOSTNAME, "operator": "NotIn", "values": ["east-a100-0", "east-h200-0"]},
        )
    ],
    "match-fields": [
        _term(fields=({"key": "metadata.name", "operator": "In", "values": ["east-h200-1"]},))
    ],
    "terms-are-ored": [
        _term({"key": HOSTNAME, "operator": "In", "values": ["nowhere"]}),
        _term({"key": HOSTNAME, "operator": "In", "values": ["east-legacy-0"]}),
    ],
    "gt-on-a-label": [_term({"key": "rank", "operator": "Gt", "values": ["1"]})],
    "nothing-admitted": [_term({"key": HOSTNAME, "operator": "In", "values": ["nowhere"]})],
}


@pytest.fixture
def demo() -> World:
    return build_world(load_scenario("demo"))


def _records(world: World, pod: dict) -> tuple[PodRecord, list[NodeRecord]]:
    store = world.stores["east"]
    record = normalize(POD, pod, cluster="east")
    nodes = [normalize(NODE, n, cluster="east") for n in store.list("nodes")]
    assert isinstance(record, PodRecord)
    return record, [n for n in nodes if isinstance(n, NodeRecord)]


@pytest.mark.parametrize("name", sorted(AFFINITIES))
def test_a_pod_lands_only_where_explain_says_it_may(demo: World, name: str) -> None:
    east = demo.stores["east"]
    for rank, node in enumerate(sorted(east.list("nodes"), key=lambda n: n["metadata"]["name"])):
        node["metadata"]["labels"]["rank"] = str(rank)
        east.update("nodes", node)
    pod = pod_object(f"pinned-{name}", "default")
    pod["spec"]["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": AFFINITIES[name]
            }
        }
    }
    east.create("pods", pod)
    placed = east.get("pods", "default", f"pinned-{name}")
    assert placed is not None
    record, nodes = _records(demo, placed)
    allowed = eligible_nodes(record.node_selector, nodes, record.required_node_affinity)
    node = placed["spec"].get("nodeName")
    if allowed:
        assert node in allowed, f"placed on {node}; explainClaim admits only {allowed}"
    else:
        assert node is None and placed["status"]["phase"] == "Pending"
        (condition,) = [c for c in placed["status"]["conditions"] if c["type"] == "PodScheduled"]
        assert "didn't match Pod's node affinity/selector" in condition["message"]


def _drain_rule(device: str | None) -> dict:
    selector: dict[str, str] = {"driver": "gpu.nvidia.com", "pool": "east-a100-0"}
    if device:
        selector["device"] = device
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceTaintRule",
        "metadata": {"name": "drain-a100"},
        "spec": {
            "deviceSelector": selector,
            "taint": {"key": "example.com/drain", "value": "now", "effect": "NoSchedule"},
        },
    }


def test_the_scheduler_never_gives_a_gpu_a_device_taint_rule_taints(demo: World) -> None:
    east = demo.stores["east"]
    east.create("devicetaintrules", _drain_rule("gpu-1"))
    pod = pod_object(
        "notebook-2", "research", claims=[{"name": "gpu", "resourceClaimTemplateName": "a100"}]
    )
    east.create("pods", pod)
    placed = east.get("pods", "research", "notebook-2")
    assert placed is not None
    for status in placed["status"].get("resourceClaimStatuses") or []:
        claim = east.get("resourceclaims", "research", status["resourceClaimName"])
        results = claim["status"]["allocation"]["devices"]["results"]
        assert ("east-a100-0", "gpu-1") not in {(r["pool"], r["device"]) for r in results}


def test_a_pool_drained_by_a_rule_leaves_an_intolerant_pod_pending(demo: World) -> None:
    east = demo.stores["east"]
    east.create("devicetaintrules", _drain_rule(None))
    pod = pod_object(
        "notebook-2", "research", claims=[{"name": "gpu", "resourceClaimTemplateName": "a100"}]
    )
    east.create("pods", pod)
    placed = east.get("pods", "research", "notebook-2")
    assert placed is not None and placed["spec"].get("nodeName") is None
    east.delete("devicetaintrules", "", "drain-a100")
    placed = east.get("pods", "research", "notebook-2")
    assert placed is not None and placed["spec"].get("nodeName") == "east-a100-0"


def test_a_node_taint_keeps_an_intolerant_pod_off_the_node(demo: World) -> None:
    east = demo.stores["east"]
    node = east.get("nodes", "", "east-a100-0")
    node["spec"]["taints"] = [{"key": "dedicated", "value": "infra", "effect": "NoSchedule"}]
    east.update("nodes", node)
    pod = pod_object(
        "notebook-2", "research", claims=[{"name": "gpu", "resourceClaimTemplateName": "a100"}]
    )
    east.create("pods", pod)
    placed = east.get("pods", "research", "notebook-2")
    assert placed is not None and placed["spec"].get("nodeName") != "east-a100-0"
    record, nodes = _records(demo, placed)
    assert "east-a100-0" not in eligible_nodes(
        record.node_selector, nodes, record.required_node_affinity, tolerations=record.tolerations
    )
