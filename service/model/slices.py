"""DeviceClass and ResourceSlice: wire Structs to records, for every served version.

Rules (dra-api.md §1, §4):

* v1beta1/v1alpha3 wrap a device's fields in `basic`; v1/v1beta2 do not. Both give one `Device`.
* v1alpha3 capacities are bare quantities (`memory: 9728Mi`); later ones `{value: …}`.
* v1beta1 `nodeName: ""` and `allNodes: false` mean unset (non-pointer fields); v1 omits them.
* Attribute and capacity keys are qualified with the driver's domain; `Device.uuid` is the
  string value of `<driver>/uuid` where the driver publishes it (NVIDIA: GPU-…/MIG-…).
* An attribute value has exactly one member set; the first set member wins (round-trip test
  data sets all of them), a value with none is malformed.
"""

from __future__ import annotations

from dra_mirror.service.model import api
from dra_mirror.service.model.metadata import (
    cel_expressions,
    object_meta,
    qualify,
    quantity_text,
)
from dra_mirror.service.model.records import (
    DEVICE_CLASS,
    RESOURCE_SLICE,
    Attribute,
    Capacity,
    CounterConsumption,
    CounterSet,
    Device,
    DeviceClassRecord,
    Pool,
    SliceRecord,
)


def device_class_record(wire: api.DeviceClass, *, cluster: str) -> DeviceClassRecord:
    spec = wire.spec or api.DeviceClassSpec()
    return DeviceClassRecord(
        meta=object_meta(DEVICE_CLASS, wire.metadata, cluster=cluster),
        selectors=cel_expressions(spec.selectors),
        config=tuple(spec.config or ()),
        extended_resource_name=spec.extended_resource_name or None,
    )


def _attribute(value: api.DeviceAttribute) -> Attribute:
    # Scalar members first, then the 1.36+ list forms.
    if value.int_ is not None:
        return Attribute("int", value.int_)
    if value.bool_ is not None:
        return Attribute("bool", value.bool_)
    if value.string is not None:
        return Attribute("string", value.string)
    if value.version is not None:
        return Attribute("version", value.version)
    for kind in ("ints", "bools", "strings", "versions"):
        members = getattr(value, kind)
        if members is not None:
            return Attribute(kind, list(members))
    raise ValueError("an attribute with no value")


def _capacity(value: api.DeviceCapacity | api.Quantity) -> Capacity:
    if isinstance(value, api.DeviceCapacity):
        return Capacity(value=quantity_text(value.value), request_policy=value.request_policy)
    return Capacity(value=quantity_text(value))


def _counters(counters: dict[str, api.Counter] | None) -> dict[str, str]:
    return {name: quantity_text(c.value) for name, c in (counters or {}).items()}


def device_record(wire: api.Device, driver: str) -> Device:
    fields: api.DeviceFields = wire.basic if wire.basic is not None else wire
    attributes = {
        qualify(key, driver): _attribute(value) for key, value in (fields.attributes or {}).items()
    }
    uuid = attributes.get(f"{driver}/uuid")
    return Device(
        name=wire.name,
        attributes=attributes,
        capacity={
            qualify(key, driver): _capacity(value) for key, value in (fields.capacity or {}).items()
        },
        shareable=bool(fields.allow_multiple_allocations),
        consumes_counters=tuple(
            CounterConsumption(counter_set=c.counter_set, counters=_counters(c.counters))
            for c in fields.consumes_counters or ()
        ),
        taints=tuple(fields.taints or ()),
        uuid=str(uuid.value) if uuid is not None and uuid.type == "string" else None,
        node_name=fields.node_name or None,
        all_nodes=bool(fields.all_nodes),
        node_selector=fields.node_selector or None,
        binding_conditions=tuple(fields.binding_conditions or ()),
    )


def slice_record(wire: api.ResourceSlice, *, cluster: str) -> SliceRecord:
    spec = wire.spec
    meta = object_meta(RESOURCE_SLICE, wire.metadata, cluster=cluster)
    if not spec.driver or not spec.pool.name:
        raise ValueError("spec.driver and spec.pool.name are required")
    devices = tuple(device_record(d, spec.driver) for d in spec.devices or ())
    if any(not d.name for d in devices):
        raise ValueError("a device without a name")
    return SliceRecord(
        meta=meta,
        driver=spec.driver,
        pool=Pool(
            name=spec.pool.name,
            generation=spec.pool.generation,
            resource_slice_count=spec.pool.resource_slice_count,
        ),
        node_name=spec.node_name or None,
        all_nodes=bool(spec.all_nodes),
        node_selector=spec.node_selector or None,
        per_device_node_selection=bool(spec.per_device_node_selection),
        devices=devices,
        shared_counters=tuple(
            CounterSet(name=s.name, counters=_counters(s.counters))
            for s in spec.shared_counters or ()
        ),
    )
