"""Fragmentation of partitionable GPUs: memory stranded in partition layouts, and the largest
partition that could be placed now — per GPU, and per node and DeviceClass.

Over the partitionable devices of a cluster (KEP-4815: the devices consuming counters of one
shared counter set are one GPU, `service.model.physical`), from what the cluster holds now (the
allocator's `Ledger` over the model's holds):

* a device is **placeable** when the allocator would give it to a one-device request of its
  class now: `candidates.fit` (not held; every counter it consumes still free in its counter
  set; its compatibility groups agree with its held siblings', KEP-5963; no untolerated
  NoSchedule/NoExecute taint — the request tolerates nothing). The very function
  `placement.allocate` calls per device, so the answer cannot disagree with `plan` or
  `explainClaim`;
* a device's **profile** is its `profile` attribute (the NVIDIA driver's `3g.71gb`), else
  `whole` for the whole GPU, else its name; profiles are ordered by size — the share of the GPU
  the device takes (`physical.Unit.weight`, the GPU's memory slices), then the `memory`
  counter it consumes, then the name;
* a GPU's **memory** is its counter set's `memory` counter (total, and free: the total minus
  what its allocated devices consume); a GPU whose set has no `memory` counter reports none;
* **stranded memory** (stated simply): the free memory of GPUs that are partly allocated (some
  counter of the set is in use and some still free: a GPU held whole is not) — memory only
  partitions can reach, in whatever layout the placements already made allow;
* per node and class: the GPUs with a device the class selects, how many of them are partly
  allocated and how many can take one of the class's devices now, their free and stranded
  memory, the **largest placeable** profile, the profiles the class has on the node that no GPU
  can take now (largest first), and a sentence ("3 of 4 GPUs can take a mig.nvidia.com device,
  the largest a 2g.35gb; none can take a 3g.71gb").

Static MIG devices (no counters: a fixed layout) and devices of no counter set are not
partition layouts and are left out. A class whose selector fails to evaluate on a device does
not select it (as `DeviceClass.devices` reads).

Promises: pure; never writes the ledger; each device is fitted once whatever the classes;
O(partitionable devices) plus what `fit` costs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction

from dra_mirror.service.diagnostics.candidates import Alternative, fit
from dra_mirror.service.diagnostics.cel import SelectorError, compile_selector
from dra_mirror.service.diagnostics.ledger import CounterSetKey, Ledger
from dra_mirror.service.model import physical
from dra_mirror.service.model.inventory import amount as quantity
from dra_mirror.service.model.records import DeviceClassRecord, DeviceEntry, DeviceKey

__all__ = ["GpuFragments", "NodeFragmentation", "fragmentation", "profile_of"]

MEMORY = "memory"
WHOLE = "whole"


@dataclass
class GpuFragments:
    """One partitionable GPU, as one class sees it."""

    physical: str  # the GPU (its uuid, else driver/pool/counter set)
    node: str | None
    pool: str
    memory: float | None  # bytes: the counter set's `memory` counter
    free_memory: float | None  # of it, not consumed by allocated devices
    partly_allocated: bool  # some counter of its set is in use
    placeable: list[str] = field(default_factory=list)  # profiles of the class, largest first
    largest_placeable: str | None = None


@dataclass
class NodeFragmentation:
    """A node's partitionable GPUs, for one DeviceClass."""

    cluster: str
    node: str | None
    class_name: str
    gpus: int  # GPUs with a device the class selects
    gpus_partly_allocated: int
    gpus_placeable: int  # GPUs that can take one of the class's devices now
    free_memory: float  # bytes, over those GPUs (those with a `memory` counter)
    stranded_memory: float  # bytes: free memory of the partly allocated ones
    largest_placeable: str | None
    unplaceable: list[str]  # the class's profiles on the node no GPU can take now, largest first
    summary: str
    gpu_details: list[GpuFragments] = field(default_factory=list)


