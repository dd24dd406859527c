"""`plan` and the simulator's scheduler decide alike: for random small clusters (nodes with
labels, node taints, 64 CPUs and up to four H200s) and random pods (GPU counts, CPU
requests, nodeSelectors, tolerations), each pod `plan` says is placeable lands on the node `plan` names when the
scheduler places the same pods in the same order, and each pod `plan` says would wait stays
Pending with the scheduler saying the same (`plan`'s device verdicts are its "cannot allocate
all claims", node-resources its "Insufficient", no-nodes its per-node reasons counted alike)
— one node filter, one allocator."""

from __future__ import annotations

from typing import Any

import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from dra_mirror.schema.reader import Scope, ScopedReader
from dra_mirror.service.model.normalize import normalize
from dra_mirror.service.questions.plan import plan_manifests
from dra_mirror.service.sim.scenario import build_world
from dra_mirror.service.sim.scenario_file import parse_scenario
from dra_mirror.service.sim.shapes import pod_object
from dra_mirror.service.stores.memory import MemoryStore
from dra_mirror.service.stores.protocols import ClusterStatus
from tests.feeding import feed
from tests.plan.conftest import PLURALS

CLUSTER = "prop"
TAINT = {"key": "dedicated", "value": "batch", "effect": "NoSchedule"}
TOLERATION = {"key": "dedicated", "operator": "Equal", "value": "batch", "effect": "NoSchedule"}

nodes_strategy = st.lists(
    st.fixed_dictionaries(
        {"zone": st.sampled_from(["a", "b"]), "gpus": st.integers(0, 4), "tainted": st.booleans()}
    ),
    min_size=1,
    max_size=3,
)
pods_strategy = st.lists(
    st.fixed_dictionaries(
        {
            "count": st.integers(1, 3),
            "zone": st.sampled_from([None, "a", "b"]),
            "tolerates": st.booleans(),
            "cpu": st.sampled_from([None, "8", "40"]),
        }
    ),
    min_size=1,
    max_size=4,
)


def _scenario(nodes: list[dict[str, Any]]) -> dict[str, Any]:
    templates = [
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": f"gpus-{count}", "namespace": "work"},
            "spec": {"spec": {"devices": {"requests": [
                {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": count}}
            ]}}},
        }
        for count in (1, 2, 3)
    ]  # fmt: skip
    return {
        "name": "property",
        "seed": 1,
        "clusters": [{
            "name": CLUSTER, "versions": ["v1"], "namespaces": ["work"],
            "deviceClasses": ["gpu.nvidia.com"],
            "nodes": [
                {"name": f"node-{i}", "labels": {"zone": n["zone"]},
                 "allocatable": {"cpu": "64", "memory": "512Gi", "pods": "110"},
                 "devices": [{"profile": "nvidia-h200", "count": n["gpus"], "mig": False}]
                 if n["gpus"] else []}
                for i, n in enumerate(nodes)
            ],
            "objects": templates,
        }],
    }  # fmt: skip


def _pod(i: int, spec: dict[str, Any]) -> dict[str, Any]:
    pod = pod_object(
        f"p{i}",
        "work",
        claims=[{"name": "gpu", "resourceClaimTemplateName": f"gpus-{spec['count']}"}],
        node_selector={"zone": spec["zone"]} if spec["zone"] else None,
    )
    if spec["tolerates"]:
        pod["spec"]["tolerations"] = [TOLERATION]
    if spec["cpu"]:
        pod["spec"]["containers"][0]["resources"]["requests"] = {"cpu": spec["cpu"]}
    return pod


async def _planned(store: Any, pods: list[dict[str, Any]]) -> list[tuple[str | None, str, str]]:
    mirror = MemoryStore()
    records = [
        normalize(kind, obj, cluster=CLUSTER) for plural, kind in PLURALS.items()
        for obj in store.list(plural)
    ]  # fmt: skip
    await feed(mirror, CLUSTER, upserts=records, at="2026-12-01T00:00:00Z")
    await mirror.set_status(ClusterStatus(name=CLUSTER, connected=True, synced=True))
    text = yaml.safe_dump_all(pods)
    answer = await plan_manifests(ScopedReader(mirror, Scope.everything()), text, cluster=CLUSTER)
    [cluster] = answer.clusters
    return [
        (item.node if item.verdict == "placeable" else None, item.verdict, item.message)
        for item in cluster.plan.items
    ]


# What the scheduler's "0/N nodes are available" says for each of plan's verdicts.
DEVICE_VERDICTS = {"all-held", "sharing-off", "tainted", "no-capacity", "not-enough",
                   "never-fits", "constraints", "no-devices", "no-match", "driver-missing",
                   "class-missing"}  # fmt: skip


def _agrees(verdict: str, message: str, logged: str) -> bool:
    if verdict in DEVICE_VERDICTS:
        return "cannot allocate all claims" in logged
    if verdict == "node-resources":
        return "Insufficient" in logged
    if verdict == "no-nodes":  # the same per-node reasons, counted alike
        return logged.split(". preemption")[0] in message
    return False


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(nodes=nodes_strategy, pods=pods_strategy)
@example(  # the second pod's CPU does not fit beside the first's
    nodes=[{"zone": "a", "gpus": 4, "tainted": False}],
    pods=[{"count": 1, "zone": None, "tolerates": False, "cpu": "40"}] * 2,
)
@example(  # the only GPUs are on a node the pod does not tolerate
    nodes=[{"zone": "a", "gpus": 0, "tainted": False}, {"zone": "a", "gpus": 2, "tainted": True}],
    pods=[{"count": 1, "zone": None, "tolerates": False, "cpu": None}],
)
@example(  # no node admits the pod: the same reasons, counted alike
    nodes=[{"zone": "a", "gpus": 2, "tainted": True}, {"zone": "b", "gpus": 2, "tainted": False}],
    pods=[{"count": 1, "zone": "a", "tolerates": False, "cpu": None}],
)
async def test_plan_places_where_the_scheduler_places(nodes: list[dict], pods: list[dict]) -> None:
    world = build_world(parse_scenario(_scenario(nodes)))
    store = world.stores[CLUSTER]
    for i, n in enumerate(nodes):
        if n["tainted"]:
            node = store.get("nodes", "", f"node-{i}")
            node["spec"]["taints"] = [TAINT]
            store.update("nodes", node)
    manifests = [_pod(i, spec) for i, spec in enumerate(pods)]
    planned = await _planned(store, manifests)
    scheduled, logged = [], []
    for pod in manifests:
        store.create("pods", pod)
        placed = store.get("pods", "work", pod["metadata"]["name"])
        scheduled.append(placed["spec"].get("nodeName"))
        conditions = placed["status"].get("conditions") or []
        logged.append(next((c.get("message", "") for c in conditions
                            if c["type"] == "PodScheduled" and c["status"] == "False"), ""))  # fmt: skip
    assert [node for node, _, _ in planned] == scheduled, (nodes, pods)
    for (node, verdict, message), said in zip(planned, logged, strict=True):
        if node is None:
            assert _agrees(verdict, message, said), (verdict, message, said)
