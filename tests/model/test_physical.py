"""Physical capacity (service.model.physical): which GPU a device is part of, its type, and the
GPU-equivalents a device and a hold take."""

from __future__ import annotations

from fractions import Fraction

from dra_mirror.service.model.index import ClusterIndex
from dra_mirror.service.model.physical import (
    GPU,
    NIC,
    Unit,
    device_type,
    hold_weights,
    pool_units,
    units_of,
)
from dra_mirror.service.model.records import (
    DEVICE_CLASS,
    RESOURCE_SLICE,
    AllocationRef,
    Attribute,
    Capacity,
    CounterConsumption,
    CounterSet,
    Device,
    DeviceEntry,
    DeviceKey,
    ObjectKey,
)
from tests.model.builders import CLUSTER, DRIVER, device_class, slice_

CLAIM = ObjectKey(CLUSTER, "ResourceClaim", "ns", "c")
SLICES = {f"memory-slice-{i}": "1" for i in range(8)}
GPU_SET = {"multiprocessors": "132", "memory": "141Gi", **SLICES}


def entry(d: Device, *, driver: str = DRIVER, pool: str = "n0") -> DeviceEntry:
    return DeviceEntry(
        key=DeviceKey(CLUSTER, driver, pool, d.name), device=d, slice=None, node=pool
    )


def attrs(**values: str) -> dict[str, Attribute]:
    return {f"{DRIVER}/{k}": Attribute("string", v) for k, v in values.items()}


def partition(name: str, slices: range, *, sms: str = "16", **attributes: str) -> Device:
    used = {"multiprocessors": sms, **{f"memory-slice-{i}": "1" for i in slices}}
    return Device(
        name=name,
        attributes=attrs(type="mig", **attributes),
        consumes_counters=(CounterConsumption("gpu-0-cs", used),),
    )


WHOLE = Device(
    name="gpu-0",
    attributes=attrs(type="gpu", uuid="GPU-0"),
    uuid="GPU-0",
    consumes_counters=(CounterConsumption("gpu-0-cs", GPU_SET),),
)


def test_partitions_are_one_gpu_weighed_by_memory_slices() -> None:
    devices = [entry(WHOLE), entry(partition("p1", range(1))), entry(partition("p3", range(4, 8)))]
    units = units_of(devices)
    assert {u.physical for u in units.values()} == {"GPU-0"}
    assert units[devices[0].key] == Unit(
        "GPU-0", GPU, Fraction(1), True, counted=True, counter="GPU-0"
    )
    # 1 of 8 memory slices, although it has 16/132 of the multiprocessors
    assert units[devices[1].key] == Unit("GPU-0", GPU, Fraction(1, 8), False, counter="GPU-0")
    assert units[devices[2].key].weight == Fraction(1, 2)


def test_partitions_without_their_whole_device_use_the_published_counter_set() -> None:
    devices = [entry(partition("p1", range(2))), entry(partition("p2", range(2, 3)))]
    units = pool_units(devices, [CounterSet("gpu-0-cs", GPU_SET)])
    assert [u.weight for u in units.values()] == [Fraction(2, 8), Fraction(1, 8)]
    assert {u.physical for u in units.values()} == {f"{DRIVER}/n0/gpu-0-cs"}
    assert not any(u.whole for u in units.values())
    assert [u.counted for u in units.values()] == [True, False]  # the GPU counted once


def test_a_counter_set_without_memory_slices_is_weighed_by_its_dominant_counter() -> None:
    used = CounterConsumption("cs", {"cores": "2", "memory": "10Gi"})
    part = Device(name="p", consumes_counters=(used,))
    units = pool_units([entry(part)], [CounterSet("cs", {"cores": "8", "memory": "20Gi"})])
    assert next(iter(units.values())).weight == Fraction(1, 2)


def static_mig(name: str, memory: str, parent: str = "GPU-S") -> Device:
    return Device(
        name=name,
        attributes=attrs(type="mig", parentUUID=parent, productName="NVIDIA A100"),
        capacity={f"{DRIVER}/memory": Capacity(memory)},
        uuid=f"MIG-{name}",
    )


def test_static_mig_devices_group_under_their_parent_by_memory() -> None:
    parent = Device(
        name="gpu-0",
        attributes=attrs(type="gpu", productName="NVIDIA A100"),
        capacity={f"{DRIVER}/memory": Capacity("40Gi")},
        uuid="GPU-S",
    )
    devices = [entry(parent), entry(static_mig("m0", "10Gi")), entry(static_mig("m1", "20Gi"))]
    units = units_of(devices)
    assert {u.physical for u in units.values()} == {"GPU-S"}
    assert [units[d.key].weight for d in devices] == [1, Fraction(1, 4), Fraction(1, 2)]
    # The parent not published: the largest whole GPU of the same product in the pool.
    other = Device(
        name="gpu-1",
        attributes=attrs(type="gpu", productName="NVIDIA A100"),
        capacity={f"{DRIVER}/memory": Capacity("40Gi")},
        uuid="GPU-T",
    )
    units = units_of([entry(other), entry(static_mig("m0", "10Gi"))])
    assert units[entry(static_mig("m0", "10Gi")).key] == Unit(
        "GPU-S",
        GPU,
        Fraction(1, 4),
        False,
        counted=True,  # it stands for its unseen parent
        counter="MIG-m0",
    )
    # Nothing to weigh them against: an equal part each.
    lone = [entry(static_mig("m0", "10Gi", "GPU-X")), entry(static_mig("m1", "5Gi", "GPU-X"))]
    assert [u.weight for u in units_of(lone).values()] == [Fraction(1, 2)] * 2


