"""Pods and Nodes (core v1): wire Structs to records.

Rules (dra-api.md §9):

* a pod's claim name is resolved as `resourceclaim.Name()` does: `resourceClaimName` if set;
  for `resourceClaimTemplateName`, the generated name in `status.resourceClaimStatuses`
  (absent: not created yet; null: not needed). The tombstoned `source` wrapper (<= 1.30) is
  read too;
* containers AND init containers are kept with their requests/limits (to spot the old
  `nvidia.com/gpu` device-plugin way) and the claims they use;
* `reason` is status.reason, else the reason of a false PodScheduled condition
  (`Unschedulable`), which is what says why a pod waits;
* a pod's `nodeSelector` and required node affinity
  (`affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution`, kept raw) say which
  nodes it may run on; the diagnostics read them when it waits;
* a node is `ready` when its Ready condition is "True"; heartbeat times are dropped (they
  change every few seconds and mean nothing to the mirror).
"""

from __future__ import annotations

from dra_mirror.service.model import api
from dra_mirror.service.model.metadata import object_meta, quantities
from dra_mirror.service.model.records import (
    NODE,
    POD,
    Container,
    ContainerClaim,
    NodeRecord,
    PodClaim,
    PodRecord,
)


def _containers(containers: list[api.Container] | None, *, init: bool) -> list[Container]:
    out = []
    for c in containers or ():
        resources = c.resources or api.ResourceRequirements()
        out.append(
            Container(
                name=c.name,
                init=init,
                requests=quantities(resources.requests),
                limits=quantities(resources.limits),
                claims=tuple(
                    ContainerClaim(container=c.name, claim=ref.name, request=ref.request or None)
                    for ref in resources.claims or ()
                ),
            )
        )
    return out


def pod_record(wire: api.Pod, *, cluster: str) -> PodRecord:
    meta = object_meta(POD, wire.metadata, cluster=cluster)
    spec = wire.spec or api.PodSpec()
    status = wire.status or api.PodStatus()
    containers = _containers(spec.init_containers, init=True) + _containers(
        spec.containers, init=False
    )
    generated = {s.name: s.resource_claim_name for s in status.resource_claim_statuses or ()}
    claims = []
    for entry in spec.resource_claims or ():
        claim_name = entry.resource_claim_name
        template_name = entry.resource_claim_template_name
        if entry.source is not None:  # the <= 1.30 shape
            claim_name = claim_name or entry.source.resource_claim_name
            template_name = template_name or entry.source.resource_claim_template_name
        if not claim_name and template_name:
            claim_name = generated.get(entry.name)
        claims.append(
            PodClaim(
                name=entry.name,
                claim_name=claim_name or None,
                template_name=template_name or None,
                containers=tuple(
                    c.name for c in containers if any(cc.claim == entry.name for cc in c.claims)
                ),
            )
        )
    reason = status.reason
    if not reason:
        for condition in status.conditions or ():
            if condition.type == "PodScheduled" and condition.status == "False":
                reason = condition.reason
    extended = status.extended_resource_claim_status
    node_affinity = spec.affinity.node_affinity if spec.affinity else None
    required = (
        node_affinity.required_during_scheduling_ignored_during_execution if node_affinity else None
    )
    return PodRecord(
        meta=meta,
        phase=status.phase or "Pending",
        node_name=spec.node_name or None,
        claims=tuple(claims),
        containers=tuple(containers),
        extended_claim_name=(extended.resource_claim_name or None) if extended else None,
        started_at=status.start_time,
        reason=reason or None,
        node_selector={str(k): str(v) for k, v in (spec.node_selector or {}).items()},
        required_node_affinity=required,
    )


def node_record(wire: api.Node, *, cluster: str) -> NodeRecord:
    meta = object_meta(NODE, wire.metadata, cluster=cluster)
    status = wire.status or api.NodeStatus()
    conditions = []
    ready = False
    for c in status.conditions or ():
        if c.type == "Ready":
            ready = c.status == "True"
        condition = {"type": c.type, "status": c.status}
        if c.reason:
            condition["reason"] = c.reason
        if c.message:
            condition["message"] = c.message
        if c.last_transition_time:
            condition["lastTransitionTime"] = c.last_transition_time
        conditions.append(condition)
    return NodeRecord(
        meta=meta,
        capacity=quantities(status.capacity),
        allocatable=quantities(status.allocatable),
        ready=ready,
        unschedulable=bool(wire.spec.unschedulable) if wire.spec else False,
        conditions=tuple(conditions),
    )