def profile_of(entry: DeviceEntry, unit: physical.Unit) -> str:
    """The partition profile a device is (see the module docstring)."""
    for name, attribute in entry.device.attributes.items():
        if name.rsplit("/", 1)[-1] == "profile" and isinstance(attribute.value, str):
            return attribute.value
    return WHOLE if unit.whole else entry.key.device


def _memory(counters: Mapping[str, Fraction]) -> Fraction | None:
    for name, value in counters.items():
        if name.rsplit("/", 1)[-1] == MEMORY:
            return value
    return None


def _alternative(class_name: str) -> Alternative:
    return Alternative(class_name, class_name, class_name, (), "ExactCount", 1, {}, ())


@dataclass
class _Gpu:
    physical: str
    node: str | None
    pool: str
    memory: Fraction | None
    free: Fraction | None
    partly: bool
    devices: list[tuple[DeviceEntry, str, tuple[Fraction, Fraction, str], bool]]


def _gpus(devices: Iterable[DeviceEntry], ledger: Ledger) -> dict[DeviceKey, _Gpu]:
    """Each partitionable device -> its GPU (with every device's profile, size and whether it
    is placeable now)."""
    pools: dict[tuple[str, str], list[DeviceEntry]] = {}
    for entry in devices:
        if entry.device.consumes_counters:
            pools.setdefault((entry.key.driver, entry.key.pool), []).append(entry)
    found: dict[DeviceKey, _Gpu] = {}
    parsed: dict[str, Fraction] = {}  # quantities repeat ("1", "16"): each parsed once

    def amount(text: str) -> Fraction:
        value = parsed.get(text)
        if value is None:
            value = parsed[text] = quantity(text)
        return value

    kept = getattr(ledger.base, "unit", None)  # the index keeps each device's unit
    for (driver, pool_name), members in sorted(pools.items()):
        pool = ledger.base.pool(driver, pool_name)
        units: Mapping[DeviceKey, physical.Unit] = (
            {k: kept(k) for k in pool.devices}
            if kept is not None
            else physical.pool_units(pool.devices.values(), pool.counter_sets)
        )
        totals = {
            cs.name: {n: amount(v) for n, v in cs.counters.items()} for cs in pool.counter_sets
        }
        gpus: dict[str, _Gpu] = {}
        for entry in sorted(members, key=lambda e: e.key):
            unit = units.get(entry.key)
            use = entry.device.consumes_counters[0]
            total = totals.get(use.counter_set)
            if unit is None or total is None:
                continue  # not in the pool's valid generation, or its set is not published
            gpu = gpus.get(unit.physical)
            if gpu is None:
                key = CounterSetKey(entry.key.cluster, driver, pool_name, use.counter_set)
                free = ledger.counters_free(key) or {}
                left = [free.get(n, Fraction(0)) for n in total]
                partly = any(a < v for a, v in zip(left, total.values(), strict=True)) and any(
                    a > 0 for a in left
                )
                memory = _memory(total)
                gpu = gpus[unit.physical] = _Gpu(
                    unit.physical, entry.node, pool_name, memory, _memory(free), partly, []
                )
            need = {n: amount(v) for n, v in use.counters.items()}
            profile = profile_of(entry, unit)
            size = (unit.weight, _memory(need) or Fraction(0), profile)
            reason, _ = fit(entry, _alternative(""), ledger)
            gpu.devices.append((entry, profile, size, reason is None))
            found[entry.key] = gpu
    return found


def _selected(device_class: DeviceClassRecord, entries: list[DeviceEntry]) -> set[DeviceKey]:
    kept = entries
    for expression in device_class.selectors:
        try:
            kept, _failed = compile_selector(expression).select(kept)
        except SelectorError:
            return set()
    return {e.key for e in kept}


def _bytes(value: Fraction | None) -> float | None:
    return None if value is None else float(value)


