"""`plan` over the demo's mirrored state: placed where free devices are (checked against the
simulator's raw objects), waiting with explainClaim's verdicts and holders, the asker's scope
kept, nothing written (the cluster's ledger is left as it was)."""

from __future__ import annotations

import pytest

from dra_mirror import schema
from dra_mirror.schema.context import make_context
from dra_mirror.schema.reader import Scope, ScopedReader
from dra_mirror.service.access.scope import AccessScope
from dra_mirror.service.cli.plan import render_plan
from dra_mirror.service.questions.plan import plan_manifests
from dra_mirror.service.questions.remote import PLAN as PLAN_DOCUMENT
from tests.plan.conftest import World

H200 = "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H200'"


def deployment(name: str, replicas: int, *, namespace: str = "training", template: str = "single-h200",
               selector: dict | None = None) -> str:  # fmt: skip
    node_selector = f"      nodeSelector: {selector}\n" if selector else ""
    return f"""apiVersion: apps/v1
kind: Deployment
metadata: {{name: {name}, namespace: {namespace}}}
spec:
  replicas: {replicas}
  template:
    spec:
{node_selector}      containers:
        - name: main
          image: pytorch
          resources: {{requests: {{cpu: "2", memory: 8Gi}}, claims: [{{name: gpu}}]}}
      resourceClaims: [{{name: gpu, resourceClaimTemplateName: {template}}}]
"""


def everything(world: World) -> ScopedReader:
    return ScopedReader(world.store, Scope.everything())


def _holds(world: World, cluster: str):
    """What the model says is taken in the cluster: every device's holds and status."""
    index = world.store.index(cluster)
    assert index is not None
    return [(e.key, index.holds(e.key), index.device_status(e.key)) for e in index.devices()]


async def test_replicas_take_free_devices_then_wait_behind_the_holders(demo: World) -> None:
    answer = await plan_manifests(everything(demo), deployment("trainer-b", 3), cluster="east")
    [east] = answer.clusters
    items = east.plan.items
    assert [i.verdict for i in items] == ["placeable", "placeable", "all-held"]
    taken = [(r.driver, r.pool, r.device) for i in items[:2] for c in i.claims for r in c.results]
    held = demo.held("east")
    assert len(set(taken)) == 2 and not set(taken) & held  # free now, one each
    h200_nodes = {
        n["metadata"]["name"] for n in demo.raw["east"]["nodes"] if "h200" in n["metadata"]["name"]
    }
    assert {pool for _, pool, _ in taken} <= h200_nodes and items[0].node in h200_nodes
    waiting = items[2]
    holders = {f"{h.claim.namespace}/{h.claim.name}": h for h in waiting.holders}
    assert holders["research/notebook-gpu"].idle  # allocated by hand, no pod: idle
    assert "(this plan)" in waiting.message  # the two replicas placed before it hold the rest
    assert [f"{k.namespace}/{k.name}" for k in waiting.freed_by] == ["research/notebook-gpu"]
    assert "research/notebook-gpu" in waiting.message


async def test_nothing_is_written(demo: World) -> None:
    reader = everything(demo)
    before = _holds(demo, "east")
    await plan_manifests(reader, deployment("trainer-b", 6), cluster="east")
    assert _holds(demo, "east") == before
    assert demo.store.index("east").count("ResourceClaim") == len(
        demo.raw["east"]["resourceclaims"]
    )


async def test_the_askers_scope_hides_holders_and_claims(demo: World) -> None:
    scope = AccessScope.parse(["east/training"])
    reader = ScopedReader(demo.store, scope)
    text = (
        deployment("trainer-b", 3)
        + "---\n"
        + """apiVersion: v1
kind: Pod
metadata: {name: nb, namespace: research}
spec:
  containers: [{name: c, image: x, resources: {claims: [{name: gpu}]}}]
  resourceClaims: [{name: gpu, resourceClaimName: notebook-gpu}]
"""
    )
    answer = await plan_manifests(reader, text)
    assert [c.plan.cluster for c in answer.clusters] == ["east"]  # west is not in the scope
    items = answer.clusters[0].plan.items
    assert [i.verdict for i in items] == ["placeable", "placeable", "all-held", "claim-missing"]
    waiting = items[2]
    assert waiting.holders_hidden > 0
    assert all(h.claim.namespace == "training" for h in waiting.holders)
    assert "research/" not in waiting.message and "inference/" not in waiting.message
    assert not waiting.freed_by and waiting.freed_hidden == 1  # notebook-gpu, not named
    assert all(k.namespace == "training" for v in waiting.requests for k in v.held_by)


