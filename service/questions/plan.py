"""`plan`: if these manifests were applied now, where would their claims be allocated — in
which cluster, on which nodes — or why would they wait, and behind whom?

`plan_manifests(reader, text, cluster=None)` answers from a state store (GraphQL's `plan`);
`plan(asker, text, cluster)` gives that answer as the graph's facts (Slack, the MCP tools, the
command line).

For every cluster the reader's scope names (or the one asked), the manifests are expanded as
kube-controller-manager would (`diagnostics.expansion`) and placed by the shared allocator over
that cluster's mirrored state (`diagnostics.planning`), with `lint`'s common mistakes beside
the answer. Nothing is written: what the plan's pods take lives in the ledger of one
synchronous call (`ledgers.ledger_of`), over what the model says is taken.

Scope, as the graph applies it: a cluster the asker's scope does not name is not planned; what
devices are free is the cluster's truth (a device held by a claim the asker may not see is
held, as `Device.status` says to anyone who sees the cluster), but such holders are counted,
never named; existing claims and templates a manifest refers to exist only when the asker may
see their namespace; lint's facts are the asker's.

Promises: reads through the `StateReader` methods (the whole cluster from `reader.store`, the
names shown through `reader.scope`); no `await` between a cluster's read and its plan;
text that is not YAML raises `ManifestError`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from dra_mirror.service.diagnostics.expansion import Expansion, expand
from dra_mirror.service.diagnostics.lint import ClusterFacts, Finding, lint_manifests
from dra_mirror.service.diagnostics.plan_results import ClusterPlan, PlanInputs
from dra_mirror.service.diagnostics.planning import plan_cluster
from dra_mirror.service.model.records import (
    RESOURCE_CLAIM_TEMPLATE,
    ObjectKey,
    PodRecord,
    TemplateRecord,
)
from dra_mirror.service.model.relations import Relation

from .asker import Asker
from .cluster_state import ClusterState, ScopedState, read_cluster
from .diagnosis import parse_manifests
from .facts import plan_facts
from .ledgers import ledger_of

__all__ = ["ClusterAnswer", "PlanAnswer", "plan", "plan_manifests"]


@dataclass
class ClusterAnswer:
    plan: ClusterPlan
    findings: list[Finding] = field(default_factory=list)


@dataclass
class PlanAnswer:
    clusters: list[ClusterAnswer]
    skipped: list[str]  # documents not planned, and why
    pods: int  # pods the manifests would create (per cluster)


async def plan_manifests(
    reader: ScopedState, text: str, *, cluster: str | None = None
) -> PlanAnswer:
    """The plan of YAML manifests in every cluster of the reader's scope (or in `cluster`)."""
    docs = parse_manifests(text)
    expansion = expand(docs)
    names = [s.name for s in await reader.clusters()]
    if cluster is not None:
        names = [n for n in names if n == cluster]
    answers = []
    for name in sorted(names):
        state = await read_cluster(reader.store, name)
        templates = await _templates(reader, name, expansion)
        answers.append(_answer(reader, state, expansion, docs, templates))
    return PlanAnswer(clusters=answers, skipped=expansion.skipped, pods=len(expansion.pods))


async def _templates(
    reader: ScopedState, cluster: str, expansion: Expansion
) -> dict[tuple[str, str], TemplateRecord]:
    """The cluster's templates the pods of the manifests name, as the asker may see them."""
    wanted = {
        (pod.namespace, claim.template)
        for pod in expansion.pods
        for claim in pod.claims
        if claim.template is not None and (pod.namespace, claim.template) not in expansion.templates
    }
    keys = [ObjectKey(cluster, RESOURCE_CLAIM_TEMPLATE, ns, name) for ns, name in sorted(wanted)]
    found = await reader.get(keys) if keys else []  # scoped: a hidden template reads as None
    return {(r.meta.namespace, r.meta.name): r for r in found if isinstance(r, TemplateRecord)}


def _answer(
    reader: ScopedState,
    state: ClusterState,
    expansion: Expansion,
    docs: list[Any],
    templates: dict[tuple[str, str], TemplateRecord],
) -> ClusterAnswer:
    cluster = state.cluster
    scope = reader.scope
    ledger = ledger_of(reader.store, state)
    index = reader.store.index(cluster)
    by_node: dict[str, list[PodRecord]] | None = None

    def pods_on(node: str) -> Sequence[PodRecord]:
        nonlocal by_node
        if index is not None:
            keys = index.lookup(Relation.NODE_PODS, (cluster, node))
            return [p for k in keys if isinstance(p := index.get(k), PodRecord)]
        if by_node is None:
            by_node = {}
            for pod in state.pods:
                if pod.node_name:
                    by_node.setdefault(pod.node_name, []).append(pod)
        return by_node.get(node, ())

    inputs = PlanInputs(
        cluster=cluster,
        classes=state.classes,
        devices=state.devices,
        ledger=ledger,
        claims=state.claims,
        nodes=state.nodes,
        pods_on=pods_on,
        pods=state.pods,
        templates=templates,
        visible=lambda namespace: scope.allows(cluster, namespace),
    )
    plan = plan_cluster(expansion, inputs)
    return ClusterAnswer(plan=plan, findings=lint_manifests(docs, _facts(state, docs, scope)))


def _facts(state: ClusterState, docs: list[Any], scope: Any) -> ClusterFacts:
    """The facts lint's manifest rules need, as the asker sees the cluster: its classes, and
    the claims (of namespaces the asker may see) named like those the manifests refer to.
    (Free devices per node are left out: the plan itself says which replica would wait.)"""
    named = set()
    for doc in docs:
        if not isinstance(doc, dict):
            continue
        spec = doc.get("spec") or {}
        for holder in (spec, (spec.get("template") or {}).get("spec") or {},
                       (((spec.get("jobTemplate") or {}).get("spec") or {}).get("template") or {}).get("spec") or {}):  # fmt: skip
            if isinstance(holder, dict):
                for entry in holder.get("resourceClaims") or []:
                    if isinstance(entry, dict) and entry.get("resourceClaimName"):
                        named.add(entry["resourceClaimName"])
    cluster = state.cluster
    claims = {
        (c.meta.namespace, c.meta.name)
        for c in state.claims.records
        if c.meta.name in named and scope.allows(cluster, c.meta.namespace)
    } if named else set()  # fmt: skip
    return ClusterFacts(classes=set(state.classes), claims=claims)


async def plan(asker: Asker, text: str, cluster: str | None = None) -> dict[str, Any]:
    """The plan of YAML manifests as the graph's facts (`facts.plan_facts`); an unknown
    cluster raises `UnknownCluster`."""
    if cluster is not None:
        await asker.check_cluster(cluster)
    return plan_facts(await plan_manifests(asker.reader, text, cluster=cluster))