def test_every_device_of_a_gpu_names_the_device_counting_it() -> None:
    # a whole device without a uuid: the GPU is known by its counter set, and counted through
    # the whole device, known to history as driver/pool/device
    nameless = Device(name="gpu-0", attributes=attrs(type="gpu"),
                      consumes_counters=(CounterConsumption("gpu-0-cs", GPU_SET),))  # fmt: skip
    devices = [entry(nameless), entry(partition("p1", range(1)))]
    units = pool_units(devices, [CounterSet("gpu-0-cs", GPU_SET)])
    assert {u.physical for u in units.values()} == {f"{DRIVER}/n0/gpu-0-cs"}
    assert {u.counter for u in units.values()} == {f"{DRIVER}/n0/gpu-0"}
    # no whole device: its first partition by name
    devices = [entry(partition("p2", range(1, 2))), entry(partition("p1", range(1)))]
    units = pool_units(devices, [CounterSet("gpu-0-cs", GPU_SET)])
    assert {u.counter for u in units.values()} == {f"{DRIVER}/n0/p1"}


def test_a_class_selecting_partitions_is_recorded_for_the_device_counting_their_gpu() -> None:
    nameless = Device(name="gpu-0", attributes=attrs(type="gpu"),
                      consumes_counters=(CounterConsumption("gpu-0-cs", GPU_SET),))  # fmt: skip
    index = ClusterIndex(CLUSTER, selector_matcher=lambda *_: True, class_members=True)
    index.resync(DEVICE_CLASS, [device_class("mig")], at="2026-01-01T00:00:00Z")
    found = index.resync(
        RESOURCE_SLICE,
        [slice_("s", pool="n0", devices=(nameless, partition("p1", range(1))),
                counters={"gpu-0-cs": GPU_SET})],
        at="2026-01-01T00:00:00Z",
    )  # fmt: skip
    classified = {t.device: t.data["physical"] for t in found.transitions
                  if t.type == "device_classified"}  # fmt: skip
    # history counts the GPU under the class through the device that counts it in inventory
    assert classified == {"gpu-0": f"{DRIVER}/n0/gpu-0", "p1": f"{DRIVER}/n0/gpu-0"}


def test_types_are_gpu_nic_or_the_driver() -> None:
    assert device_type(entry(WHOLE)) == GPU
    nic = Device(name="eth0", shareable=True)
    assert device_type(entry(nic, driver="cni.dra.networking.x-k8s.io")) == NIC
    assert device_type(entry(Device(name="fpga0"), driver="fpga.example.com")) == "fpga.example.com"
    assert device_type(entry(Device(name="gpu-1"), driver="gpu.example.com")) == GPU


def hold(share: str | None = None, *, admin: bool = False, **consumed: str) -> AllocationRef:
    return AllocationRef(CLAIM, "r", share_id=share, consumed_capacity=consumed, admin_access=admin)


def test_what_holds_take() -> None:
    nic = entry(
        Device(
            name="eth0",
            shareable=True,
            capacity={
                "cni/bandwidth": Capacity("100G"),
                "cni/maxVirtualDevices": Capacity("65535"),
            },
        ),
        driver="cni",
    )
    unit = units_of([nic])[nic.key]
    shares = [hold("a", bandwidth="10G", maxVirtualDevices="1"), hold("b"), hold("c", admin=True)]
    # 10G of 100G (the dominant capacity); the unmeasured share takes what is left; admin 0.
    assert hold_weights(nic, unit, shares) == [Fraction(1, 10), Fraction(9, 10), 0]
    gpu = entry(WHOLE)
    assert hold_weights(gpu, units_of([gpu])[gpu.key], [hold(admin=True)]) == [0]
    assert hold_weights(gpu, units_of([gpu])[gpu.key], [hold()]) == [1]


def test_the_index_keeps_units_through_slice_changes() -> None:
    index = ClusterIndex(CLUSTER)
    counters = {"gpu-0-cs": GPU_SET}
    first = slice_("s", pool="n0", devices=(WHOLE, partition("p1", range(1))), counters=counters)
    index.resync(RESOURCE_SLICE, [first], at="t0")
    p1 = DeviceKey(CLUSTER, DRIVER, "n0", "p1")
    assert index.unit(p1) == Unit("GPU-0", GPU, Fraction(1, 8), False, counter="GPU-0")
    bigger = slice_(
        "s", pool="n0", devices=(WHOLE, partition("p1", range(2))), counters=counters, rv="2"
    )
    index.resync(RESOURCE_SLICE, [bigger], at="t1")
    assert index.unit(p1).weight == Fraction(1, 4)
    index.resync(RESOURCE_SLICE, [], at="t2")
    assert index.unit(p1) == Unit(f"{DRIVER}/n0/p1", GPU, Fraction(1), True, True)  # key only
