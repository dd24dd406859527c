"""Device profiles: the ResourceSlices a node's DRA drivers publish, as v1 dicts.

A profile turns "this node has 8 NVIDIA H200 and 2 NICs" into the ResourceSlice objects the
NVIDIA GPU driver (`gpu.nvidia.com`) and the CNI DRA driver (`cni.dra.networking.x-k8s.io`)
would publish for it, in the resource.k8s.io/v1 storage shape. It promises:

* attribute names, types and device names as the drivers publish them
  (fixtures/upstream/SOURCES.md): `gpu-<minor>` for a whole GPU,
  `gpu-<minor>-mig-<profile without dots, RFC 1123>-<GI profile id>-<placement start>` for a
  MIG partition, unqualified keys in the driver's own domain;
* MIG placements as KEP-4815 partitionable devices: one counter set `gpu-<minor>-counter-set`
  per GPU (capacities DNS-ified: `copy-engines`, plus `memory-slice-<N>` of value 1), every
  MIG device and the whole GPU `consumesCounters` from it, so two partitions that overlap in
  memory slices, or a partition and the whole GPU, can never both be allocated;
* the slice limits kube-apiserver 1.35 enforces: `sharedCounters` and `devices` never share a
  slice (counter sets get their own slice in the same pool, ≤8 sets per slice), ≤64 devices in
  a slice whose devices consume counters, ≤128 otherwise; `pool.resourceSliceCount` counts
  every slice of the pool;
* determinism: uuids and bus ids derive from the caller's seed string only.

The GPU models and their MIG profiles (the H200 transcribed from `../shared/hardware/h200/`)
are `service.sim.gpu_models`, re-exported here; a GPU shared the way NVIDIA's ConsumableShares
publishes it is `service.sim.shares`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from dra_mirror.service.sim.gpu_models import (
    GPU_MODELS,
    H100_80GB_HBM3,
    H200,
    NIC_PROFILE,
    PROFILES,
    GpuModel,
)
from dra_mirror.service.sim.shares import apply_shares

__all__ = [
    "DEVICE_CLASS_SELECTORS",
    "GPU_DRIVER",
    "GPU_MODELS",
    "H100_80GB_HBM3",
    "H200",
    "MAX_COUNTER_SETS",
    "MAX_DEVICES",
    "MAX_DEVICES_WITH_COUNTERS",
    "NIC_DRIVER",
    "NIC_PROFILE",
    "NUMA_NODE",
    "PCI_BUS_ID",
    "PROFILES",
    "DeviceGroup",
    "GpuModel",
    "binary_si",
    "device_class",
    "gpu_devices",
    "nic_device",
    "node_slices",
    "nvidia_uuid",
]

GPU_DRIVER = "gpu.nvidia.com"
NIC_DRIVER = "cni.dra.networking.x-k8s.io"
PCI_BUS_ID = "resource.kubernetes.io/pciBusID"  # vendor-neutral name (NVIDIA driver ≥ v25.8)
# The standard NUMA attribute (KEP-6072, 1.37): an int, or a one-element `ints` list where list
# attributes are on; NVIDIA's driver publishes it on GPUs and MIG devices in place of its own.
NUMA_NODE = "resource.kubernetes.io/numaNode"
GPUS_PER_NUMA_NODE = 4  # an eight-GPU HGX board: GPUs 0-3 on NUMA node 0, 4-7 on node 1

MAX_DEVICES = 128  # devices per slice (validation: ResourceSliceMaxDevices)
MAX_DEVICES_WITH_COUNTERS = 64  # 1.35: when any device consumes counters or has taints
MAX_COUNTER_SETS = 8  # counter sets per slice


def binary_si(n_bytes: int) -> str:
    """A byte count as Kubernetes prints a BinarySI quantity: the largest exact suffix."""
    for suffix, factor in (("Ti", 1 << 40), ("Gi", 1 << 30), ("Mi", 1 << 20), ("Ki", 1 << 10)):
        if n_bytes and n_bytes % factor == 0:
            return f"{n_bytes // factor}{suffix}"
    return str(n_bytes)


def _digest(seed: str) -> str:
    return hashlib.sha256(seed.encode()).hexdigest()


def nvidia_uuid(prefix: str, seed: str) -> str:
    """`GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx` (or `MIG-…`), a pure function of `seed`."""
    h = _digest(seed)
    return f"{prefix}-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def _capacity(values: dict[str, int | str]) -> dict[str, dict[str, str]]:
    return {k: {"value": str(v)} for k, v in values.items()}


def _counters(values: dict[str, int | str]) -> dict[str, dict[str, str]]:
    # Counter names are the capacity names DNS-ified: copyEngines -> copy-engines.
    out = {}
    for name, value in values.items():
        dns = "".join(f"-{c.lower()}" if c.isupper() else c for c in name)
        out[dns] = {"value": str(value)}
    return out


def _full_capacities(model: GpuModel) -> dict[str, int]:
    """What the whole GPU has: the largest value of each dimension over its MIG profiles."""
    keys = model.mig_profiles[0].capacities().keys()
    return {k: max(p.capacities()[k] for p in model.mig_profiles) for k in keys}


def gpu_devices(
    model: GpuModel, minor: int, uuid: str, *, mig: bool = True
) -> tuple[list[dict], dict | None]:
    """The devices of one GPU (whole GPU first, then its MIG partitions) and its counter set
    (None when MIG is off or the model has no MIG profiles)."""
    bus_id = f"0000:{(model.bus_base + minor) // 32:02x}:{(model.bus_base + minor) % 32:02x}.0"
    common: dict[str, dict] = {
        "productName": {"string": model.product_name},
        "brand": {"string": model.brand},
        "architecture": {"string": model.architecture},
        "cudaComputeCapability": {"version": model.compute_capability},
        "driverVersion": {"version": model.driver_version},
        "cudaDriverVersion": {"version": model.cuda_driver_version},
    }
    if model.addressing_mode:
        common["addressingMode"] = {"string": model.addressing_mode}
    common[PCI_BUS_ID] = {"string": bus_id}
    common[NUMA_NODE] = {"int": minor // GPUS_PER_NUMA_NODE}
    whole: dict = {
        "name": f"gpu-{minor}",
        "attributes": {"type": {"string": "gpu"}, "uuid": {"string": uuid}, **common},
        "capacity": _capacity({"memory": model.memory}),
    }
    if not (mig and model.mig_profiles):
        return [whole], None
    counter_set = f"gpu-{minor}-counter-set"
    full = _full_capacities(model)
    slices = {f"memory-slice-{i}": {"value": "1"} for i in range(model.memory_slices)}
    shared = {"name": counter_set, "counters": _counters({**full, "memory": model.memory}) | slices}
    whole["capacity"] = _capacity({**full, "memory": model.memory})
    whole["consumesCounters"] = [{"counterSet": counter_set, "counters": shared["counters"]}]
    devices = [whole]
    for profile in model.mig_profiles:
        caps = profile.capacities()
        memory = binary_si(profile.memory_mib << 20)
        for start in profile.starts:
            name = profile.device_name(minor, start)
            used = {f"memory-slice-{i}": {"value": "1"} for i in range(start, start + profile.size)}
            devices.append(
                {
                    "name": name,
                    "attributes": {
                        "type": {"string": "mig"},
                        "uuid": {"string": nvidia_uuid("MIG", f"{uuid}/{name}")},
                        "parentUUID": {"string": uuid},
                        "profile": {"string": profile.name},
                        **common,
                    },
                    "capacity": _capacity({**caps, "memory": memory})
                    | {
                        f"memorySlice{i}": {"value": "1"}
                        for i in range(start, start + profile.size)
                    },
                    "consumesCounters": [
                        {
                            "counterSet": counter_set,
                            "counters": _counters({**caps, "memory": memory}) | used,
                        }
                    ],
                }
            )
    return devices, shared


def nic_device(index: int) -> dict:
    """One NIC of the CNI DRA driver: shareable, with consumable bandwidth and virtual devices.

    `maxVirtualDevices` is the real driver's capacity (fixture cni-dra-driver-demo); `bandwidth`
    is a consumable capacity with a `validRange` policy, so allocations carry
    `consumedCapacity` rounded the way kube-scheduler rounds them."""
    return {
        "name": f"eth{index}",
        "allowMultipleAllocations": True,
        "attributes": {
            f"{NIC_DRIVER}/interfaceName": {"string": f"eth{index}"},
            f"{NIC_DRIVER}/speed": {"string": "100G"},
        },
        "capacity": {
            f"{NIC_DRIVER}/maxVirtualDevices": {
                "value": "65535",
                "requestPolicy": {"default": "1", "validValues": ["1"]},
            },
            f"{NIC_DRIVER}/bandwidth": {
                "value": "100G",
                "requestPolicy": {
                    "default": "1G",
                    "validRange": {"min": "1G", "max": "100G", "step": "1G"},
                },
            },
        },
    }


@dataclass(frozen=True)
class DeviceGroup:
    """`count` devices of one profile on a node (a scenario's `devices:` entry)."""

    profile: str
    count: int
    mig: bool = True
    # NVIDIA ConsumableShares (`--consumable-shares`): None/disabled, memory, unlimited or N.
    shares: str | None = None


def _chunks(items: Sequence, size: int) -> list[Sequence]:
    return [items[i : i + size] for i in range(0, len(items), size)] or [items[:0]]


def _slice(node: str, node_uid: str, driver: str, body: dict) -> dict:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {
            "generateName": f"{node}-{driver}-",
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "kind": "Node",
                    "name": node,
                    "uid": node_uid,
                    "controller": True,
                }
            ],
        },
        "spec": {"driver": driver, "nodeName": node, **body},
    }


