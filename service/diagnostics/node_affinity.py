"""Which nodes a pod may use: its nodeSelector and its required node affinity, as
kube-scheduler's NodeAffinity filter reads them. The simulator's scheduler and `explainClaim`
both ask this module, so the simulator never places a pod where `explainClaim` says it cannot
go.

Rules (k8s.io/component-helpers/scheduling/corev1/nodeaffinity):

* `spec.nodeSelector`: every label pair must be on the node.
* `spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution`
  (`{"nodeSelectorTerms": [...]}`): the terms are ORed; within a term every `matchExpressions`
  requirement (on node labels) and every `matchFields` requirement (on `metadata.name`, the
  only field Kubernetes supports) must hold. An empty term, or no terms at all, admits no node
  (`MatchNodeSelectorTerms`).
* Operators: `In`, `NotIn` (also holds when the label is absent), `Exists`, `DoesNotExist`,
  `Gt` and `Lt` (one value, both sides integers). A malformed requirement — an unknown
  operator, `Gt`/`Lt` without one integer — holds for no node, as the scheduler treats a
  selector it cannot parse.

Preferred affinity is not weighed; nodeName, cordons and taints are `node_filter`'s, which
asks this module for the rest.

Promises: pure functions over plain mappings (raw API JSON or record fields), no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["admits", "required_affinity_of"]


def required_affinity_of(pod_spec: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """A raw pod spec's required node affinity (`{"nodeSelectorTerms": [...]}`), if any."""
    affinity = pod_spec.get("affinity")
    node_affinity = affinity.get("nodeAffinity") if isinstance(affinity, Mapping) else None
    if not isinstance(node_affinity, Mapping):
        return None
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    return required if isinstance(required, Mapping) else None


def admits(
    *,
    name: str,
    labels: Mapping[str, str],
    node_selector: Mapping[str, str],
    required_affinity: Mapping[str, Any] | None = None,
) -> bool:
    """Whether the node `name` with `labels` satisfies a pod's nodeSelector (every pair) and
    its required node affinity (None: the pod has none)."""
    if any(labels.get(k) != v for k, v in node_selector.items()):
        return False
    if required_affinity is None:
        return True
    terms = required_affinity.get("nodeSelectorTerms") or ()
    return any(_term_admits(term, name, labels) for term in terms if isinstance(term, Mapping))


def _term_admits(term: Mapping[str, Any], name: str, labels: Mapping[str, str]) -> bool:
    expressions = term.get("matchExpressions") or ()
    fields = term.get("matchFields") or ()
    if not expressions and not fields:
        return False
    fields_of = {"metadata.name": name}
    return all(
        isinstance(e, Mapping) and _requirement_holds(e, labels) for e in expressions
    ) and all(isinstance(f, Mapping) and _requirement_holds(f, fields_of) for f in fields)


def _requirement_holds(requirement: Mapping[str, Any], values_of: Mapping[str, str]) -> bool:
    """One NodeSelectorRequirement against a node's labels (or fields)."""
    key, operator = requirement.get("key"), requirement.get("operator")
    values = [str(v) for v in requirement.get("values") or ()]
    value = values_of.get(key) if isinstance(key, str) else None
    if operator == "In":
        return value is not None and value in values
    if operator == "NotIn":
        return value is None or value not in values
    if operator == "Exists":
        return value is not None
    if operator == "DoesNotExist":
        return value is None
    if operator in ("Gt", "Lt") and len(values) == 1 and value is not None:
        try:
            have, bound = int(value), int(values[0])
        except ValueError:
            return False
        return have > bound if operator == "Gt" else have < bound
    return False
