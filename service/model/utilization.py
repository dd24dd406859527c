"""How busy a device is: dcgm-exporter's readings joined to the devices the mirror knows.

The rules, decided here once for every front end:

* **A whole GPU** is found by its `uuid` attribute: busy is `DCGM_FI_PROF_GR_ENGINE_ACTIVE`
  (x100) where the exporter has it, else `DCGM_FI_DEV_GPU_UTIL`.
* **A MIG device** is found by `dra_mig_device_uuid` (the exporter's DRA mode), else by the
  DRA device a series names (`dra_pool_name`/`dra_device_name`), else by its parent's uuid
  and its profile when one GPU instance of that profile runs there. Its busy is its GPU
  instance's `DCGM_FI_PROF_GR_ENGINE_ACTIVE`.
* **A whole GPU that is partitioned** (readings of GPU instances under its uuid) is as busy
  as its instances weighted by their share of the GPU (the model's GPU-equivalent weight,
  `service.model.physical`: memory slices for MIG partitions): DCGM reads 0 % for
  the GPU itself in MIG mode, which says nothing.
* **No readings → unknown** (`busy` None), never 0 %: a node without an exporter, or a
  device the exporter does not see.
* **Energy** is the increase of `DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION` (mJ) over the window,
  counter resets counted as Prometheus' `increase` counts them; a MIG device is given its
  weight's part of its GPU's energy.
* **Shared devices**: the busy is the device's; the question attributes it to every share.

`busy_below_since(points, threshold)` says since when the trailing run of points stayed
below a threshold (the "held, not busy since" of `service.questions.utilization`).

Promises: pure; every figure is a function of the readings and the device facts only.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from itertools import pairwise

from dra_mirror.service.model.dcgm import (
    FB_USED,
    GPU_UTIL,
    GR_ENGINE_ACTIVE,
    POWER_USAGE,
    TOTAL_ENERGY,
    Instrument,
    Point,
    Reading,
    Readings,
)
from dra_mirror.service.model.identity import DeviceKey
from dra_mirror.service.model.physical import Unit, pool_units
from dra_mirror.service.model.records import DeviceEntry

GPU_DOMAIN = "gpu.nvidia.com"
MJ_PER_KWH = 3.6e9


@dataclass(frozen=True)
class DeviceFacts:
    """What the join needs of a device the mirror knows."""

    key: DeviceKey
    uuid: str | None
    kind: str | None = None  # the driver's `type`: gpu, mig, …
    parent_uuid: str | None = None
    profile: str | None = None
    weight: float = 1.0  # GPU-equivalents of its physical GPU (`service.model.physical`)


def device_facts(entry: DeviceEntry, unit: Unit | None = None) -> DeviceFacts:
    """The facts of a device entry (attributes of the NVIDIA driver's domain); `unit` its
    physical unit (`physical.units_of`), whose weight a partition carries."""
    device = entry.device

    def text(name: str) -> str | None:
        attribute = device.attributes.get(f"{GPU_DOMAIN}/{name}")
        return str(attribute.value) if attribute is not None else None

    return DeviceFacts(
        key=entry.key,
        uuid=device.uuid,
        kind=text("type"),
        parent_uuid=text("parentUUID"),
        profile=text("profile"),
        weight=float(unit.weight) if unit is not None else 1.0,
    )


def weighed(entries: Iterable[DeviceEntry], readings: Readings) -> list[DeviceFacts]:
    """The facts of `entries`, the devices of each GPU read as partitioned (readings of its
    GPU instances) weighed by the model (`physical.pool_units` over that GPU's devices: a
    partition's share of its counter set); every other device weighs 1, unused."""
    entries = list(entries)
    facts = [device_facts(e) for e in entries]
    partitioned = {i.uuid for i in readings if i.instance is not None}
    if not partitioned:
        return facts
    groups: dict[str, list[int]] = {}
    for n, f in enumerate(facts):
        gpu = f.parent_uuid if f.kind == "mig" else f.uuid
        if gpu in partitioned:
            groups.setdefault(gpu, []).append(n)
    for members in groups.values():
        units = pool_units(entries[n] for n in members)
        for n in members:
            unit = units.get(entries[n].key)
            if unit is not None:
                facts[n] = replace(facts[n], weight=float(unit.weight))
    return facts


@dataclass
class Utilization:
    """One device over a window. `busy` None: unknown (no readings), never 0."""

    key: DeviceKey
    busy: float | None = None  # percent, mean over the window
    busy_points: list[Point] = field(default_factory=list)  # percent over time
    source: str | None = None  # gr-engine-active | gpu-util | gpu-instance | gpu-instances
    memory_used_mib: float | None = None  # the latest reading
    power_watts: float | None = None  # the latest reading (a MIG device: its weight's part)
    energy_kwh: float | None = None  # over the window (a MIG device: its weight's part)
    energy_points: list[Point] = field(default_factory=list)  # the counter (mJ), its GPU's
    energy_weight: float = 1.0  # the part of those that is this device's
    instruments: list[Instrument] = field(default_factory=list)  # what its busy was read from

    @property
    def known(self) -> bool:
        return self.busy is not None

    def energy_since(self, since: float) -> float | None:
        """kWh from `since` to the window's end (None: no counter readings then)."""
        points = [p for p in self.energy_points if p[0] >= since]
        if len(points) < 2:
            return None
        return increase(points) * self.energy_weight / MJ_PER_KWH


def mean(points: Sequence[Point]) -> float | None:
    return sum(v for _, v in points) / len(points) if points else None


def increase(points: Sequence[Point]) -> float:
    """A counter's increase over the points; a drop is a reset (counted from 0)."""
    total = 0.0
    for (_, before), (_, after) in pairwise(points):
        total += after - before if after >= before else after
    return total


def busy_below_since(points: Sequence[Point], threshold: float) -> float | None:
    """When the trailing run of points below `threshold` began (None: the last is not below)."""
    since = None
    for at, value in reversed(points):
        if value >= threshold:
            break
        since = at
    return since


def join(devices: Iterable[DeviceFacts], readings: Readings) -> dict[DeviceKey, Utilization]:
    """Each device's utilisation from the readings (see the rules above)."""
    facts = list(devices)
    instances = _instances_by_parent(readings)
    by_mig_uuid = {r.mig_uuid: (i, r) for i, r in readings.items() if r.mig_uuid}
    by_dra = {
        (r.dra_device[1], r.dra_device[2]): (i, r) for i, r in readings.items() if r.dra_device
    }
    mig_weight = {(f.parent_uuid, f.profile): f.weight for f in facts if f.kind == "mig"}
    out: dict[DeviceKey, Utilization] = {}
    for f in facts:
        if f.kind == "mig":
            found = by_mig_uuid.get(f.uuid or "") or by_dra.get((f.key.pool, f.key.device))
            if found is None:
                found = _only_instance(instances.get(f.parent_uuid or "", []), f.profile)
            out[f.key] = _instance(f.key, found[1] if found else None, readings, f, f.weight)
            out[f.key].instruments = [found[0]] if found else []
        elif f.uuid:
            parts = instances.get(f.uuid, [])
            if parts:
                weights = [mig_weight.get((f.uuid, r.profile), 0.0) for _, r in parts]
                out[f.key] = _partitioned(f.key, readings.get(Instrument(f.uuid)), parts, weights)
            else:
                out[f.key] = _whole(f.key, readings.get(Instrument(f.uuid)))
                if out[f.key].known:
                    out[f.key].instruments = [Instrument(f.uuid)]
        else:
            out[f.key] = Utilization(f.key)
    return out


def _instances_by_parent(readings: Readings) -> dict[str, list[tuple[Instrument, Reading]]]:
    out: dict[str, list[tuple[Instrument, Reading]]] = {}
    for instrument, reading in sorted(
        readings.items(), key=lambda item: (item[0].uuid, item[0].instance or "")
    ):
        if instrument.instance is not None:
            out.setdefault(instrument.uuid, []).append((instrument, reading))
    return out


def _only_instance(
    parts: list[tuple[Instrument, Reading]], profile: str | None
) -> tuple[Instrument, Reading] | None:
    same = [p for p in parts if p[1].profile == profile]
    return same[0] if len(same) == 1 else None


def _whole(key: DeviceKey, reading: Reading | None) -> Utilization:
    out = Utilization(key)
    if reading is None:
        return out
    active = reading.of(GR_ENGINE_ACTIVE)
    if active:
        out.busy_points, out.source = [(t, v * 100.0) for t, v in active], "gr-engine-active"
    elif reading.of(GPU_UTIL):
        out.busy_points, out.source = list(reading.of(GPU_UTIL)), "gpu-util"
    out.busy = mean(out.busy_points)
    _power(out, reading, 1.0)
    memory = reading.of(FB_USED)
    out.memory_used_mib = memory[-1][1] if memory else None
    return out


def _instance(
    key: DeviceKey, reading: Reading | None, readings: Readings, facts: DeviceFacts, weight: float
) -> Utilization:
    out = Utilization(key)
    if reading is None:
        return out
    out.busy_points = [(t, v * 100.0) for t, v in reading.of(GR_ENGINE_ACTIVE)]
    out.busy, out.source = mean(out.busy_points), "gpu-instance"
    memory = reading.of(FB_USED)
    out.memory_used_mib = memory[-1][1] if memory else None
    parent = readings.get(Instrument(facts.parent_uuid or ""))
    if parent is not None:
        _power(out, parent, weight)
    return out


def _partitioned(
    key: DeviceKey,
    reading: Reading | None,
    parts: list[tuple[Instrument, Reading]],
    weights: list[float],
) -> Utilization:
    out = Utilization(key, source="gpu-instances", instruments=[i for i, _ in parts])
    by_time: dict[float, float] = {}
    for (_, part), weight in zip(parts, weights, strict=True):
        for at, value in part.of(GR_ENGINE_ACTIVE):
            by_time[at] = by_time.get(at, 0.0) + value * 100.0 * weight
    out.busy_points = sorted(by_time.items())
    out.busy = mean(out.busy_points)
    used = [p.of(FB_USED)[-1][1] for _, p in parts if p.of(FB_USED)]
    out.memory_used_mib = sum(used) if used else None
    if reading is not None:
        _power(out, reading, 1.0)
    return out


def _power(out: Utilization, reading: Reading, weight: float) -> None:
    power = reading.of(POWER_USAGE)
    out.power_watts = power[-1][1] * weight if power else None
    energy = reading.of(TOTAL_ENERGY)
    out.energy_points, out.energy_weight = list(energy), weight
    out.energy_kwh = out.energy_since(float("-inf"))
