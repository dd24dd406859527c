"""Which nodes a pod may run on: the one node filter of the allocator's callers (`plan`,
`explainClaim`, `findDevices`, the alerts) and of the simulator's scheduler.

kube-scheduler's filters that depend on the pod and the node alone, in the order it reports
them, each with the phrase its "0/N nodes are available" message uses:

* NodeName: `spec.nodeName`, when set, names the only node ("didn't match the requested node
  name");
* NodeAffinity: `spec.nodeSelector` and the required node affinity
  (`service.diagnostics.node_affinity`; "didn't match Pod's node affinity/selector");
* NodeUnschedulable: a cordoned node (`spec.unschedulable`) admits only pods tolerating
  `node.kubernetes.io/unschedulable:NoSchedule` ("were unschedulable");
* TaintToleration: every NoSchedule and NoExecute taint of the node must be tolerated by the
  pod's `spec.tolerations` (PreferNoSchedule never filters; "had untolerated taint {k: v}").
  A node whose Ready condition is not True carries `node.kubernetes.io/not-ready`
  (the node lifecycle controller's taint) even when the object read does not show it yet.

A toleration matches a taint as the API says (`service.model.taint_rules.tolerated`, the same
rule DeviceTolerations follow): an empty key with `Exists` tolerates everything, an empty effect
every effect, `Exists` any value, `Equal` (the default) the same value.

Pods and nodes come as raw API JSON (the simulator, manifests) or as records (the mirror);
`PodTerms` and `NodeFacts` hold what the filter reads from either.

Promises: pure; one answer for a pod and a node whichever shape they come in.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dra_mirror.service.diagnostics.node_affinity import admits, required_affinity_of
from dra_mirror.service.model.records import NodeRecord, PodRecord
from dra_mirror.service.model.taint_rules import tolerated

__all__ = [
    "NodeFacts",
    "PodTerms",
    "eligible",
    "misfit",
    "pods_eligible",
    "rejections",
]

UNSCHEDULABLE_TAINT = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}
NOT_READY_TAINT = {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}
_FILTERED_EFFECTS = ("NoSchedule", "NoExecute")

NODE_NAME = "node(s) didn't match the requested node name"
AFFINITY = "node(s) didn't match Pod's node affinity/selector"
UNSCHEDULABLE = "node(s) were unschedulable"


@dataclass(frozen=True)
class PodTerms:
    """What a pod says about the nodes it may use."""

    node_name: str | None = None
    node_selector: Mapping[str, str] = field(default_factory=dict)
    required_affinity: Mapping[str, Any] | None = None
    tolerations: tuple[Mapping[str, Any], ...] = ()

    @classmethod
    def of_spec(cls, spec: Mapping[str, Any]) -> PodTerms:
        """From a raw pod spec (API JSON, a manifest's pod template)."""
        selector = spec.get("nodeSelector")
        tolerations = spec.get("tolerations")
        return cls(
            node_name=spec.get("nodeName") or None,
            node_selector={str(k): str(v) for k, v in selector.items()}
            if isinstance(selector, Mapping)
            else {},
            required_affinity=required_affinity_of(spec),
            tolerations=tuple(t for t in tolerations if isinstance(t, Mapping))
            if isinstance(tolerations, list)
            else (),
        )

    @classmethod
    def of_record(cls, pod: PodRecord) -> PodTerms:
        """From a pod record. A pod bound already is on its node: that is its nodeName."""
        return cls(
            node_name=pod.node_name,
            node_selector=pod.node_selector,
            required_affinity=pod.required_node_affinity,
            tolerations=pod.tolerations,
        )

    @property
    def constrained(self) -> bool:
        """Whether the pod says anything that can rule a node out (besides taints)."""
        return bool(self.node_name or self.node_selector or self.required_affinity is not None)

    def describe(self) -> str:
        """The constraints in words ("" when there are none), for diagnoses."""
        parts = []
        if self.node_name:
            parts.append(f"nodeName {self.node_name}")
        if self.node_selector:
            pairs = ", ".join(f"{k}={v}" for k, v in sorted(self.node_selector.items()))
            parts.append(f"nodeSelector {pairs}")
        if self.required_affinity is not None:
            parts.append("a required node affinity")
        if self.tolerations:
            parts.append(f"{len(self.tolerations)} toleration(s)")
        return ", ".join(parts)


@dataclass(frozen=True)
class NodeFacts:
    """What the filter reads of a node."""

    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Mapping[str, Any], ...] = ()
    unschedulable: bool = False
    ready: bool = True

    @classmethod
    def of_raw(cls, node: Mapping[str, Any]) -> NodeFacts:
        meta = node.get("metadata") or {}
        spec = node.get("spec") or {}
        conditions = (node.get("status") or {}).get("conditions") or []
        ready = [c for c in conditions if isinstance(c, Mapping) and c.get("type") == "Ready"]
        return cls(
            name=meta.get("name", ""),
            labels=meta.get("labels") or {},
            taints=tuple(t for t in spec.get("taints") or () if isinstance(t, Mapping)),
            unschedulable=bool(spec.get("unschedulable")),
            # No Ready condition yet (a node object written by hand): not tainted for it.
            ready=not ready or ready[0].get("status") == "True",
        )

    @classmethod
    def of_record(cls, node: NodeRecord) -> NodeFacts:
        ready_known = any(c.get("type") == "Ready" for c in node.conditions)
        return cls(
            name=node.meta.name,
            labels=node.meta.labels,
            taints=node.taints,
            unschedulable=node.unschedulable,
            ready=node.ready or not ready_known,
        )

    def filtering_taints(self) -> list[Mapping[str, Any]]:
        """The NoSchedule/NoExecute taints a pod must tolerate, the not-ready one included."""
        taints = [t for t in self.taints if t.get("effect") in _FILTERED_EFFECTS]
        if not self.ready and not any(t.get("key") == NOT_READY_TAINT["key"] for t in taints):
            taints.append(NOT_READY_TAINT)
        return taints


