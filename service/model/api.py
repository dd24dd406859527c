"""Wire shapes of the Kubernetes objects the mirror reads, as typed msgspec Structs.

These Structs declare ONLY the fields the mirror needs, in the union of the shapes of
resource.k8s.io v1, v1beta2, v1beta1 (and the scalar capacities of v1alpha3) and core v1, so
that one decoder reads every served version straight from the API bytes (typed partial
Structs decode ~10x faster than dicts, measured, and skip `managedFields` for free).

The core/v1 Pod and Node shapes are in `service.model.api_core`.

Promises:

* unknown and newer fields are ignored; `null` is accepted wherever Kubernetes writes it
  (`adminAccess: null`, `conditions: null`, empty lists serialized as null);
* nothing here interprets a value: `service.model.normalize` turns these into records;
* quantities may arrive as strings (always, from an API server) or as YAML numbers (from
  hand-written manifests): `Quantity` takes both.
"""

from __future__ import annotations

from typing import Any

from msgspec import Struct, field

Quantity = str | int | float
Raw = dict[str, Any]


class _Wire(Struct, rename="camel", gc=False):
    """Base: Kubernetes spells fields in camelCase."""


class OwnerReference(_Wire):
    kind: str = ""
    name: str = ""
    uid: str = ""
    controller: bool | None = None
    api_version: str = ""


class ObjectMeta(_Wire):
    name: str = ""
    namespace: str = ""
    uid: str = ""
    resource_version: str = ""
    generation: int = 0
    creation_timestamp: str | None = None
    deletion_timestamp: str | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    owner_references: list[OwnerReference] | None = None
    finalizers: list[str] | None = None
    generate_name: str = ""


# --- DeviceClass --------------------------------------------------------------------------------


class CelSelector(_Wire):
    expression: str = ""


class DeviceSelector(_Wire):
    cel: CelSelector | None = None


class DeviceClassSpec(_Wire):
    selectors: list[DeviceSelector] | None = None
    config: list[Raw] | None = None
    extended_resource_name: str | None = None


class DeviceClass(_Wire):
    metadata: ObjectMeta
    spec: DeviceClassSpec | None = None


# --- ResourceSlice ------------------------------------------------------------------------------


class DeviceAttribute(_Wire):
    """Exactly one member is set; Python names avoid shadowing the builtins."""

    int_: int | None = field(default=None, name="int")
    bool_: bool | None = field(default=None, name="bool")
    string: str | None = None
    version: str | None = None
    ints: list[int] | None = None
    bools: list[bool] | None = None
    strings: list[str] | None = None
    versions: list[str] | None = None


class DeviceCapacity(_Wire):
    value: Quantity = "0"
    request_policy: Raw | None = None


class Counter(_Wire):
    value: Quantity = "0"


class CounterSet(_Wire):
    name: str = ""
    counters: dict[str, Counter] | None = None


class DeviceCounterConsumption(_Wire):
    counter_set: str = ""
    counters: dict[str, Counter] | None = None
    # KEP-5963 (alpha, DRADeviceCompatibilityGroups): devices drawing on the same counter set
    # co-allocate only where these intersect; stripped by an API server with the gate off.
    compatibility_groups: list[str] | None = None


class DeviceFields(_Wire):
    """The device fields: top level in v1/v1beta2, under `basic` in v1beta1/v1alpha3."""

    attributes: dict[str, DeviceAttribute] | None = None
    # v1alpha3 wrote capacities as bare quantities.
    capacity: dict[str, DeviceCapacity | Quantity] | None = None
    allow_multiple_allocations: bool | None = None
    consumes_counters: list[DeviceCounterConsumption] | None = None
    taints: list[Raw] | None = None
    node_name: str | None = None
    node_selector: Raw | None = None
    all_nodes: bool | None = None
    binding_conditions: list[str] | None = None
    binding_failure_conditions: list[str] | None = None
    binds_to_node: bool | None = None
    # 1.37: how the device's allocations count against the node's allocatable resources
    node_allocatable_resources: Raw | None = None
    # 1.36 (alpha, tombstoned in 1.37): the same, as a mapping per resource name
    node_allocatable_resource_mappings: Raw | None = None


class Device(DeviceFields):
    name: str = ""
    basic: DeviceFields | None = None


