"""ResourceClaim and ResourceClaimTemplate: wire Structs to records, with derived state and origin.

Rules (resource.k8s.io ResourceClaim spec and status, every served version):

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
from dra_mirror.service.model.metadata import cel_expressions, selector_node
from dra_mirror.service.model.records import (
    ALLOCATED,
    DELETING,
    EXTENDED_RESOURCE,
    EXTENDED_RESOURCE_CLAIM_ANNOTATION,
    MANUAL,
    PENDING,
    POD_CLAIM_NAME_ANNOTATION,
    RESERVED,
    TEMPLATE,
    Allocation,
    AllocationResult,
    ClaimRecord,
    Constraint,
    Consumer,
    DerivedAttribute,
    Meta,
    OwnerRef,
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


def _subrequest(sub: api.DeviceSubRequest, shared: SharedValues) -> SubRequest:
    mode = intern(sub.allocation_mode or _EXACT_COUNT)
    return SubRequest(
        name=intern(sub.name),
        device_class_name=intern(sub.device_class_name or ""),
        selectors=cel_expressions(sub.selectors),
        allocation_mode=mode,
        count=_count(sub, mode),
        capacity=shared.quantities(sub.capacity.requests if sub.capacity else None),
        tolerations=tuple(sub.tolerations or ()),
        derived_attributes=_derived(sub.derived_attributes),
    )


def _derived(found: list[api.DerivedAttribute] | None) -> tuple[DerivedAttribute, ...]:
    return tuple(DerivedAttribute(intern(d.name), d.expression) for d in found) if found else ()


def _request(wire: api.DeviceRequest, shared: SharedValues) -> Request:
    subrequests = wire.first_available
    first_available = tuple(_subrequest(s, shared) for s in subrequests) if subrequests else ()
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
        capacity=shared.quantities(exact.capacity.requests if exact.capacity else None),
        tolerations=tuple(exact.tolerations) if exact.tolerations else (),
        first_available=first_available,
        derived_attributes=_derived(exact.derived_attributes),
    )


ClaimSpec = tuple[tuple[Request, ...], tuple[Constraint, ...], tuple[dict[str, Any], ...]]


def _claim_spec(spec: api.ResourceClaimSpec | None, shared: SharedValues) -> ClaimSpec:
    devices = (spec.devices if spec else None) or api.DeviceClaim()
    requests = tuple(_request(r, shared) for r in devices.requests) if devices.requests else ()
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


def _shared_spec(spec: api.ResourceClaimSpec | None, shared: SharedValues) -> ClaimSpec:
    """The claim spec's requests, constraints and config, or equal ones already converted (the
    claims made from one template have the same spec)."""
    if spec is None:
        return _claim_spec(spec, shared)
    return shared.converted(spec, _claim_spec, _typed)


def _typed(spec: api.ResourceClaimSpec) -> bool:
    """Whether the spec holds no untyped JSON (tolerations, opaque config)."""
    devices = spec.devices
    if devices is None:
        return True
    if devices.config:
        return False
    for request in devices.requests or ():
        if request.tolerations or (request.exactly is not None and request.exactly.tolerations):
            return False
        if any(sub.tolerations for sub in request.first_available or ()):
            return False
    return True


def _result(r: api.DeviceRequestAllocationResult, shared: SharedValues) -> AllocationResult:
    return AllocationResult(
        intern(r.request),
        intern(r.driver),
        intern(r.pool),
        intern(r.device),
        r.share_id or None,
        shared.quantities(r.consumed_capacity),
        bool(r.admin_access),
        shared.tuple_of(r.binding_conditions),
        shared.tuple_of(r.binding_failure_conditions),
        shared.tuple_of(r.skip_node_operations),
        {k: tuple(v) for k, v in r.compatibility_groups.items()} if r.compatibility_groups else {},
    )


def _allocation(wire: api.AllocationResult, shared: SharedValues) -> Allocation:
    devices = wire.devices or api.DeviceAllocationResult()
    node_selector = wire.node_selector or None
    node_name = selector_node(node_selector)
    if node_name is not None:
        node_name = intern(node_name)
        node_selector = shared.node_selector(node_selector, node_name)  # type: ignore[arg-type]
    results = devices.results
    return Allocation(
        tuple([_result(r, shared) for r in results]) if results else (),
        node_name,
        node_selector,
        wire.allocation_timestamp,
        tuple(devices.config) if devices.config else (),
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


def _consumer(c: api.ResourceClaimConsumerReference, owners: tuple[OwnerRef, ...]) -> Consumer:
    # A claim is reserved for the pod that owns it: its strings are the owner's, already
    # interned.
    for owner in owners:
        if owner.uid == c.uid and owner.name == c.name:
            return Consumer(
                intern(c.resource),
                owner.name,
                owner.uid,
                intern(c.api_group) if c.api_group else "",
            )
    return Consumer(
        intern(c.resource),
        intern(c.name),
        intern(c.uid),
        intern(c.api_group) if c.api_group else "",
    )


def claim_record(wire: api.ResourceClaim, meta: Meta, shared: SharedValues) -> ClaimRecord:
    requests, constraints, config = _shared_spec(wire.spec, shared)
    status = wire.status or api.ResourceClaimStatus()
    allocation = _allocation(status.allocation, shared) if status.allocation is not None else None
    reserved = status.reserved_for
    reserved_for = tuple([_consumer(c, meta.owners) for c in reserved]) if reserved else ()
    return ClaimRecord(
        meta,
        requests,
        constraints,
        config,
        allocation,
        reserved_for,
        tuple(status.devices) if status.devices else (),
        claim_state(meta, allocation, reserved_for),
        claim_origin(meta),
    )


def template_record(
    wire: api.ResourceClaimTemplate, meta: Meta, shared: SharedValues
) -> TemplateRecord:
    spec = wire.spec or api.ResourceClaimTemplateSpec()
    requests, constraints, config = _claim_spec(spec.spec, shared)
    claim_meta = spec.metadata or api.TemplateMeta()
    return TemplateRecord(
        meta=meta,
        requests=requests,
        constraints=constraints,
        config=config,
        claim_labels=dict(claim_meta.labels or {}),
        claim_annotations=dict(claim_meta.annotations or {}),
    )
