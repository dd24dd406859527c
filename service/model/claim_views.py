"""What pods say of a claim: the template it came from, and whether it serves extended resources.

A ResourceClaim does not carry either fact in a form the mirror can trust on its own; the pods
that use it do:

* template: a pod's `spec.resourceClaims[]` entry with `resourceClaimTemplateName`, resolved
  through `status.resourceClaimStatuses` to the generated claim's name, names the claim's
  template. When several pods name the same claim (not expected from Kubernetes) the smallest
  pod key wins, so the answer never depends on event order;
* extended resources: a pod's `status.extendedResourceClaimStatus.resourceClaimName` names the
  claim the scheduler made for the pod's extended-resource requests (DRAExtendedResource): that
  claim's origin is EXTENDED_RESOURCE, whatever its annotations say. A claim no pod names keeps
  the origin its own metadata gives it (`service.model.claims.claim_origin`).

`ClaimViews` keeps both per claim; the index stores each claim as `view(claim)` and, when a pod
changes either fact, re-emits the claims whose view changed. Pure: no I/O.
"""

from __future__ import annotations

from msgspec.structs import replace

from dra_mirror.service.model.claims import claim_origin
from dra_mirror.service.model.records import (
    EXTENDED_RESOURCE,
    RESOURCE_CLAIM,
    ClaimRecord,
    ObjectKey,
    PodRecord,
)


def _pod_templates(cluster: str, pod: PodRecord | None) -> dict[ObjectKey, str]:
    if pod is None:
        return {}
    ns = pod.meta.namespace
    return {
        ObjectKey(cluster, RESOURCE_CLAIM, ns, c.claim_name): c.template_name
        for c in pod.claims
        if c.claim_name and c.template_name
    }


def _extended(cluster: str, pod: PodRecord | None) -> ObjectKey | None:
    if pod is None or not pod.extended_claim_name:
        return None
    return ObjectKey(cluster, RESOURCE_CLAIM, pod.meta.namespace, pod.extended_claim_name)


class ClaimViews:
    def __init__(self, cluster: str) -> None:
        self._cluster = cluster
        # claim -> (pod, template) of the one pod naming it, or {pod: template} of several
        self._templates: dict[ObjectKey, tuple[ObjectKey, str] | dict[ObjectKey, str]] = {}
        self._extended: dict[ObjectKey, set[ObjectKey]] = {}  # claim -> pods naming it

    def template_of(self, claim: ObjectKey) -> str | None:
        found = self._templates.get(claim)
        if isinstance(found, tuple):
            return found[1]
        return found[min(found)] if found else None

    def origin_of(self, claim: ObjectKey, record: ClaimRecord) -> str:
        if claim in self._extended:
            return EXTENDED_RESOURCE
        # a record as normalized has its own origin; a view no pod backs any more recomputes it
        return record.origin if record.origin != EXTENDED_RESOURCE else claim_origin(record.meta)

    def view(self, key: ObjectKey, claim: ClaimRecord) -> ClaimRecord:
        """The claim as the index keeps it: with what pods say of it."""
        template, origin = self.template_of(key), self.origin_of(key, claim)
        if claim.template_name == template and claim.origin == origin:
            return claim
        return replace(claim, template_name=template, origin=origin)

    def on_pod(
        self, key: ObjectKey, old: PodRecord | None, new: PodRecord | None
    ) -> dict[ObjectKey, tuple[str | None, str | None]]:
        """Fold a pod's change; returns {claim: (template before, template after)} for every
        claim whose view may have changed (its template or its origin)."""
        changed: dict[ObjectKey, tuple[str | None, str | None]] = {}
        old_templates = _pod_templates(self._cluster, old)
        new_templates = _pod_templates(self._cluster, new)
        if old_templates != new_templates:
            for claim in old_templates.keys() | new_templates.keys():
                template = new_templates.get(claim)
                if old_templates.get(claim) == template:
                    continue
                if template is not None and claim not in self._templates:
                    self._templates[claim] = (key, template)  # the first pod to name it
                    changed[claim] = (None, template)
                    continue
                before = self.template_of(claim)
                self._set_template(claim, key, template)
                changed[claim] = (before, self.template_of(claim))
        old_extended, new_extended = _extended(self._cluster, old), _extended(self._cluster, new)
        if old_extended != new_extended:
            if old_extended is not None:
                pods = self._extended.get(old_extended, set())
                pods.discard(key)
                if not pods:
                    self._extended.pop(old_extended, None)
                changed.setdefault(old_extended, (self.template_of(old_extended),) * 2)
            if new_extended is not None:
                self._extended.setdefault(new_extended, set()).add(key)
                changed.setdefault(new_extended, (self.template_of(new_extended),) * 2)
        return changed

    def _set_template(self, claim: ObjectKey, pod: ObjectKey, template: str | None) -> None:
        found = self._templates.get(claim)
        by_pod = dict([found]) if isinstance(found, tuple) else found or {}
        if template is None:
            by_pod.pop(pod, None)
        else:
            by_pod[pod] = template
        if len(by_pod) > 1:
            self._templates[claim] = by_pod
        elif by_pod:
            self._templates[claim] = next(iter(by_pod.items()))
        else:
            self._templates.pop(claim, None)
