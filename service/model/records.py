"""Normalized records: one shape for every served version of every mirrored kind.

`service.model.normalize` turns raw API JSON (resource.k8s.io v1, v1beta2, v1beta1; core v1)
into these records; everything downstream (index, stores, schema, history, diagnostics and the
simulator's allocator) reads only these. They promise:

* no managedFields and no fields the mirror does not serve or record;
* attribute and capacity keys of a device are fully qualified (`gpu.nvidia.com/uuid`): an
  unqualified key belongs to the driver's own domain, as the API server's CEL environment treats
  it; `Device.unqualified` remembers which keys the slice wrote without their domain, so a
  device is shown as the object writes it (`Device.written`). Names a claim writes
  (`capacity.requests`, `consumedCapacity`) stay as written: their driver is the device's, so
  they are qualified where they meet one (`service.model.metadata.qualify`);
* quantities stay the Kubernetes string (`"143771Mi"`); parse with `service.model.quantity`;
* records are msgspec Structs, so stores encode them with `msgspec.json`/`msgpack` directly;
* records are immutable trees without reference cycles, so they are declared `gc=False`: the
  cyclic garbage collector never walks them (its full passes over a 100,000-object cluster were
  a large share of sync time, measured);
* the records decoded together share their equal parts, maps included (`service.model.sharing`:
  one empty map for every field without values): nothing may write into a record's maps; copy
  one to change it.

Identity (`service.model.identity`): an object is `(cluster, kind, namespace, name)`; a device
is `(cluster, driver, pool, device)`; the `uuid` attribute, where published, follows the hardware.
"""

from __future__ import annotations

from typing import Any, get_args

from msgspec import Struct, field

# The kind names, re-exported: records and the code reading them name kinds from here.
from dra_mirror.service.model.group_records import PodGroupClaim as PodGroupClaim
from dra_mirror.service.model.group_records import PodGroupRecord as PodGroupRecord
from dra_mirror.service.model.identity import DeviceKey as DeviceKey
from dra_mirror.service.model.identity import Meta as Meta
from dra_mirror.service.model.identity import ObjectKey as ObjectKey
from dra_mirror.service.model.identity import OwnerRef as OwnerRef
from dra_mirror.service.model.kind_names import DEVICE_CLASS as DEVICE_CLASS
from dra_mirror.service.model.kind_names import DEVICE_TAINT_RULE as DEVICE_TAINT_RULE
from dra_mirror.service.model.kind_names import NODE as NODE
from dra_mirror.service.model.kind_names import POD as POD
from dra_mirror.service.model.kind_names import POD_GROUP as POD_GROUP
from dra_mirror.service.model.kind_names import RESOURCE_CLAIM as RESOURCE_CLAIM
from dra_mirror.service.model.kind_names import RESOURCE_CLAIM_TEMPLATE as RESOURCE_CLAIM_TEMPLATE
from dra_mirror.service.model.kind_names import (
    RESOURCE_POOL_STATUS_REQUEST as RESOURCE_POOL_STATUS_REQUEST,
)
from dra_mirror.service.model.kind_names import RESOURCE_SLICE as RESOURCE_SLICE
from dra_mirror.service.model.request_records import (
    PoolStatusRequestRecord as PoolStatusRequestRecord,
)
from dra_mirror.service.model.request_records import ReportedPool as ReportedPool
from dra_mirror.service.model.rule_records import RuleTaint as RuleTaint
from dra_mirror.service.model.rule_records import TaintRuleRecord as TaintRuleRecord
from dra_mirror.service.model.rule_records import TaintSelector as TaintSelector

# Derived claim states, as kubectl's STATE column reads them (`service.model.claims` decides).
PENDING = "pending"
ALLOCATED = "allocated"
RESERVED = "reserved"
DELETING = "deleting"

# Claim origins.
TEMPLATE = "template"
EXTENDED_RESOURCE = "extended-resource"
MANUAL = "manual"

# Device statuses.
FREE = "free"
HELD = "held"
SHARED = "shared"
BLOCKED = "blocked"

POD_CLAIM_NAME_ANNOTATION = "resource.kubernetes.io/pod-claim-name"
EXTENDED_RESOURCE_CLAIM_ANNOTATION = "resource.kubernetes.io/extended-resource-claim"
DELETE_PROTECTION_FINALIZER = "resource.kubernetes.io/delete-protection"


