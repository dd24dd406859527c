"""`PrometheusSource`: a cluster's dcgm readings over a window, from its Prometheus server.

For each of dcgm-exporter's metrics one range query, aggregated on the server by the labels
that identify a reading (`LabelNames.identity`): the copies the exporter makes per pod fold
into one series there, so a fleet's answer stays one series per GPU or GPU instance, not per
pod. The five queries of a window run concurrently, at the configured step or, for a window
longer than `MAX_POINTS` steps, at a coarser one (Prometheus answers at most 11,000 points).

`buckets` asks for the five-minute buckets the history records, one query per metric at a
step of five minutes (`bucket_queries`).

Promises: `readings` and `buckets` answer `service.model.dcgm.Readings`, or raises `PrometheusError`; a
cluster not in the file is `covers() == False` and is never asked.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

import httpx

from dra_mirror.service.model.dcgm import (
    GPU_UTIL,
    GR_ENGINE_ACTIVE,
    METRICS,
    TOTAL_ENERGY,
    Readings,
    readings,
)
from dra_mirror.service.model.utilization_buckets import BUCKET_SECONDS, SAMPLES

from .config import PrometheusTarget, UtilizationConfig
from .prometheus import PrometheusClient

MAX_POINTS = 10_000


def series_query(metric: str, target: PrometheusTarget) -> str:
    """`max by (<identity labels>) (<metric>{<selector>})`."""
    selector = f"{{{target.selector}}}" if target.selector else ""
    return f"max by ({', '.join(target.labels.identity())}) ({metric}{selector})"


def bucket_queries(target: PrometheusTarget) -> dict[str, str]:
    """Per metric (and `SAMPLES`), the query of its value over each bucket ending at the
    evaluation time: gauges' means, the energy counter's increase, the busy samples' count."""
    by = ", ".join(target.labels.identity())
    window = f"[{BUCKET_SECONDS}s]"
    out = {}
    for metric in METRICS:
        over = "increase" if metric == TOTAL_ENERGY else "avg_over_time"
        out[metric] = f"max by ({by}) ({over}({metric}{{{target.selector}}}{window}))"
    # the busy metric's samples: the engine activity's where the exporter has it (as the
    # join reads busy), else GPU_UTIL's (`or` keeps the left side's series of a label set)
    counts = [
        f"max by ({by}) (count_over_time({m}{{{target.selector}}}{window}))"
        for m in (GR_ENGINE_ACTIVE, GPU_UTIL)
    ]
    out[SAMPLES] = " or ".join(counts)
    return out


class PrometheusSource:
    """The utilisation source of every configured cluster."""

    def __init__(
        self,
        config: UtilizationConfig,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.config = config
        self.busy_below = config.busy_below
        self.not_busy_after = config.not_busy_after
        self.step = config.step
        self.price_per_kwh = config.price_per_kwh
        self._clients: Mapping[str, PrometheusClient] = {
            name: PrometheusClient(target, transport=transport)
            for name, target in config.clusters.items()
        }

    def covers(self, cluster: str) -> bool:
        return cluster in self._clients

    async def readings(self, cluster: str, start: float, end: float) -> Readings:
        client = self._clients[cluster]
        target = client.target
        # Prometheus refuses more than 11,000 points per series: a long window is coarser
        step = max(self.step, (end - start) / MAX_POINTS)
        answers = await asyncio.gather(
            *(client.query_range(series_query(m, target), start, end, step) for m in METRICS)
        )
        return readings(dict(zip(METRICS, answers, strict=True)), target.labels)

    async def buckets(self, cluster: str, start: int, end: int) -> Readings:
        """The readings of the buckets in [start, end) (multiples of `BUCKET_SECONDS`), each
        stamped at its bucket's end (`service.model.utilization_buckets`): one range query
        per metric at a step of one bucket."""
        client = self._clients[cluster]
        queries = bucket_queries(client.target)
        first, step = start + BUCKET_SECONDS, float(BUCKET_SECONDS)
        answers = await asyncio.gather(
            *(client.query_range(q, first, end, step) for q in queries.values())
        )
        return readings(dict(zip(queries, answers, strict=True)), client.target.labels)

    async def aclose(self) -> None:
        for client in self._clients.values():
            await client.aclose()

    async def __aenter__(self) -> PrometheusSource:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
