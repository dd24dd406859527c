"""dcgm-exporter's series, read into readings per GPU and per MIG instance.

dcgm-exporter (NVIDIA/dcgm-exporter, `internal/pkg/rendermetrics/render_metrics.go` and
`internal/pkg/transformation/kubernetes.go`) labels every series with the GPU's `UUID`; a
MIG instance's series carry its parent GPU's `UUID` with `GPU_I_ID` and `GPU_I_PROFILE`. In
DRA mode each series is copied once per pod using the device, with `dra_claim_*`,
`dra_driver_name`, `dra_pool_name`, `dra_device_name` and, for a MIG device,
`dra_mig_device_uuid`. Those copies carry the same value: they are one reading, not several.

`readings(series, labels)` folds the series of every metric into one `Readings` entry per
instrument — a whole GPU `(UUID, None)` or a GPU instance `(UUID, GPU_I_ID)` — keeping, per
timestamp, the highest value among copies, and remembering the MIG device uuid and the DRA
device a copy names. `LabelNames` says which label holds what (the exporter's names by
default; `hostname` was `Hostname` before release 4.5).

Promises: pure; a series without a uuid label is ignored; values that are not finite are
dropped.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"  # percent, whole GPUs only (0 in MIG mode)
GR_ENGINE_ACTIVE = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"  # ratio 0-1, GPUs and GPU instances
FB_USED = "DCGM_FI_DEV_FB_USED"  # MiB
POWER_USAGE = "DCGM_FI_DEV_POWER_USAGE"  # W
TOTAL_ENERGY = "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"  # mJ since boot, a counter
METRICS = (GPU_UTIL, GR_ENGINE_ACTIVE, FB_USED, POWER_USAGE, TOTAL_ENERGY)

Point = tuple[float, float]  # (unix seconds, value)


class ReadingsUnavailable(Exception):
    """A source could not give the readings asked for (its adapter says why)."""


@dataclass(frozen=True)
class LabelNames:
    """Which label of a series holds what; the exporter's own names by default."""

    uuid: str = "UUID"
    gpu_instance: str = "GPU_I_ID"
    gpu_profile: str = "GPU_I_PROFILE"
    mig_device_uuid: str = "dra_mig_device_uuid"
    driver: str = "dra_driver_name"
    pool: str = "dra_pool_name"
    device: str = "dra_device_name"

    def identity(self) -> tuple[str, ...]:
        """The labels that tell readings apart (what a query may aggregate by)."""
        return (
            self.uuid,
            self.gpu_instance,
            self.gpu_profile,
            self.mig_device_uuid,
            self.driver,
            self.pool,
            self.device,
        )


@dataclass(frozen=True)
class Instrument:
    """What a reading measures: a whole GPU (`instance` None) or one of its GPU instances."""

    uuid: str
    instance: str | None = None


@dataclass
class Reading:
    """Every metric's points for one instrument, in time order."""

    profile: str | None = None  # GPU_I_PROFILE of an instance
    mig_uuid: str | None = None  # dra_mig_device_uuid, when a copy carried it
    dra_device: tuple[str, str, str] | None = None  # (driver, pool, device) a copy named
    points: dict[str, list[Point]] = field(default_factory=dict)  # metric -> points

    def of(self, metric: str) -> list[Point]:
        return self.points.get(metric, [])


Readings = dict[Instrument, Reading]
Series = tuple[Mapping[str, str], Sequence[Point]]


def readings(series: Mapping[str, Iterable[Series]], labels: LabelNames | None = None) -> Readings:
    """Every metric's series (metric -> (labels, points)) folded per instrument."""
    names = labels or LabelNames()
    merged: dict[Instrument, dict[str, dict[float, float]]] = {}
    out: Readings = {}
    for metric, items in series.items():
        for labelset, points in items:
            uuid = labelset.get(names.uuid)
            if not uuid:
                continue
            instance = labelset.get(names.gpu_instance) or None
            key = Instrument(uuid, instance)
            reading = out.setdefault(key, Reading())
            reading.profile = reading.profile or labelset.get(names.gpu_profile) or None
            reading.mig_uuid = reading.mig_uuid or labelset.get(names.mig_device_uuid) or None
            pool, device = labelset.get(names.pool), labelset.get(names.device)
            if pool and device and reading.dra_device is None:
                reading.dra_device = (labelset.get(names.driver, ""), pool, device)
            by_time = merged.setdefault(key, {}).setdefault(metric, {})
            for at, value in points:
                if math.isfinite(value):
                    # copies of one reading (one per pod) carry one value: keep the highest
                    by_time[at] = max(value, by_time.get(at, value))
    for key, metrics in merged.items():
        out[key].points = {m: sorted(by_time.items()) for m, by_time in metrics.items()}
    return out