class ResourcePool(_Wire):
    name: str = ""
    generation: int = 0
    resource_slice_count: int = 1


class ResourceSliceSpec(_Wire):
    driver: str
    pool: ResourcePool
    node_name: str | None = None
    node_selector: Raw | None = None
    all_nodes: bool | None = None
    per_device_node_selection: bool | None = None
    devices: list[Device] | None = None
    shared_counters: list[CounterSet] | None = None
    partition_type_attribute: str | None = None  # 1.37
    skip_node_operations: list[str] | None = None  # 1.37


class ResourceSlice(_Wire):
    metadata: ObjectMeta
    spec: ResourceSliceSpec


# --- ResourceClaim and ResourceClaimTemplate ----------------------------------------------------


class CapacityRequirements(_Wire):
    requests: dict[str, Quantity] | None = None


class DerivedAttribute(_Wire):
    """KEP-6080 (alpha, DRADerivedAttributes): a virtual attribute computed per candidate
    device by a CEL expression, for the claim's matchAttribute/distinctAttribute constraints."""

    name: str = ""
    expression: str = ""


class ExactDeviceRequest(_Wire):
    """`exactly` (v1, v1beta2), and the flat request fields of v1beta1 share these names."""

    device_class_name: str | None = None
    selectors: list[DeviceSelector] | None = None
    allocation_mode: str | None = None
    count: int | None = None
    admin_access: bool | None = None
    tolerations: list[Raw] | None = None
    capacity: CapacityRequirements | None = None
    derived_attributes: list[DerivedAttribute] | None = None


class DeviceSubRequest(ExactDeviceRequest):
    name: str = ""


class DeviceRequest(ExactDeviceRequest):
    name: str = ""
    exactly: ExactDeviceRequest | None = None
    first_available: list[DeviceSubRequest] | None = None


class DeviceConstraint(_Wire):
    requests: list[str] | None = None
    match_attribute: str | None = None
    distinct_attribute: str | None = None


class DeviceClaim(_Wire):
    requests: list[DeviceRequest] | None = None
    constraints: list[DeviceConstraint] | None = None
    config: list[Raw] | None = None


class ResourceClaimSpec(_Wire):
    devices: DeviceClaim | None = None


class DeviceRequestAllocationResult(_Wire):
    request: str = ""
    driver: str = ""
    pool: str = ""
    device: str = ""
    admin_access: bool | None = None
    share_id: str | None = field(default=None, name="shareID")  # not the camel form "shareId"
    consumed_capacity: dict[str, Quantity] | None = None
    binding_conditions: list[str] | None = None
    binding_failure_conditions: list[str] | None = None
    skip_node_operations: list[str] | None = None  # 1.37
    # KEP-5963: the allocated device's groups per counter set, as the scheduler recorded them
    compatibility_groups: dict[str, list[str]] | None = None


class DeviceAllocationResult(_Wire):
    results: list[DeviceRequestAllocationResult] | None = None
    config: list[Raw] | None = None


class AllocationResult(_Wire):
    devices: DeviceAllocationResult | None = None
    node_selector: Raw | None = None
    allocation_timestamp: str | None = None


class ResourceClaimConsumerReference(_Wire):
    api_group: str | None = None
    resource: str = ""
    name: str = ""
    uid: str = ""


class ResourceClaimStatus(_Wire):
    allocation: AllocationResult | None = None
    reserved_for: list[ResourceClaimConsumerReference] | None = None
    devices: list[Raw] | None = None


class ResourceClaim(_Wire):
    metadata: ObjectMeta
    spec: ResourceClaimSpec | None = None
    status: ResourceClaimStatus | None = None


class TemplateMeta(_Wire):
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None


class ResourceClaimTemplateSpec(_Wire):
    metadata: TemplateMeta | None = None
    spec: ResourceClaimSpec | None = None


class ResourceClaimTemplate(_Wire):
    metadata: ObjectMeta
    spec: ResourceClaimTemplateSpec | None = None


# --- envelopes ----------------------------------------------------------------------------------


class ListMeta(_Wire):
    resource_version: str = ""
    continue_: str | None = field(default=None, name="continue")


class NamedOnly(_Wire):
    """Just enough of any object to name it in an error, or to read a bookmark."""

    metadata: ObjectMeta | None = None
