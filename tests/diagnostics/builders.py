"""Small constructors of records for the diagnostics tests: devices as drivers publish them
(qualified attribute keys, quantity strings), classes, claims, and the H200 MIG layout."""

from __future__ import annotations

import itertools
from typing import Any

from dra_mirror.service.diagnostics.placement import Ledger, Unsatisfiable, allocate
from dra_mirror.service.model.holdings import Holdings
from dra_mirror.service.model.records import (
    Allocation,
    AllocationResult,
    Attribute,
    Capacity,
    ClaimRecord,
    Constraint,
    CounterConsumption,
    CounterSet,
    Device,
    DeviceClassRecord,
    DeviceEntry,
    DeviceKey,
    Meta,
    ObjectKey,
    Pool,
    Request,
    SliceRecord,
    SubRequest,
)

CLUSTER = "east"
NVIDIA = "gpu.nvidia.com"
NIC = "cni.dra.networking.x-k8s.io"

_TYPES = {bool: "bool", int: "int", str: "string"}


def attrs(domain: str, **values: Any) -> dict[str, Attribute]:
    out = {}
    for name, value in values.items():
        if isinstance(value, Attribute):
            out[f"{domain}/{name}"] = value
        else:
            out[f"{domain}/{name}"] = Attribute(_TYPES[type(value)], value)
    return out


def version(text: str) -> Attribute:
    return Attribute("version", text)


def entry(
    name: str,
    *,
    node: str | None = "n1",
    driver: str = NVIDIA,
    pool: str | None = None,
    attributes: dict[str, Attribute] | None = None,
    capacity: dict[str, Capacity] | None = None,
    **device: Any,
) -> DeviceEntry:
    pool = pool or node or "network"
    dev = Device(name=name, attributes=attributes or {}, capacity=capacity or {}, **device)
    return DeviceEntry(
        key=DeviceKey(CLUSTER, driver, pool, name),
        device=dev,
        slice=ObjectKey(CLUSTER, "ResourceSlice", "", f"{pool}-{driver}"),
        node=node,
    )


def gpu(index: int, node: str = "n1", **extra: Any) -> DeviceEntry:
    attributes = attrs(
        NVIDIA,
        type="gpu",
        uuid=f"GPU-{node}-{index}",
        productName="NVIDIA H200",
        architecture="Hopper",
        driverVersion=version("580.159.4"),
        cudaComputeCapability=version("9.0.0"),
    )
    return entry(
        f"gpu-{index}",
        node=node,
        attributes=attributes,
        capacity={f"{NVIDIA}/memory": Capacity("143771Mi")},
        **extra,
    )


def device_class(name: str, *selectors: str, config: tuple[dict[str, Any], ...] = ()):
    return DeviceClassRecord(
        meta=Meta(cluster=CLUSTER, name=name), selectors=selectors, config=config
    )


GPU_CLASS = device_class(
    "gpu.nvidia.com",
    "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'",
)
MIG_CLASS = device_class(
    "mig.nvidia.com",
    "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig'",
)
NIC_CLASS = device_class("network-interface", 'device.driver == "cni.dra.networking.x-k8s.io"')
CLASSES = {c.meta.name: c for c in (GPU_CLASS, MIG_CLASS, NIC_CLASS)}


def request(name: str = "gpu", device_class_name: str = "gpu.nvidia.com", **kw: Any) -> Request:
    return Request(name=name, device_class_name=device_class_name, **kw)


def sub(name: str, device_class_name: str = "gpu.nvidia.com", **kw: Any) -> SubRequest:
    return SubRequest(name=name, device_class_name=device_class_name, **kw)


def claim(
    name: str,
    *requests: Request,
    constraints: tuple[Constraint, ...] = (),
    allocation: Allocation | None = None,
    namespace: str = "default",
) -> ClaimRecord:
    return ClaimRecord(
        meta=Meta(cluster=CLUSTER, name=name, namespace=namespace),
        requests=requests,
        constraints=constraints,
        allocation=allocation,
    )


def claim_key(name: str, namespace: str = "default") -> ObjectKey:
    return ObjectKey(CLUSTER, "ResourceClaim", namespace, name)


def held(*entries: DeviceEntry, request_name: str = "gpu", **result: Any) -> Allocation:
    return Allocation(
        results=tuple(
            AllocationResult(
                request=request_name,
                driver=e.key.driver,
                pool=e.key.pool,
                device=e.key.device,
                **result,
            )
            for e in entries
        )
    )


# --- H200 MIG (from ../shared/hardware/h200: 8 memory slices; 7 compute slices) ---------------
# profile -> (slices of memory, placements as memory-slice start positions)
H200_MIG = {
    "1g.18gb": (1, [0, 1, 2, 3, 4, 5, 6]),
    "1g.35gb": (2, [0, 2, 4, 6]),
    "2g.35gb": (2, [0, 2, 4]),
    "3g.71gb": (4, [0, 4]),
    "4g.71gb": (4, [0]),
    "7g.141gb": (8, [0]),
}


def h200_mig(node: str = "n1", minor: int = 0) -> tuple[list[DeviceEntry], SliceRecord]:
    """One H200 as partitionable devices: the full GPU and every MIG placement, all consuming
    memory slices of `gpu-<minor>-counter-set`, plus the slice publishing that set."""
    counter_set = f"gpu-{minor}-counter-set"
    parent = f"GPU-{node}-{minor}"
    devices = []

    def consumption(start: int, size: int) -> tuple[CounterConsumption, ...]:
        counters = {f"memory-slice-{i}": "1" for i in range(start, start + size)}
        return (CounterConsumption(counter_set=counter_set, counters=counters),)

    full = gpu(minor, node, consumes_counters=consumption(0, 8), pool=node)
    devices.append(full)
    for profile, (size, starts) in H200_MIG.items():
        for start in starts:
            name = f"gpu-{minor}-mig-{profile.replace('.', '')}-{start}"
            attributes = attrs(
                NVIDIA, type="mig", profile=profile, parentUUID=parent, uuid=f"MIG-{name}"
            )
            devices.append(
                entry(
                    name,
                    node=node,
                    attributes=attributes,
                    consumes_counters=consumption(start, size),
                )
            )
    sl = SliceRecord(
        meta=Meta(cluster=CLUSTER, name=f"{node}-counters"),
        driver=NVIDIA,
        pool=Pool(name=node, resource_slice_count=2),
        node_name=node,
        shared_counters=(
            CounterSet(name=counter_set, counters={f"memory-slice-{i}": "1" for i in range(8)}),
        ),
    )
    return devices, sl


# --- running the allocator ------------------------------------------------------------------


def share_ids():
    """Deterministic shareIDs: share-0, share-1, …"""
    counter = itertools.count()
    return lambda: f"share-{next(counter)}"


def place(c: ClaimRecord, devices, ledger=None, **kw: Any) -> Allocation | Unsatisfiable:
    ledger = ledger if ledger is not None else Ledger(Holdings.build(devices, []))
    return allocate(c, classes=CLASSES, devices=devices, ledger=ledger, **kw)


def devices_of(allocation: Allocation | Unsatisfiable) -> list[str]:
    assert isinstance(allocation, Allocation), allocation
    return [f"{r.pool}/{r.device}" for r in allocation.results]
