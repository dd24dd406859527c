"""Five-minute utilisation buckets per device: what the history records of dcgm's readings.

The readings of a bucket query (`service.utilization.source.PrometheusSource.buckets`) hold,
per instrument and per bucket, the mean of each gauge over the bucket (`avg_over_time`), the
counter's increase over it (`increase` of `DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION`, mJ) and the
number of busy samples Prometheus held (`SAMPLES`, `count_over_time`), each stamped at the
bucket's end. `buckets(facts, readings)` joins them to the devices with the one join of
`service.model.utilization` — whole GPUs, MIG devices and partitioned GPUs alike — and says,
per device and bucket start, its mean busy (percent), its samples, its energy (J: its weight's
part of its GPU's, as the join attributes power) and its GPU-equivalent weight.

Promises: pure; a device without readings in a bucket has no bucket (unknown, never 0 %);
`bucket_span(now, lag)` is the end of the last bucket complete `lag` seconds ago.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from dra_mirror.service.model.dcgm import Readings
from dra_mirror.service.model.identity import DeviceKey
from dra_mirror.service.model.utilization import DeviceFacts, join

BUCKET_SECONDS = 300
SAMPLES = "samples"  # per bucket: how many busy samples Prometheus held (count_over_time)
MJ_PER_J = 1000.0


@dataclass(frozen=True)
class Bucket:
    """One device over one bucket [start, start + BUCKET_SECONDS)."""

    key: DeviceKey
    uuid: str | None
    gpu_instance: str | None  # the GPU instance a MIG device was read from
    start: int  # unix seconds, a multiple of BUCKET_SECONDS
    busy: float  # percent, the bucket's mean
    samples: int
    energy_j: float | None  # None: no energy counter read in the bucket
    equivalents: float  # the device's GPU-equivalents (its part of its GPU's energy)


def last_complete_end(now: float, lag: float) -> int:
    """The end of the latest bucket that was complete `lag` seconds before `now`."""
    return int((now - lag) // BUCKET_SECONDS) * BUCKET_SECONDS


def buckets(facts: Iterable[DeviceFacts], readings: Readings) -> list[Bucket]:
    """Every (device, bucket) with a busy reading, in device then time order."""
    facts = list(facts)
    by_key = {f.key: f for f in facts}
    out: list[Bucket] = []
    for key, use in sorted(join(facts, readings).items()):
        if not use.known:
            continue
        energy = dict(use.energy_points)
        counts = [dict(readings[i].of(SAMPLES)) for i in use.instruments if i in readings]
        instance = use.instruments[0].instance if len(use.instruments) == 1 else None
        for at, busy in use.busy_points:
            mj = energy.get(at)
            found = [c[at] for c in counts if at in c]
            out.append(
                Bucket(
                    key=key,
                    uuid=by_key[key].uuid,
                    gpu_instance=instance,
                    start=int(at) - BUCKET_SECONDS,
                    busy=busy,
                    samples=int(min(found)) if found else 0,
                    energy_j=mj * use.energy_weight / MJ_PER_J if mj is not None else None,
                    equivalents=by_key[key].weight,
                )
            )
    return out
