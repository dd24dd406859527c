"""DeviceClass and ResourceSlice: wire Structs to records, for every served version.

Rules (resource.k8s.io DeviceClass and ResourceSlice, every served version):

* v1beta1/v1alpha3 wrap a device's fields in `basic`; v1/v1beta2 do not. Both give one `Device`.
* v1alpha3 capacities are bare quantities (`memory: 9728Mi`); later ones `{value: …}`.
* v1beta1 `nodeName: ""` and `allNodes: false` mean unset (non-pointer fields); v1 omits them.
* Attribute and capacity keys are qualified with the driver's domain, and the keys written
  without it are remembered (`Device.unqualified`) to show them as written; `Device.uuid` is
  the string value of `<driver>/uuid` where the driver publishes it (NVIDIA: GPU-…/MIG-…).
* An attribute value has exactly one member set; the first set member wins (round-trip test
  data sets all of them), a value with none is malformed.
* Equal scalar attribute values and plain capacities of the slices decoded together are one
  object (`SharedValues`); names, drivers, pools and keys are interned strings.
"""

from __future__ import annotations

from sys import intern

from dra_mirror.service.model import api
from dra_mirror.service.model.metadata import (
    cel_expressions,
    quantity_text,
    strings_of,
)
from dra_mirror.service.model.records import (
    CounterConsumption,
    CounterSet,
    Device,
    DeviceClassRecord,
    Meta,
    Pool,
    SliceRecord,
)
from dra_mirror.service.model.sharing import SharedValues


def device_class_record(
    wire: api.DeviceClass, meta: Meta, shared: SharedValues
) -> DeviceClassRecord:
    spec = wire.spec or api.DeviceClassSpec()
    return DeviceClassRecord(
        meta=meta,
        selectors=cel_expressions(spec.selectors),
        config=tuple(spec.config or ()),
        extended_resource_name=spec.extended_resource_name or None,
    )


def _counters(counters: dict[str, api.Counter] | None) -> dict[str, str]:
    if not counters:
        return {}
    return {intern(name): quantity_text(c.value) for name, c in counters.items()}


def device_record(wire: api.Device, driver: str, shared: SharedValues) -> Device:
    fields: api.DeviceFields = wire.basic if wire.basic is not None else wire
    written = fields.attributes
    capacities = fields.capacity
    layout = shared.layout(
        driver, tuple(written) if written else (), tuple(capacities) if capacities else ()
    )
    attributes = (
        dict(zip(layout.attributes, map(shared.attribute, written.values()), strict=True))
        if written
        else shared.empty
    )
    uuid = attributes.get(layout.uuid) if layout.uuid is not None else None
    consumes = fields.consumes_counters
    taints = fields.taints
    conditions = fields.binding_conditions
    failures = fields.binding_failure_conditions
    return Device(
        intern(wire.name),
        attributes,
        shared.capacity_map(layout.capacities, capacities.values()) if capacities else shared.empty,
        bool(fields.allow_multiple_allocations),
        tuple(
            CounterConsumption(
                intern(c.counter_set),
                _counters(c.counters),
                shared.tuple_of(c.compatibility_groups),
            )
            for c in consumes
        )
        if consumes
        else (),
        tuple(taints) if taints else (),
        str(uuid.value) if uuid is not None and uuid.type == "string" else None,
        intern(fields.node_name) if fields.node_name else None,
        bool(fields.all_nodes),
        fields.node_selector or None,
        tuple(conditions) if conditions else (),
        strings_of(failures) if failures else (),
        bool(fields.binds_to_node),
        fields.node_allocatable_resources or None,
        fields.node_allocatable_resource_mappings or None,
        layout.unqualified,
    )


def slice_record(wire: api.ResourceSlice, meta: Meta, shared: SharedValues) -> SliceRecord:
    spec = wire.spec
    if not spec.driver or not spec.pool.name:
        raise ValueError("spec.driver and spec.pool.name are required")
    driver = intern(spec.driver)
    devices = tuple(device_record(d, driver, shared) for d in spec.devices or ())
    if any(not d.name for d in devices):
        raise ValueError("a device without a name")
    pool = spec.pool
    return SliceRecord(
        meta=meta,
        driver=driver,
        pool=Pool(
            name=intern(pool.name),
            generation=pool.generation,
            resource_slice_count=pool.resource_slice_count,
        ),
        node_name=intern(spec.node_name) if spec.node_name else None,
        all_nodes=bool(spec.all_nodes),
        node_selector=spec.node_selector or None,
        per_device_node_selection=bool(spec.per_device_node_selection),
        devices=devices,
        shared_counters=tuple(
            CounterSet(name=intern(s.name), counters=_counters(s.counters))
            for s in spec.shared_counters or ()
        ),
        partition_type_attribute=spec.partition_type_attribute or None,
        skip_node_operations=strings_of(spec.skip_node_operations),
    )
