"""Pods and Nodes (core v1): wire Structs to records.

Rules (core/v1 Pod `spec.resourceClaims`, `status.resourceClaimStatuses`; Node):

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
* `pod_group` is spec.schedulingGroup.podGroupName [1.36+]: a claim reserved for that PodGroup
  is consumed by the group's pods;
* `extended_claim_name` and `extended_requests` come from status.extendedResourceClaimStatus
  (the claim the scheduler made for extended-resource requests, and which request serves which
  container's resource) — the pod says so, nothing is guessed from names;
* `device_health` is each container's allocatedResourcesStatus for DRA resources (names
  "claim:<claim>[/<request>]", the claim being the pod-local name or, for extended resources,
  the claim's own name; resourceID "<driver>/<pool>/<device>", the first part the driver and
  the last the device, as pool names may hold '/'); entries naming anything else (device
  plugin resources) are not DRA's and are left out;
* a node is `ready` when its Ready condition is "True"; heartbeat times are dropped (they
  change every few seconds and mean nothing to the mirror).
"""

from __future__ import annotations

from sys import intern

from dra_mirror.service.model import api_core as api
from dra_mirror.service.model.records import (
    Container,
    ContainerClaim,
    DeviceHealth,
    ExtendedRequest,
    Meta,
    NodeRecord,
    PodClaim,
    PodRecord,
)
from dra_mirror.service.model.sharing import SharedValues

_CLAIM_PREFIX = "claim:"


def _containers(
    containers: list[api.Container], shared: SharedValues, *, init: bool
) -> list[Container]:
    out = []
    for c in containers:
        name = intern(c.name)
        resources = c.resources
        if resources is None:
            out.append(Container(name, init, shared.empty, shared.empty))
            continue
        references = resources.claims
        out.append(
            Container(
                name,
                init,
                shared.quantities(resources.requests),
                shared.quantities(resources.limits),
                tuple(
                    ContainerClaim(
                        container=name,
                        claim=intern(ref.name),
                        request=intern(ref.request) if ref.request else None,
                    )
                    for ref in references
                )
                if references
                else (),
            )
        )
    return out


def _app_containers(containers: list[api.Container], shared: SharedValues) -> tuple[Container, ...]:
    return tuple(_containers(containers, shared, init=False))


def _typed(_containers: list[api.Container]) -> bool:
    """Containers hold no untyped JSON: equal ones convert alike."""
    return True


def _optional(value: str | None) -> str | None:
    return intern(value) if value else None


def _device_health(
    status: api.PodStatus, claims: list[PodClaim], extended: str | None
) -> tuple[DeviceHealth, ...]:
    statuses = [*(status.init_container_statuses or ()), *(status.container_statuses or ())]
    if not any(c.allocated_resources_status for c in statuses):
        return ()
    by_pod_name = {c.name: c.claim_name for c in claims}
    found = []
    for container in statuses:
        for entry in container.allocated_resources_status or ():
            if not entry.name.startswith(_CLAIM_PREFIX):
                continue  # a device plugin's resource
            claim, _, request = entry.name[len(_CLAIM_PREFIX) :].partition("/")
            resolved = by_pod_name.get(claim) or (claim if claim == extended else None)
            for health in entry.resources or ():
                parts = health.resource_id.split("/")
                if len(parts) < 3:
                    continue  # not a DRA resource id
                found.append(
                    DeviceHealth(
                        container=intern(container.name),
                        resource=intern(entry.name),
                        claim_name=_optional(resolved),
                        request=_optional(request),
                        driver=intern(parts[0]),
                        pool=intern("/".join(parts[1:-1])),
                        device=intern(parts[-1]),
                        health=intern(health.health or "Unknown"),
                        message=health.message or None,
                    )
                )
    return tuple(found)


def pod_record(wire: api.Pod, meta: Meta, shared: SharedValues) -> PodRecord:
    spec = wire.spec or api.PodSpec()
    status = wire.status or api.PodStatus()
    containers: tuple[Container, ...] = ()
    if spec.init_containers:
        containers = tuple(
            _containers(spec.init_containers, shared, init=True)
            + _containers(spec.containers or [], shared, init=False)
        )
    elif spec.containers:
        # The pods of one workload have equal containers: converted once, shared.
        containers = shared.converted(spec.containers, _app_containers, _typed)
    claims = []
    if spec.resource_claims:
        generated = {s.name: s.resource_claim_name for s in status.resource_claim_statuses or ()}
        for entry in spec.resource_claims:
            claim_name = entry.resource_claim_name
            template_name = entry.resource_claim_template_name
            if entry.source is not None:  # the <= 1.30 shape
                claim_name = claim_name or entry.source.resource_claim_name
                template_name = template_name or entry.source.resource_claim_template_name
            if not claim_name and template_name:
                claim_name = generated.get(entry.name)
            claims.append(
                PodClaim(
                    name=intern(entry.name),
                    claim_name=_optional(claim_name),
                    template_name=_optional(template_name),
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
    extended_name = _optional(extended.resource_claim_name) if extended else None
    group = spec.scheduling_group.pod_group_name if spec.scheduling_group else None
    return PodRecord(
        meta=meta,
        phase=intern(status.phase) if status.phase else "Pending",
        node_name=_optional(spec.node_name),
        claims=tuple(claims),
        containers=containers,
        extended_claim_name=extended_name,
        started_at=status.start_time,
        reason=_optional(reason),
        node_selector=shared.strings(spec.node_selector),
        required_node_affinity=required,
        pod_group=_optional(group),
        extended_requests=tuple(
            ExtendedRequest(
                container=intern(m.container_name),
                resource=intern(m.resource_name),
                request=intern(m.request_name),
            )
            for m in extended.request_mappings or ()
        )
        if extended
        else (),
        device_health=_device_health(status, claims, extended_name),
        tolerations=tuple(t for t in spec.tolerations or () if isinstance(t, dict)),
    )


def node_record(wire: api.Node, meta: Meta, shared: SharedValues) -> NodeRecord:
    status = wire.status or api.NodeStatus()
    conditions = []
    ready = False
    for c in status.conditions or ():
        if c.type == "Ready":
            ready = c.status == "True"
        condition = {"type": intern(c.type), "status": intern(c.status)}
        if c.reason:
            condition["reason"] = intern(c.reason)
        if c.message:
            condition["message"] = intern(c.message) if len(c.message) <= 64 else c.message
        if c.last_transition_time:
            condition["lastTransitionTime"] = c.last_transition_time
        conditions.append(condition)
    return NodeRecord(
        meta=meta,
        capacity=shared.quantities(status.capacity),
        allocatable=shared.quantities(status.allocatable),
        ready=ready,
        unschedulable=bool(wire.spec.unschedulable) if wire.spec else False,
        conditions=tuple(conditions),
        taints=tuple(t for t in (wire.spec.taints or ()) if isinstance(t, dict))
        if wire.spec
        else (),
    )
