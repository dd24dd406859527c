"""ResourceClaim and ResourceClaimTemplate: wire Structs to records, with derived state and origin.

Rules (DESIGN.md "Derived states", dra-api.md §5, §6, §10):

* v1beta1 requests are flat; v1/v1beta2 put the same fields under `exactly`. Both give one
  `Request` with the fields flattened; `firstAvailable` subrequests stay a list.
  `count` defaults to 1 for ExactCount and is 0 for All.
* `state`: `deleting` if deletionTimestamp is set, else `reserved` if status.reservedFor is not
  empty, else `allocated` if status.allocation is set, else `pending` (kubectl's STATE column,
  collapsed to the most telling word).
* `origin`: `template` when the claim carries the `resource.kubernetes.io/pod-claim-name`
  annotation AND a Pod controller ownerReference (the resource-claim controller writes both);
  `extended-resource` when it carries `resource.kubernetes.io/extended-resource-claim`;
  otherwise `manual`.
* `Allocation.node_name` comes from a node-local nodeSelector (`matchFields metadata.name In
  [node]`), which is how the scheduler pins node-local devices.
* the claims of one LIST page share their equal node-local node selectors (`SharedValues`).
* `template_name` is NOT set here: only the owning pod knows it (the index fills it in).
"""

from __future__ import annotations

from sys import intern
from typing import Any

from dra_mirror.service.model import api
from dra_mirror.service.model.metadata import (
    cel_expressions,
    object_meta,
    quantities,
    selector_node,
    strings_of,
)
from dra_mirror.service.model.records import (
    ALLOCATED,
    DELETING,
    EXTENDED_RESOURCE,
    EXTENDED_RESOURCE_CLAIM_ANNOTATION,
    MANUAL,
    PENDING,
    POD_CLAIM_NAME_ANNOTATION,
    RESERVED,
    RESOURCE_CLAIM,
    RESOURCE_CLAIM_TEMPLATE,
    TEMPLATE,
    Allocation,
    AllocationResult,
    ClaimRecord,
    Constraint,
    Consumer,
    Meta,
    Request,
    SubRequest,
    TemplateRecord,
)
from dra_mirror.service.model.sharing import SharedValues

_EXACT_COUNT = "ExactCount"


def _count(exact: api.ExactDeviceRequest, mode: str) -> int:
    if exact.count is not None:
        return exact.count
    return 1 if mode == _EXACT_COUNT else 0


def _subrequest(sub: api.DeviceSubRequest) -> SubRequest:
    mode = intern(sub.allocation_mode or _EXACT_COUNT)
    return SubRequest(
        name=intern(sub.name),
        device_class_name=intern(sub.device_class_name or ""),
        selectors=cel_expressions(sub.selectors),
        allocation_mode=mode,
        count=_count(sub, mode),
        capacity=quantities(sub.capacity.requests if sub.capacity else None),
        tolerations=tuple(sub.tolerations or ()),
    )


def _request(wire: api.DeviceRequest) -> Request:
    subrequests = wire.first_available
    first_available = tuple(map(_subrequest, subrequests)) if subrequests else ()
    # v1/v1beta2: `exactly`; v1beta1: the same fields flat on the request.
    exact: api.ExactDeviceRequest | None = wire.exactly
    if exact is None and wire.device_class_name:
        exact = wire
    name = intern(wire.name)
    if exact is None:
        return Request(name=name, first_available=first_available)
    mode = intern(exact.allocation_mode or _EXACT_COUNT)
    return Request(
        name=name,
        device_class_name=intern(exact.device_class_name) if exact.device_class_name else None,
        selectors=cel_expressions(exact.selectors) if exact.selectors else (),
        allocation_mode=mode,
        count=_count(exact, mode),
        admin_access=bool(exact.admin_access),
        capacity=quantities(exact.capacity.requests) if exact.capacity else {},
        tolerations=tuple(exact.tolerations) if exact.tolerations else (),
        first_available=first_available,
    )