# --- DeviceClass ----------------------------------------------------------------------------


class DeviceClassRecord(Struct, frozen=True, gc=False, tag="DeviceClass"):
    meta: Meta
    selectors: tuple[str, ...] = ()  # CEL expressions; all must match
    config: tuple[dict[str, Any], ...] = ()  # raw DeviceClassConfiguration entries
    extended_resource_name: str | None = None


# --- ResourceSlice and devices ----------------------------------------------------------------


class Attribute(Struct, frozen=True, gc=False):
    """A typed attribute value: `type` is int, bool, string, version (or the 1.36+ list forms
    ints, bools, strings, versions); `value` is the Python value (a list for list forms)."""

    type: str
    value: Any


class Capacity(Struct, frozen=True, gc=False):
    value: str  # Kubernetes quantity string
    request_policy: dict[str, Any] | None = None  # raw {default, validValues, validRange}


class CounterSet(Struct, frozen=True, gc=False):
    name: str
    counters: dict[str, str]  # counter name -> quantity string


class CounterConsumption(Struct, frozen=True, gc=False):
    counter_set: str
    counters: dict[str, str]
    compatibility_groups: tuple[str, ...] = ()  # KEP-5963: carried, as the driver wrote them


class Device(Struct, frozen=True, gc=False):
    name: str
    attributes: dict[str, Attribute] = field(default_factory=dict)  # qualified keys
    capacity: dict[str, Capacity] = field(default_factory=dict)  # qualified keys
    shareable: bool = False  # allowMultipleAllocations
    consumes_counters: tuple[CounterConsumption, ...] = ()
    taints: tuple[dict[str, Any], ...] = ()  # raw DeviceTaint entries
    uuid: str | None = None  # the `uuid` attribute of the driver's domain, if published
    # Per-device node selection (slice.spec.perDeviceNodeSelection):
    node_name: str | None = None
    all_nodes: bool = False
    node_selector: dict[str, Any] | None = None
    binding_conditions: tuple[str, ...] = ()
    binding_failure_conditions: tuple[str, ...] = ()
    binds_to_node: bool = False
    # How allocations of the device count against the node's allocatable resources, raw:
    # `nodeAllocatableResources` (1.37) and the 1.36 alpha `nodeAllocatableResourceMappings`.
    node_allocatable_resources: dict[str, Any] | None = None
    node_allocatable_resource_mappings: dict[str, Any] | None = None
    # The qualified attribute and capacity keys the slice wrote without their domain.
    unqualified: frozenset[str] = frozenset()

    def written(self, name: str) -> str:
        """A qualified attribute or capacity key as the slice wrote it (`memory`, or
        `resource.kubernetes.io/pcieRoot`)."""
        return name.rsplit("/", 1)[1] if name in self.unqualified else name


class Pool(Struct, frozen=True, gc=False):
    name: str
    generation: int = 0
    resource_slice_count: int = 1


class SliceRecord(Struct, frozen=True, gc=False, tag="ResourceSlice"):
    meta: Meta
    driver: str
    pool: Pool
    node_name: str | None = None
    all_nodes: bool = False
    node_selector: dict[str, Any] | None = None
    per_device_node_selection: bool = False
    devices: tuple[Device, ...] = ()
    shared_counters: tuple[CounterSet, ...] = ()
    partition_type_attribute: str | None = None  # 1.37: the attribute naming partition types
    skip_node_operations: tuple[str, ...] = ()  # 1.37: node operations its devices skip


# --- ResourceClaim and templates --------------------------------------------------------------


class DerivedAttribute(Struct, frozen=True, gc=False):
    """KEP-6080: `name` (for constraints) computed per candidate device by `expression`."""

    name: str
    expression: str


class SubRequest(Struct, frozen=True, gc=False):
    name: str
    device_class_name: str
    selectors: tuple[str, ...] = ()
    allocation_mode: str = "ExactCount"  # ExactCount | All
    count: int = 1
    capacity: dict[str, str] = field(default_factory=dict)  # capacity.requests
    tolerations: tuple[dict[str, Any], ...] = ()
    derived_attributes: tuple[DerivedAttribute, ...] = ()