async def test_shared_claims_selectors_and_missing_things(demo: World) -> None:
    text = f"""apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {{name: pair, namespace: training}}
spec:
  devices:
    requests: [{{name: gpu, exactly: {{deviceClassName: gpu.nvidia.com, selectors: [{{cel: {{expression: "{H200}"}}}}]}}}}]
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {{name: users, namespace: training}}
spec:
  replicas: 2
  template:
    spec:
      containers: [{{name: c, image: x, resources: {{claims: [{{name: gpu}}]}}}}]
      resourceClaims: [{{name: gpu, resourceClaimName: pair}}]
---
apiVersion: v1
kind: Pod
metadata: {{name: nowhere, namespace: training}}
spec:
  nodeSelector: {{kubernetes.io/hostname: no-such-node}}
  containers: [{{name: c, image: x, resources: {{claims: [{{name: gpu}}]}}}}]
  resourceClaims: [{{name: gpu, resourceClaimTemplateName: single-h200}}]
---
apiVersion: v1
kind: Pod
metadata: {{name: pinned, namespace: training}}
spec:
  nodeName: east-h200-0
  containers: [{{name: c, image: x, resources: {{claims: [{{name: gpu}}]}}}}]
  resourceClaims: [{{name: gpu, resourceClaimTemplateName: single-h200}}]
---
apiVersion: v1
kind: Pod
metadata: {{name: typo, namespace: training}}
spec:
  containers: [{{name: c, image: x, resources: {{claims: [{{name: gpu}}]}}}}]
  resourceClaims: [{{name: gpu, resourceClaimTemplateName: no-such-template}}]
"""
    [east] = (await plan_manifests(everything(demo), text, cluster="east")).clusters
    users = [i for i in east.plan.items if i.workload.startswith("StatefulSet")]
    assert [i.verdict for i in users] == ["placeable", "placeable"]
    first, second = (i.claims[0] for i in users)
    assert first.results == second.results and not first.allocated_before
    assert users[0].node == users[1].node  # one claim, one node
    verdicts = {
        i.name: i.verdict
        for i in east.plan.items
        if i.kind == "Pod" and i.name in ("nowhere", "pinned", "typo")
    }
    assert verdicts == {
        "nowhere": "no-nodes",
        "pinned": "node-name-pinned",
        "typo": "template-missing",
    }
    assert {f.rule for f in east.findings} >= {"node-name-pinned"}


async def test_through_the_graph(demo: World) -> None:
    graph = schema.build_schema()
    context = make_context(demo.store)
    result = await graph.execute(PLAN_DOCUMENT, variable_values={"manifests": deployment("t", 1)},
                                 context_value=context)  # fmt: skip
    assert result.errors is None, result.errors
    clusters = {c["cluster"]: c for c in result.data["plan"]["clusters"]}
    assert clusters["east"]["placeable"] and clusters["east"]["summary"] == "1 of 1 placeable"
    assert clusters["west"]["items"][0]["verdict"] == "TEMPLATE_MISSING"
    [claim] = clusters["east"]["items"][0]["claims"]
    assert claim["name"] == "t-??????????-?????-gpu-?????" and claim["devices"]
    bad = await graph.execute(PLAN_DOCUMENT, variable_values={"manifests": "a: [b"},
                              context_value=context)  # fmt: skip
    assert bad.errors and bad.errors[0].extensions["code"] == "BAD_YAML"


@pytest.mark.parametrize("replicas", [0, 2])
async def test_counts(demo: World, replicas: int) -> None:
    answer = await plan_manifests(everything(demo), deployment("x", replicas), cluster="east")
    assert answer.pods == replicas and len(answer.clusters[0].plan.items) == replicas


async def test_the_command_lines_text_says_which_holders_are_this_plans(demo: World) -> None:
    graph = schema.build_schema()
    result = await graph.execute(
        PLAN_DOCUMENT, variable_values={"manifests": deployment("t", 3), "cluster": "east"},
        context_value=make_context(demo.store),
    )  # fmt: skip
    assert result.errors is None, result.errors
    held = [line.strip() for line in render_plan(result.data["plan"]).splitlines()
            if line.strip().startswith("held by")]  # fmt: skip
    ours = [line for line in held if "(replica " in line]
    assert len(ours) == 2 and all(
        line.endswith("this plan  (an earlier pod of these manifests)") for line in ours
    )
    assert "held by research/notebook-gpu  idle  (no pod)" in held


async def test_what_the_api_server_would_refuse_is_never_placeable(demo: World) -> None:
    text = """apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: flat, namespace: training}
spec:
  spec:
    devices:
      requests: [{name: gpu, deviceClassName: gpu.nvidia.com}]
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: broken-cel, namespace: training}
spec:
  devices:
    requests: [{name: gpu, exactly: {deviceClassName: gpu.nvidia.com, selectors: [{cel: {expression: "device.driver =="}}]}}]
---
apiVersion: v1
kind: Pod
metadata: {name: uses-broken, namespace: training}
spec:
  containers: [{name: c, image: x, resources: {claims: [{name: gpu}]}}]
  resourceClaims: [{name: gpu, resourceClaimName: broken-cel}]
---
""" + deployment("flat-users", 1, template="flat")
    [east] = (await plan_manifests(everything(demo), text, cluster="east")).clusters
    verdicts = {
        i.name if i.kind == "Pod" else i.workload: (i.verdict, i.message) for i in east.plan.items
    }
    verdict, message = verdicts["uses-broken"]
    assert verdict == "invalid" and "the API server would refuse it" in message
    assert "compilation failed" in message
    [(verdict, message)] = [v for k, v in verdicts.items() if k.startswith("flat-users")]
    assert verdict == "invalid"
    assert message.startswith("resourceclaimtemplate training/flat: the API server would refuse it")
    assert {f.rule for f in east.findings} >= {"api-invalid", "cel-invalid"}