def node_slices(
    node: str,
    node_uid: str,
    groups: Iterable[DeviceGroup],
    *,
    seed: str,
    real_uuid: bool = False,
    generation: int = 1,
) -> list[dict]:
    """Every ResourceSlice the drivers publish for `node` (pool name = node name).

    `real_uuid=True` gives the first GPU of a model with a captured uuid that uuid."""
    gpus: list[tuple[list[dict], dict | None]] = []
    nics: list[dict] = []
    minor = 0
    for group in groups:
        if group.profile == NIC_PROFILE:
            nics.extend(nic_device(len(nics) + i) for i in range(group.count))
            continue
        model = GPU_MODELS[group.profile]
        for _ in range(group.count):
            uuid = nvidia_uuid("GPU", f"{seed}/{node}/{minor}")
            if real_uuid and model.real_uuid:
                uuid, real_uuid = model.real_uuid, False
            devices, counters = gpu_devices(model, minor, uuid, mig=group.mig)
            gpus.append(([apply_shares(d, group.shares) for d in devices], counters))
            minor += 1
    out: list[dict] = []
    if gpus:
        out.extend(_gpu_pool(node, node_uid, gpus, generation))
    if nics:
        bodies = [{"devices": list(chunk)} for chunk in _chunks(nics, MAX_DEVICES)]
        out.extend(_pool(node, node_uid, NIC_DRIVER, bodies, generation))
    return out