class Request(Struct, frozen=True, gc=False):
    """A claim request: `exactly` (flattened here) or a list of `first_available` subrequests."""

    name: str
    device_class_name: str | None = None  # None when first_available is used
    selectors: tuple[str, ...] = ()
    allocation_mode: str = "ExactCount"
    count: int = 1
    admin_access: bool = False
    capacity: dict[str, str] = field(default_factory=dict)
    tolerations: tuple[dict[str, Any], ...] = ()
    first_available: tuple[SubRequest, ...] = ()
    derived_attributes: tuple[DerivedAttribute, ...] = ()  # of `exactly` (KEP-6080)


class Constraint(Struct, frozen=True, gc=False):
    requests: tuple[str, ...] = ()  # empty: all requests
    match_attribute: str | None = None
    distinct_attribute: str | None = None


class AllocationResult(Struct, frozen=True, gc=False):
    request: str  # "<request>" or "<request>/<subrequest>"
    driver: str
    pool: str
    device: str
    share_id: str | None = None
    consumed_capacity: dict[str, str] = field(default_factory=dict)
    admin_access: bool = False
    binding_conditions: tuple[str, ...] = ()  # copied from the slice at allocation
    binding_failure_conditions: tuple[str, ...] = ()
    skip_node_operations: tuple[str, ...] = ()  # 1.37, copied from the slice
    # KEP-5963: counter set -> the device's compatibility groups, as recorded at allocation
    compatibility_groups: dict[str, tuple[str, ...]] = field(default_factory=dict)


class Allocation(Struct, frozen=True, gc=False):
    results: tuple[AllocationResult, ...] = ()
    node_name: str | None = None  # from a node-local nodeSelector (matchFields metadata.name)
    node_selector: dict[str, Any] | None = None
    allocated_at: str | None = None  # allocationTimestamp, when the API server has it
    config: tuple[dict[str, Any], ...] = ()


class Consumer(Struct, frozen=True, gc=False):
    """An entry of status.reservedFor (normally a pod)."""

    resource: str
    name: str
    uid: str
    api_group: str = ""


class ClaimRecord(Struct, frozen=True, gc=False, tag="ResourceClaim"):
    meta: Meta
    requests: tuple[Request, ...] = ()
    constraints: tuple[Constraint, ...] = ()
    config: tuple[dict[str, Any], ...] = ()
    allocation: Allocation | None = None
    reserved_for: tuple[Consumer, ...] = ()
    device_status: tuple[dict[str, Any], ...] = ()  # raw status.devices (driver-written)
    state: str = PENDING  # derived by normalize: pending | allocated | reserved | deleting
    origin: str = MANUAL  # derived by normalize: template | extended-resource | manual
    template_name: str | None = None  # the pod's resourceClaimTemplateName, once resolved


class TemplateRecord(Struct, frozen=True, gc=False, tag="ResourceClaimTemplate"):
    meta: Meta
    requests: tuple[Request, ...] = ()
    constraints: tuple[Constraint, ...] = ()
    config: tuple[dict[str, Any], ...] = ()
    claim_labels: dict[str, str] = field(default_factory=dict)
    claim_annotations: dict[str, str] = field(default_factory=dict)


# --- Pods and nodes ---------------------------------------------------------------------------


class PodClaim(Struct, frozen=True, gc=False):
    """One pod.spec.resourceClaims entry, with its claim name resolved as the kubelet does."""

    name: str  # pod-local name
    claim_name: str | None = None  # resourceClaimName, or the generated name from status
    template_name: str | None = None  # resourceClaimTemplateName
    containers: tuple[str, ...] = ()  # containers (and init containers) listing it


class ContainerClaim(Struct, frozen=True, gc=False):
    container: str
    claim: str  # pod-local claim name
    request: str | None = None


class Container(Struct, frozen=True, gc=False):
    name: str
    init: bool = False
    requests: dict[str, str] = field(default_factory=dict)
    limits: dict[str, str] = field(default_factory=dict)
    claims: tuple[ContainerClaim, ...] = ()


class ExtendedRequest(Struct, frozen=True, gc=False):
    """One status.extendedResourceClaimStatus.requestMappings entry: which request of the
    pod's extended-resource claim serves a container's extended resource."""

    container: str
    resource: str  # the extended resource name, e.g. nvidia.com/gpu
    request: str  # the request of the claim


