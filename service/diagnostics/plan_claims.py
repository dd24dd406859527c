"""The objects a plan reads from the manifests or the cluster: pods, claims and templates.

`PlanObjects(inputs)` turns what `expansion.expand` produced into records the planner places:
a pod's record from its spec, the manifests' own claims (status dropped: applying never writes
it), and for each claim entry of a pod the claim it resolves to — a claim of the manifests,
one the plan already allocated, an existing claim of the cluster (only in a namespace the
asker may see), or a new claim from a template (of the manifests first, then of the cluster)
— or the verdict and message of why it cannot be had.

Promises: pure; reads `PlanInputs` only; nothing is written.
"""

from __future__ import annotations

from collections.abc import Mapping

from dra_mirror.service.diagnostics.api_validation import Problem, problems
from dra_mirror.service.diagnostics.expansion import Expansion, PlannedClaim, PlannedPod
from dra_mirror.service.diagnostics.plan_results import (
    CLAIM_DELETING,
    CLAIM_MISSING,
    INVALID,
    TEMPLATE_MISSING,
    PlanInputs,
)
from dra_mirror.service.model.normalize import MalformedObject, normalize
from dra_mirror.service.model.records import (
    POD,
    RESOURCE_CLAIM,
    RESOURCE_CLAIM_TEMPLATE,
    TEMPLATE,
    ClaimRecord,
    Meta,
    ObjectKey,
    PodRecord,
    TemplateRecord,
)

_REPLICATED = ("Deployment", "ReplicaSet", "Job", "CronJob")


class PlanObjects:
    def __init__(self, inputs: PlanInputs) -> None:
        self.inputs = inputs

    def manifest_claims(self, expansion: Expansion) -> dict[tuple[str, str], ClaimRecord | str]:
        found: dict[tuple[str, str], ClaimRecord | str] = {}
        for (namespace, name), raw in expansion.claims.items():
            body = {k: v for k, v in raw.items() if k != "status"}  # apply never writes status
            refused = problems({"kind": "ResourceClaim", **body})
            if refused:
                found[(namespace, name)] = refusal(refused)
                continue
            meta = {**(body.get("metadata") or {}), "namespace": namespace}
            try:
                found[(namespace, name)] = normalize(
                    RESOURCE_CLAIM, {**body, "metadata": meta}, cluster=self.inputs.cluster
                )
            except MalformedObject as error:
                found[(namespace, name)] = f"cannot be read: {error.reason}"
        return found

    def pod_record(self, pod: PlannedPod) -> PodRecord | str:
        raw = {"metadata": {"name": pod.name, "namespace": pod.namespace}, "spec": pod.spec}
        try:
            return normalize(POD, raw, cluster=self.inputs.cluster)
        except MalformedObject as error:
            return error.reason

    def claim(
        self,
        planned_claims: Mapping[tuple[str, str], ClaimRecord],
        pod: PlannedPod,
        planned: PlannedClaim,
        manifest_claims: Mapping[tuple[str, str], ClaimRecord | str],
        expansion: Expansion,
    ) -> ClaimRecord | tuple[str, str]:
        """The claim record a pod's entry resolves to, or (verdict, message)."""
        cluster, namespace = self.inputs.cluster, pod.namespace
        if planned.template is None:
            key = (namespace, planned.name)
            if key in planned_claims:
                return planned_claims[key]
            manifest = manifest_claims.get(key)
            if isinstance(manifest, str):
                return INVALID, f"claim {planned.name}: {manifest}"
            if manifest is not None:
                return manifest
            existing = self.inputs.claims.get(
                ObjectKey(cluster, RESOURCE_CLAIM, namespace, planned.name)
            )
            if existing is None or not self.inputs.visible(namespace):
                return CLAIM_MISSING, (
                    f"resourceclaim {namespace}/{planned.name} not found: the pod would wait "
                    "until it exists"
                )
            if existing.meta.deleted_at is not None:
                return CLAIM_DELETING, f"resourceclaim {namespace}/{planned.name} is being deleted"
            return existing
        raw = expansion.templates.get((namespace, planned.template))
        refused = problems({"kind": "ResourceClaimTemplate", **raw}) if raw is not None else []
        if refused:
            return INVALID, f"resourceclaimtemplate {namespace}/{planned.template}: " + refusal(
                refused
            )
        template = self.template(namespace, planned.template, expansion)
        if isinstance(template, str):
            return TEMPLATE_MISSING, template
        # Every replica's claim has the same name until Kubernetes picks its random part:
        # the record is told apart by the replica (this is the name its holds go by).
        name = (
            planned.name
            if pod.kind not in _REPLICATED
            else f"{planned.name} (replica {pod.replica})"
        )
        return ClaimRecord(
            meta=Meta(cluster=cluster, name=name, namespace=namespace),
            requests=template.requests,
            constraints=template.constraints,
            config=template.config,
            origin=TEMPLATE,
            template_name=planned.template,
        )

    def template(self, namespace: str, name: str, expansion: Expansion) -> TemplateRecord | str:
        raw = expansion.templates.get((namespace, name))
        if raw is not None:
            meta = {**(raw.get("metadata") or {}), "namespace": namespace}
            try:
                return normalize(
                    RESOURCE_CLAIM_TEMPLATE, {**raw, "metadata": meta}, cluster=self.inputs.cluster
                )
            except MalformedObject as error:
                return f"resourceclaimtemplate {namespace}/{name} cannot be read: {error.reason}"
        found = self.inputs.templates.get((namespace, name))
        if found is None:
            return (
                f"resourceclaimtemplate {namespace}/{name} not found in the manifests or the "
                "cluster: the pod would wait until it exists"
            )
        return found


def refusal(found: list[Problem]) -> str:
    """What the API server would say, in one line (the first three problems)."""
    said = "; ".join(f"{p.path}: {p.message}" if p.path else p.message for p in found[:3])
    more = f" (and {len(found) - 3} more)" if len(found) > 3 else ""
    return f"the API server would refuse it: {said}{more}"