def misfit(pod: PodTerms, node: NodeFacts) -> str | None:
    """Why kube-scheduler's node filters reject the node for the pod (its message's phrase),
    or None when the node passes them."""
    if pod.node_name and pod.node_name != node.name:
        return NODE_NAME
    if not admits(
        name=node.name,
        labels=node.labels,
        node_selector=pod.node_selector,
        required_affinity=pod.required_affinity,
    ):
        return AFFINITY
    if node.unschedulable and not tolerated(UNSCHEDULABLE_TAINT, pod.tolerations):
        return UNSCHEDULABLE
    for taint in node.filtering_taints():
        if not tolerated(taint, pod.tolerations):
            return f"node(s) had untolerated taint {{{taint.get('key')}: {taint.get('value', '')}}}"
    return None


def rejections(pod: PodTerms, nodes: Sequence[NodeFacts]) -> str:
    """kube-scheduler's summary when the filters leave no node: "0/3 nodes are available: 1
    node(s) didn't match Pod's node affinity/selector, 2 node(s) had untolerated taint {k: v}"
    (reasons counted per node, in the order it prints them)."""
    if not nodes:
        return "no nodes available to schedule pods"
    reasons: dict[str, int] = {}
    for node in nodes:
        why = misfit(pod, node)
        if why is not None:
            reasons[why] = reasons.get(why, 0) + 1
    detail = ", ".join(f"{n} {why}" for why, n in sorted(reasons.items()))
    return f"0/{len(nodes)} nodes are available: {detail}"


def eligible(pod: PodTerms, nodes: Iterable[NodeFacts]) -> list[str]:
    """The names of the nodes the pod may run on, sorted."""
    return sorted(n.name for n in nodes if misfit(pod, n) is None)


def pods_eligible(pods: Iterable[PodTerms], nodes: Sequence[NodeFacts]) -> list[str]:
    """The nodes every one of `pods` may run on (a claim shared by several pods is allocated
    on one node they all reach), sorted."""
    found: set[str] | None = None
    for pod in pods:
        names = set(eligible(pod, nodes))
        found = names if found is None else found & names
    return sorted(found if found is not None else (n.name for n in nodes))
