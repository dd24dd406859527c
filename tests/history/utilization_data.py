"""Utilisation buckets for the history tests: a fake bucket source over per-bucket values,
GPU device entries, and rows written straight into `allocations` and `utilization_buckets`."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import insert
from sqlalchemy.ext.asyncio import AsyncEngine

from dra_mirror.service.history import partitions
from dra_mirror.service.history.models import AllocationInterval, UtilizationBucket
from dra_mirror.service.model.dcgm import GR_ENGINE_ACTIVE, TOTAL_ENERGY, Readings, readings
from dra_mirror.service.model.identity import DeviceKey
from dra_mirror.service.model.physical import GPU
from dra_mirror.service.model.records import DeviceEntry
from dra_mirror.service.model.utilization_buckets import BUCKET_SECONDS, SAMPLES
from dra_mirror.service.utilization.prometheus import PrometheusUnreachable
from tests.model.builders import DRIVER, device


def gpu(cluster: str, name: str, uuid: str, pool: str = "node-1") -> DeviceEntry:
    return DeviceEntry(
        key=DeviceKey(cluster, DRIVER, pool, name), device=device(name, uuid=uuid), slice=None,
        node=pool,
    )  # fmt: skip


class FakeBuckets:
    """A `BucketSource`: `values[(uuid, bucket start)] = (busy ratio, energy mJ)`, answered
    for the buckets asked, stamped at their ends, as Prometheus' bucket queries would."""

    def __init__(self, clusters: tuple[str, ...] = ("east",)) -> None:
        self.values: dict[tuple[str, int], tuple[float, float | None]] = {}
        self.clusters = clusters
        self.down = False
        self.asked: list[tuple[str, int, int]] = []

    def covers(self, cluster: str) -> bool:
        return cluster in self.clusters

    async def buckets(self, cluster: str, start: int, end: int) -> Readings:
        self.asked.append((cluster, start, end))
        if self.down:
            raise PrometheusUnreachable("Prometheus http://prom: connection refused")
        series: dict[str, list] = {GR_ENGINE_ACTIVE: [], TOTAL_ENERGY: [], SAMPLES: []}
        for (uuid, at), (busy, energy) in sorted(self.values.items()):
            if start <= at < end:
                stamp = float(at + BUCKET_SECONDS)
                series[GR_ENGINE_ACTIVE].append(({"UUID": uuid}, [(stamp, busy)]))
                series[SAMPLES].append(({"UUID": uuid}, [(stamp, 20.0)]))
                if energy is not None:
                    series[TOTAL_ENERGY].append(({"UUID": uuid}, [(stamp, energy)]))
        return readings(series)


@dataclass
class Hold:
    device: str
    start_us: int
    end_us: int | None
    equivalents: float = 1.0
    namespace: str = "team-a"
    claim: str = "c1"
    class_name: str = "gpu"
    node: str = "node-1"
    cluster: str = "east"


async def write_holds(engine: AsyncEngine, holds: list[Hold], lo_us: int, hi_us: int) -> None:
    await partitions.create(engine, {"allocations": partitions.months_between(lo_us, hi_us)})
    rows = [
        {"cluster": h.cluster, "driver": DRIVER, "pool": h.node, "device": h.device,
         "uuid": f"GPU-{h.device}", "node": h.node, "namespace": h.namespace, "claim": h.claim,
         "claim_uid": f"uid-{h.claim}", "request": "gpu", "share_id": str(n),
         "consumed_capacity": "{}", "class_name": h.class_name, "start_us": h.start_us,
         "end_us": h.end_us, "end_reason": None if h.end_us is None else "released",
         "started_before_observation": False, "equivalents": h.equivalents, "device_type": GPU}
        for n, h in enumerate(holds)
    ]  # fmt: skip
    async with engine.begin() as conn:
        if rows:
            await conn.execute(insert(AllocationInterval), rows)


async def write_buckets(engine: AsyncEngine, buckets: list[dict]) -> None:
    async with engine.begin() as conn:
        if buckets:
            await conn.execute(insert(UtilizationBucket), buckets)