def _claim_spec(
    spec: api.ResourceClaimSpec | None,
) -> tuple[tuple[Request, ...], tuple[Constraint, ...], tuple[dict[str, Any], ...]]:
    devices = (spec.devices if spec else None) or api.DeviceClaim()
    requests = tuple(map(_request, devices.requests)) if devices.requests else ()
    constraints = (
        tuple(
            Constraint(
                requests=tuple(c.requests or ()),
                match_attribute=c.match_attribute or None,
                distinct_attribute=c.distinct_attribute or None,
            )
            for c in devices.constraints
        )
        if devices.constraints
        else ()
    )
    return requests, constraints, tuple(devices.config) if devices.config else ()


def _allocation(wire: api.AllocationResult, shared: SharedValues | None) -> Allocation:
    devices = wire.devices or api.DeviceAllocationResult()
    node_selector = wire.node_selector or None
    node_name = selector_node(node_selector)
    if node_name is not None and shared is not None:
        node_selector = shared.node_selector(node_selector, node_name)  # type: ignore[arg-type]
    return Allocation(
        results=tuple(
            AllocationResult(
                request=intern(r.request),
                driver=intern(r.driver),
                pool=intern(r.pool),
                device=intern(r.device),
                share_id=r.share_id or None,
                consumed_capacity=quantities(r.consumed_capacity),
                admin_access=bool(r.admin_access),
                binding_conditions=strings_of(r.binding_conditions),
                binding_failure_conditions=strings_of(r.binding_failure_conditions),
                skip_node_operations=strings_of(r.skip_node_operations),
            )
            for r in devices.results or ()
        ),
        node_name=intern(node_name) if node_name is not None else None,
        node_selector=node_selector,
        allocated_at=wire.allocation_timestamp,
        config=tuple(devices.config or ()),
    )


def claim_state(
    meta: Meta, allocation: Allocation | None, reserved_for: tuple[Consumer, ...]
) -> str:
    if meta.deleted_at:
        return DELETING
    if reserved_for:
        return RESERVED
    if allocation is not None:
        return ALLOCATED
    return PENDING


def claim_origin(meta: Meta) -> str:
    controller = meta.controller()
    if POD_CLAIM_NAME_ANNOTATION in meta.annotations and controller and controller.kind == "Pod":
        return TEMPLATE
    if EXTENDED_RESOURCE_CLAIM_ANNOTATION in meta.annotations:
        return EXTENDED_RESOURCE
    return MANUAL


def claim_record(
    wire: api.ResourceClaim, *, cluster: str, shared: SharedValues | None = None
) -> ClaimRecord:
    meta = object_meta(RESOURCE_CLAIM, wire.metadata, cluster=cluster)
    requests, constraints, config = _claim_spec(wire.spec)
    status = wire.status or api.ResourceClaimStatus()
    allocation = _allocation(status.allocation, shared) if status.allocation is not None else None
    reserved_for = tuple(
        Consumer(
            resource=intern(c.resource),
            name=intern(c.name),
            uid=intern(c.uid),
            api_group=intern(c.api_group) if c.api_group else "",
        )
        for c in status.reserved_for or ()
    )
    return ClaimRecord(
        meta=meta,
        requests=requests,
        constraints=constraints,
        config=config,
        allocation=allocation,
        reserved_for=reserved_for,
        device_status=tuple(status.devices) if status.devices else (),
        state=claim_state(meta, allocation, reserved_for),
        origin=claim_origin(meta),
    )


def template_record(wire: api.ResourceClaimTemplate, *, cluster: str) -> TemplateRecord:
    meta = object_meta(RESOURCE_CLAIM_TEMPLATE, wire.metadata, cluster=cluster)
    spec = wire.spec or api.ResourceClaimTemplateSpec()
    requests, constraints, config = _claim_spec(spec.spec)
    claim_meta = spec.metadata or api.TemplateMeta()
    return TemplateRecord(
        meta=meta,
        requests=requests,
        constraints=constraints,
        config=config,
        claim_labels=dict(claim_meta.labels or {}),
        claim_annotations=dict(claim_meta.annotations or {}),
    )