def _gpu_pool(
    node: str, node_uid: str, gpus: list[tuple[list[dict], dict | None]], generation: int
) -> list[dict]:
    partitioned = any(counters for _, counters in gpus)
    limit = MAX_DEVICES_WITH_COUNTERS if partitioned else MAX_DEVICES
    bodies: list[dict] = []
    counter_sets = [counters for _, counters in gpus if counters]
    for chunk in _chunks(counter_sets, MAX_COUNTER_SETS) if counter_sets else []:
        bodies.append({"sharedCounters": list(chunk)})
    # Keep the devices of one GPU together in one slice, as the driver does.
    current: list[dict] = []
    for devices, _ in gpus:
        if current and len(current) + len(devices) > limit:
            bodies.append({"devices": current})
            current = []
        current.extend(devices)
    if current:
        bodies.append({"devices": current})
    return _pool(node, node_uid, GPU_DRIVER, bodies, generation)


def _pool(node: str, node_uid: str, driver: str, bodies: list[dict], generation: int) -> list[dict]:
    pool = {"name": node, "generation": generation, "resourceSliceCount": len(bodies)}
    return [_slice(node, node_uid, driver, {"pool": dict(pool), **body}) for body in bodies]


# ---- DeviceClasses, as the drivers' Helm charts install them -----------------------------------

# NVIDIA chart templates deployments/helm/dra-driver-nvidia-gpu/templates/deviceclass-*.yaml
# (SOURCES.md) and the CNI DRA driver's demo class (fixture cni-dra-driver-demo.DeviceClass.yaml).
DEVICE_CLASS_SELECTORS = {
    "gpu.nvidia.com": "device.driver == 'gpu.nvidia.com' && "
    "device.attributes['gpu.nvidia.com'].type == 'gpu'",
    "mig.nvidia.com": "device.driver == 'gpu.nvidia.com' && "
    "device.attributes['gpu.nvidia.com'].type == 'mig'",
    "vfio.gpu.nvidia.com": "device.driver == 'gpu.nvidia.com' && "
    "device.attributes['gpu.nvidia.com'].type == 'vfio'",
    "network-interface": 'device.driver == "cni.dra.networking.x-k8s.io"',
}


def device_class(name: str, *, extended_resource_name: str | None = None) -> dict:
    """One of the drivers' DeviceClasses (`DEVICE_CLASS_SELECTORS`), as a v1 object."""
    spec: dict = {"selectors": [{"cel": {"expression": DEVICE_CLASS_SELECTORS[name]}}]}
    if extended_resource_name:
        spec["extendedResourceName"] = extended_resource_name
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": spec,
    }
