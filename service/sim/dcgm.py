"""The simulated dcgm-exporter: one per node, reading what the node's GPUs are doing.

NVIDIA's dcgm-exporter runs on every GPU node (a DaemonSet of the GPU operator, on nodes
labelled `nvidia.com/gpu.deploy.dcgm-exporter` other than "false") and serves
`/metrics` in the Prometheus text format. The simulator serves one per node at
`/sim/dcgm/nodes/<node>/metrics` and lists them for Prometheus' HTTP service discovery at
`/sim/dcgm/targets` (`__metrics_path__` per node).

The shape is the exporter's own (NVIDIA/dcgm-exporter):

* metric names, types and help texts from `etc/default-counters.csv` and
  `etc/dcp-metrics-included.csv` (`DCGM_FI_PROF_GR_ENGINE_ACTIVE`);
* the label set of `internal/pkg/rendermetrics/render_metrics.go`'s GPU template:
  `gpu`, `UUID`, `pci_bus_id`, `device`, `modelName`, then `GPU_I_PROFILE` and `GPU_I_ID`
  for a MIG instance, then `hostname` (named `Hostname` before release 4.5; the mirror's
  label mapping reads either);
* in DRA mode (`KUBERNETES_ENABLE_DRA`, `internal/pkg/transformation/kubernetes.go`), each
  series is copied once per pod using the device, adding `pod`, `namespace`, `container`,
  `dra_claim_name`, `dra_claim_namespace`, `dra_driver_name`, `dra_pool_name`,
  `dra_device_name`, and for a MIG device `dra_mig_profile` and `dra_mig_device_uuid`
  (`transformation/dra.go`: a MIG device's series carry its parent GPU's `UUID`).

What the GPUs do comes from the pods: a Running pod's annotation `BUSY_ANNOTATION`
(percent, default 0; a scenario workload's `gpuBusy:` sets it) is how busy it keeps every
GPU or MIG instance it uses; a device shared by several pods is as busy as their sum (at
most 100). A GPU with MIG instances reports `DCGM_FI_DEV_GPU_UTIL` 0, as DCGM does in MIG
mode: only the instances' `DCGM_FI_PROF_GR_ENGINE_ACTIVE` say how busy it is. Power follows
utilisation between the model's idle and maximum draw; `DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION`
(mJ) integrates it over the simulator's clock, starting at 0 when the exporter starts.

Promises: pure reads of the store; values are a function of the store and the clock.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from dra_mirror.service.model.quantity import parse_quantity
from dra_mirror.service.sim.store import ClusterStore

BUSY_ANNOTATION = "sim.dra-mirror.io/gpu-busy"
DEPLOY_LABEL = "nvidia.com/gpu.deploy.dcgm-exporter"
GPU_DRIVER = "gpu.nvidia.com"
PCI_BUS_ID = "resource.kubernetes.io/pciBusID"

# (name, type, help) as etc/default-counters.csv and etc/dcp-metrics-included.csv write them.
COUNTERS = (
    ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %)."),
    ("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB)."),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W)."),
    (
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
        "counter",
        "Total energy consumption since boot (in mJ).",
    ),
    ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge", "Ratio of time the graphics engine is active."),
)
# Which counters a MIG instance has (DCGM answers the device-level ones for the GPU only).
INSTANCE_COUNTERS = ("DCGM_FI_DEV_FB_USED", "DCGM_FI_PROF_GR_ENGINE_ACTIVE")

# Idle and maximum board power (W). The H200's from ../shared/hardware/h200/nvidia-smi-q.txt
# (Instantaneous Power Draw of an idle GPU, Max Power Limit); the others their data sheets'.
POWER_WATTS = {
    "NVIDIA H200": (80.84, 700.0),
    "NVIDIA H100 80GB HBM3": (70.0, 700.0),
    "NVIDIA A100 80GB PCIe": (45.0, 300.0),
}
DEFAULT_POWER_WATTS = (50.0, 300.0)


@dataclass(frozen=True)
class Holder:
    """A Running pod using a device through a claim."""

    pod: str
    namespace: str
    claim: str
    claim_namespace: str
    busy: float  # percent


@dataclass
class Gpu:
    """One GPU of a node as the exporter sees it, with its MIG instances."""

    minor: int
    uuid: str
    pool: str
    name: str  # the DRA device name (gpu-N)
    model: str
    bus_id: str
    memory_mib: float
    holders: list[Holder] = field(default_factory=list)
    instances: list[Instance] = field(default_factory=list)

    def busy(self) -> float:
        """Percent of the whole GPU busy: its holders', or its instances' weighted by size."""
        if self.instances:
            total = sum(i.memory_mib for i in self.instances) or 1.0
            used = sum(i.busy() * i.memory_mib for i in self.instances)
            return used / max(total, self.memory_mib)
        return _busy(self.holders)

    def fb_used(self) -> float:
        if self.instances:
            return sum(i.fb_used() for i in self.instances)
        return _fb_used(self.memory_mib, self.holders)


@dataclass
class Instance:
    """A MIG instance: a DRA MIG device allocated to a claim."""

    name: str  # the DRA device name
    uuid: str
    profile: str
    instance_id: int
    memory_mib: float
    holders: list[Holder] = field(default_factory=list)

    def busy(self) -> float:
        return _busy(self.holders)

    def fb_used(self) -> float:
        return _fb_used(self.memory_mib, self.holders)


def _busy(holders: Iterable[Holder]) -> float:
    return min(100.0, sum(h.busy for h in holders))


def _fb_used(memory_mib: float, holders: list[Holder]) -> float:
    # a process holds memory as soon as it runs; more as it works
    if not holders:
        return 0.0
    return round(memory_mib * (0.1 + 0.8 * _busy(holders) / 100.0))


def pod_busy(pod: dict[str, Any]) -> float:
    """The percent a pod keeps its devices busy (its annotation; 0 when absent or unreadable)."""
    raw = ((pod.get("metadata") or {}).get("annotations") or {}).get(BUSY_ANNOTATION, "0")
    try:
        return max(0.0, min(100.0, float(raw)))
    except ValueError:
        return 0.0


def exporter_nodes(store: ClusterStore) -> list[str]:
    """The nodes running an exporter: GPU driver slices, and not labelled off."""
    with_gpus = {
        s["spec"].get("nodeName")
        for s in store.iter_objects("resourceslices")
        if s["spec"].get("driver") == GPU_DRIVER
    }
    out = []
    for node in store.iter_objects("nodes"):
        name = node["metadata"]["name"]
        labels = node["metadata"].get("labels") or {}
        if name in with_gpus and labels.get(DEPLOY_LABEL, "true") != "false":
            out.append(name)
    return sorted(out)


def node_gpus(store: ClusterStore, node: str) -> list[Gpu]:
    """The GPUs of `node` (from its driver's slices) with their holders and MIG instances."""
    gpus: dict[str, Gpu] = {}  # uuid -> gpu
    migs: dict[tuple[str, str], tuple[Gpu, dict]] = {}  # (pool, device) -> parent, device
    by_device: dict[tuple[str, str], Gpu] = {}
    for s in store.iter_objects("resourceslices"):
        spec = s["spec"]
        if spec.get("driver") != GPU_DRIVER or spec.get("nodeName") != node:
            continue
        pool = spec["pool"]["name"]
        for device in spec.get("devices") or []:
            attrs = device.get("attributes") or {}
            if _attr(attrs, "type") == "gpu" and _attr(attrs, "uuid"):
                gpu = Gpu(
                    minor=int(device["name"].rsplit("-", 1)[-1]),
                    uuid=_attr(attrs, "uuid"),
                    pool=pool,
                    name=device["name"],
                    model=_attr(attrs, "productName"),
                    bus_id=_dcgm_bus_id(_attr(attrs, PCI_BUS_ID)),
                    memory_mib=_mib(device),
                )
                gpus[gpu.uuid] = gpu
                by_device[(pool, gpu.name)] = gpu
    for s in store.iter_objects("resourceslices"):
        spec = s["spec"]
        if spec.get("driver") != GPU_DRIVER or spec.get("nodeName") != node:
            continue
        for device in spec.get("devices") or []:
            attrs = device.get("attributes") or {}
            parent = gpus.get(_attr(attrs, "parentUUID"))
            if _attr(attrs, "type") == "mig" and parent is not None:
                migs[(spec["pool"]["name"], device["name"])] = (parent, device)
    pods = {
        (p["metadata"].get("namespace"), p["metadata"]["name"]): p
        for p in store.iter_objects("pods")
        if (p.get("spec") or {}).get("nodeName") == node
        and (p.get("status") or {}).get("phase") == "Running"
    }
    instances: dict[tuple[str, str], Instance] = {}
    for claim in store.iter_objects("resourceclaims"):
        status = claim.get("status") or {}
        results = ((status.get("allocation") or {}).get("devices") or {}).get("results") or []
        namespace = claim["metadata"].get("namespace")
        holders = [
            Holder(ref["name"], namespace, claim["metadata"]["name"], namespace, pod_busy(pod))
            for ref in status.get("reservedFor") or []
            if ref.get("resource", "pods") == "pods"
            and (pod := pods.get((namespace, ref.get("name")))) is not None
        ]
        for result in results:
            if result.get("driver") != GPU_DRIVER:
                continue
            key = (result.get("pool", ""), result.get("device", ""))
            if key in by_device:
                by_device[key].holders.extend(holders)
            elif key in migs:
                parent, device = migs[key]
                instance = instances.get(key)
                if instance is None:
                    attrs = device.get("attributes") or {}
                    instance = Instance(
                        name=device["name"],
                        uuid=_attr(attrs, "uuid"),
                        profile=_attr(attrs, "profile"),
                        instance_id=int(device["name"].rsplit("-", 1)[-1]),
                        memory_mib=_mib(device),
                    )
                    instances[key] = instance
                    parent.instances.append(instance)
                instance.holders.extend(holders)
    for gpu in gpus.values():
        gpu.instances.sort(key=lambda i: i.instance_id)
    return sorted(gpus.values(), key=lambda g: g.minor)


def _attr(attrs: dict, name: str) -> str:
    value = attrs.get(name) or attrs.get(f"{GPU_DRIVER}/{name}") or {}
    return str(value.get("string") or "")


def _mib(device: dict) -> float:
    raw = ((device.get("capacity") or {}).get("memory") or {}).get("value", "0")
    return float(parse_quantity(raw) / (1 << 20))


def _dcgm_bus_id(bus_id: str) -> str:
    """`0000:00:06.0` as DCGM prints it: an 8-digit domain, upper case (`00000000:00:06.0`)."""
    if not bus_id:
        return ""
    domain, _, rest = bus_id.partition(":")
    return f"{domain.zfill(8)}:{rest}".upper()


class Exporters:
    """The exporters of one cluster; keeps each GPU's energy counter between scrapes."""

    def __init__(self, store: ClusterStore, *, clock: Callable[[], float] = time.monotonic):
        self.store, self.clock = store, clock
        self._energy: dict[str, tuple[float, float, float]] = {}  # uuid -> mJ, at, watts

    def nodes(self) -> list[str]:
        return exporter_nodes(self.store)

    def targets(self, address: str, cluster: str) -> list[dict[str, Any]]:
        """Prometheus HTTP service discovery: one target group per node's exporter."""
        return [
            {
                "targets": [address],
                "labels": {
                    "__metrics_path__": f"/sim/dcgm/nodes/{node}/metrics",
                    "node": node,
                    "cluster": cluster,
                },
            }
            for node in self.nodes()
        ]

    def metrics(self, node: str) -> str | None:
        """The exposition text of `node`'s exporter (None: no exporter there)."""
        if node not in self.nodes():
            return None
        return render(node, node_gpus(self.store, node), self._advance)

    def _advance(self, gpu: Gpu, watts: float) -> float:
        """The GPU's energy counter now (mJ): the power since the last read, integrated."""
        now = self.clock()
        mj, at, last_watts = self._energy.get(gpu.uuid, (0.0, now, watts))
        mj += last_watts * (now - at) * 1000.0
        self._energy[gpu.uuid] = (mj, now, watts)
        return mj


def power(gpu: Gpu) -> float:
    idle, peak = POWER_WATTS.get(gpu.model, DEFAULT_POWER_WATTS)
    return round(idle + (peak - idle) * gpu.busy() / 100.0, 3)


def render(node: str, gpus: list[Gpu], energy: Callable[[Gpu, float], float]) -> str:
    """The exposition text: `# HELP`/`# TYPE` then one line per series, counter by counter."""
    values: dict[str, list[str]] = {name: [] for name, _, _ in COUNTERS}
    for gpu in gpus:
        watts = power(gpu)
        whole = {
            "DCGM_FI_DEV_GPU_UTIL": 0.0 if gpu.instances else round(gpu.busy()),
            "DCGM_FI_DEV_FB_USED": gpu.fb_used(),
            "DCGM_FI_DEV_POWER_USAGE": watts,
            "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": round(energy(gpu, watts)),
        }
        if not gpu.instances:
            whole["DCGM_FI_PROF_GR_ENGINE_ACTIVE"] = round(gpu.busy() / 100.0, 6)
        base = _gpu_labels(gpu, node)
        for name, value in whole.items():
            for labels in _per_pod(base, gpu.holders, gpu.pool, gpu.name, None):
                values[name].append(_line(name, labels, value))
        for instance in gpu.instances:
            labels_i = _gpu_labels(gpu, node, instance)
            per = {
                "DCGM_FI_DEV_FB_USED": instance.fb_used(),
                "DCGM_FI_PROF_GR_ENGINE_ACTIVE": round(instance.busy() / 100.0, 6),
            }
            for name, value in per.items():
                for labels in _per_pod(
                    labels_i, instance.holders, gpu.pool, instance.name, instance
                ):
                    values[name].append(_line(name, labels, value))
    out = []
    for name, kind, help_text in COUNTERS:
        out.append(f"# HELP {name} {help_text}\n# TYPE {name} {kind}\n")
        out.extend(f"{line}\n" for line in values[name])
    return "".join(out)


def _gpu_labels(gpu: Gpu, node: str, instance: Instance | None = None) -> dict[str, str]:
    labels = {
        "gpu": str(gpu.minor),
        "UUID": gpu.uuid,
        "pci_bus_id": gpu.bus_id,
        "device": f"nvidia{gpu.minor}",
        "modelName": gpu.model,
    }
    if instance is not None:
        labels["GPU_I_PROFILE"] = instance.profile
        labels["GPU_I_ID"] = str(instance.instance_id)
    labels["hostname"] = node
    return labels


def _per_pod(
    base: dict[str, str],
    holders: list[Holder],
    pool: str,
    device: str,
    instance: Instance | None,
) -> Iterator[dict[str, str]]:
    """One label set per pod using the device (DRA mode), or the device's own when none."""
    if not holders:
        yield base
        return
    for h in holders:
        labels = {
            **base,
            "container": "main",
            "dra_claim_name": h.claim,
            "dra_claim_namespace": h.claim_namespace,
            "dra_device_name": device,
            "dra_driver_name": GPU_DRIVER,
        }
        if instance is not None:
            labels["dra_mig_device_uuid"] = instance.uuid
            labels["dra_mig_profile"] = instance.profile
        labels |= {"dra_pool_name": pool, "namespace": h.namespace, "pod": h.pod}
        yield labels


def _line(name: str, labels: dict[str, str], value: float) -> str:
    body = ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items())
    return f"{name}{{{body}}} {_number(value)}"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))