class DeviceHealth(Struct, frozen=True, gc=False):
    """The health the kubelet reports for one device allocated to a container
    (containerStatuses[].allocatedResourcesStatus, KEP-4680)."""

    container: str
    resource: str  # the status entry's name as written: "claim:<pod claim>[/<request>]"
    claim_name: str | None  # the ResourceClaim it names (resolved through the pod's claims)
    request: str | None
    driver: str  # from resourceID "<driver>/<pool>/<device>"
    pool: str
    device: str
    health: str  # Healthy | Unhealthy | Unknown
    message: str | None = None


class PodRecord(Struct, frozen=True, gc=False, tag="Pod"):
    meta: Meta
    phase: str = "Pending"
    node_name: str | None = None
    claims: tuple[PodClaim, ...] = ()
    containers: tuple[Container, ...] = ()
    extended_claim_name: str | None = None  # status.extendedResourceClaimStatus
    started_at: str | None = None
    reason: str | None = None  # status.reason / the PodScheduled condition's reason
    node_selector: dict[str, str] = field(default_factory=dict)  # spec.nodeSelector
    # spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution, raw
    # ({"nodeSelectorTerms": [...]}); None when the pod has no required node affinity.
    required_node_affinity: dict[str, Any] | None = None
    pod_group: str | None = None  # spec.schedulingGroup.podGroupName [1.36+]
    extended_requests: tuple[ExtendedRequest, ...] = ()  # extendedResourceClaimStatus mappings
    device_health: tuple[DeviceHealth, ...] = ()  # per device, as the kubelet reports it
    tolerations: tuple[dict[str, Any], ...] = ()  # spec.tolerations, raw


class NodeRecord(Struct, frozen=True, gc=False, tag="Node"):
    meta: Meta
    capacity: dict[str, str] = field(default_factory=dict)
    allocatable: dict[str, str] = field(default_factory=dict)
    ready: bool = False
    unschedulable: bool = False
    conditions: tuple[dict[str, Any], ...] = ()
    taints: tuple[dict[str, Any], ...] = ()  # spec.taints, raw


# --- Derived views shared by the index, the stores and the allocator ------------------------


class DeviceEntry(Struct, frozen=True, gc=False):
    """A device of the valid generation of its pool, with where it lives — or, `published`
    False, a device an allocation result names and no slice publishes (the driver withdrew
    it, its node went, or the claim was listed before the slices): known by what the holding
    allocations say (its name, its node from their nodeSelector, shareable when they carry a
    shareID) and the uuid it had when it was last published."""

    key: DeviceKey
    device: Device
    slice: ObjectKey | None  # None: no slice publishes it
    node: str | None  # the node a node-local device is on; None for network-attached devices
    pool_generation: int = 0
    pool_complete: bool = True
    published: bool = True
    # The taints of the DeviceTaintRules selecting it, in rule-name order (its slice's are in
    # `device.taints`; service.model.taint_rules.taints_of gives both).
    rule_taints: tuple[RuleTaint, ...] = ()


class AllocationRef(Struct, frozen=True, gc=False):
    """One claim's hold on a device (one allocation result)."""

    claim: ObjectKey
    request: str
    share_id: str | None = None
    consumed_capacity: dict[str, str] = field(default_factory=dict)
    admin_access: bool = False
    # KEP-5963: the result's snapshot, counter set -> the device's compatibility groups
    compatibility_groups: dict[str, tuple[str, ...]] = field(default_factory=dict)


Record = (
    DeviceClassRecord
    | SliceRecord
    | ClaimRecord
    | TemplateRecord
    | PodRecord
    | NodeRecord
    | TaintRuleRecord
    | PodGroupRecord
    | PoolStatusRequestRecord
)

# Each record type is tagged with its kind (the tag also tells the types apart in a store).
KIND_OF: dict[type, str] = {
    record_type: str(record_type.__struct_config__.tag) for record_type in get_args(Record)
}


def key_of(record: Record) -> ObjectKey:
    """The object key of a record."""
    meta = record.meta
    return ObjectKey(meta.cluster, KIND_OF[type(record)], meta.namespace, meta.name)