def fragmentation(
    cluster: str,
    devices: Iterable[DeviceEntry],
    ledger: Ledger,
    classes: Mapping[str, DeviceClassRecord],
    *,
    node: str | None = None,
    class_name: str | None = None,
) -> list[NodeFragmentation]:
    """Rows per node and class (of `node`, of `class_name` when given), sorted by node, then
    class; a class selecting no partitionable device of a node has no row for it."""
    entries = [e for e in devices if node is None or e.node == node]
    gpu_of = _gpus(entries, ledger)
    partitionable = [e for e in entries if e.key in gpu_of]
    rows: list[NodeFragmentation] = []
    for name in sorted(classes):
        if class_name is not None and name != class_name:
            continue
        selected = _selected(classes[name], partitionable)
        by_node: dict[str | None, dict[str, _Gpu]] = {}
        for key in sorted(selected):
            gpu = gpu_of[key]
            by_node.setdefault(gpu.node, {})[gpu.physical] = gpu
        for where, gpus in sorted(by_node.items(), key=lambda item: item[0] or ""):
            rows.append(_row(cluster, where, name, list(gpus.values()), selected))
    return rows


def _row(
    cluster: str, node: str | None, class_name: str, gpus: list[_Gpu], selected: set[DeviceKey]
) -> NodeFragmentation:
    details: list[GpuFragments] = []
    sizes: dict[str, tuple[Fraction, Fraction, str]] = {}
    placeable_anywhere: set[str] = set()
    for gpu in gpus:
        mine = [(p, s, ok) for e, p, s, ok in gpu.devices if e.key in selected]
        for profile, size, _ in mine:
            sizes[profile] = max(sizes.get(profile, size), size)
        fits = sorted({(s, p) for p, s, ok in mine if ok}, reverse=True)
        profiles = list(dict.fromkeys(p for _, p in fits))
        placeable_anywhere.update(profiles)
        details.append(
            GpuFragments(
                physical=gpu.physical,
                node=gpu.node,
                pool=gpu.pool,
                memory=_bytes(gpu.memory),
                free_memory=_bytes(gpu.free),
                partly_allocated=gpu.partly,
                placeable=profiles,
                largest_placeable=profiles[0] if profiles else None,
            )
        )
    order = sorted(sizes, key=lambda p: sizes[p], reverse=True)
    largest = next((p for p in order if p in placeable_anywhere), None)
    unplaceable = [p for p in order if p not in placeable_anywhere]
    free = sum((g.free for g in gpus if g.free is not None), Fraction(0))
    stranded = sum((g.free for g in gpus if g.partly and g.free is not None), Fraction(0))
    row = NodeFragmentation(
        cluster=cluster,
        node=node,
        class_name=class_name,
        gpus=len(gpus),
        gpus_partly_allocated=sum(g.partly for g in gpus),
        gpus_placeable=sum(bool(d.placeable) for d in details),
        free_memory=float(free),
        stranded_memory=float(stranded),
        largest_placeable=largest,
        unplaceable=unplaceable,
        summary="",
        gpu_details=details,
    )
    bigger = [p for p in unplaceable if largest is None or sizes[p] > sizes[largest]]
    row.summary = _summary(row, bigger[-1] if bigger else None)
    return row


def _summary(row: NodeFragmentation, next_up: str | None) -> str:
    """ "3 of 4 GPUs can take a mig.nvidia.com device, the largest a 2g.35gb; none can take a
    3g.71gb"."""
    gpus = f"{row.gpus_placeable} of {row.gpus} GPU{'s' if row.gpus != 1 else ''}"
    if row.largest_placeable is None:
        text = f"none of {row.gpus} GPU{'s' if row.gpus != 1 else ''} can take a "
        return text + f"{row.class_name} device now"
    text = f"{gpus} can take a {row.class_name} device, the largest a {row.largest_placeable}"
    return text + (f"; none can take a {next_up}" if next_up else "")
