"""`dra_mirror_held_not_busy_devices{cluster,namespace}`: devices held, not busy, on /metrics.

Counted from the question every front end asks (`service.questions.utilization.held_not_busy`)
over the whole state, for each claim listed its devices with readings, by the claim's
cluster and namespace. Only when a utilisation source is configured; recomputed at most every
`ttl` seconds (each computation asks Prometheus), the last figures kept when the source does
not answer (`dra_mirror_utilization_errors_total` counts those).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge

from dra_mirror.service.questions.asker import Asker
from dra_mirror.service.questions.utilization import held_not_busy

log = logging.getLogger(__name__)

MAX_ROWS = 1_000_000


class NotBusyGauge:
    """The gauge and its refresh; `source` is the app's shared state."""

    def __init__(
        self,
        source: Any,
        registry: CollectorRegistry,
        *,
        ttl: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.source, self.ttl, self.clock = source, ttl, clock
        self.gauge = Gauge(
            "dra_mirror_held_not_busy_devices",
            "Devices held by a claim with a Running consumer, below the busy threshold long "
            "enough (dcgm-exporter's readings).",
            ["cluster", "namespace"],
            registry=registry,
        )
        self.errors = Counter(
            "dra_mirror_utilization_errors",
            "Computations of the held-not-busy devices the utilisation source did not answer.",
            registry=registry,
        )
        self._at = float("-inf")
        self._lock = asyncio.Lock()

    async def refresh(self) -> None:
        utilization = getattr(self.source, "utilization", None)
        if utilization is None:
            return
        async with self._lock:
            if self.clock() - self._at < self.ttl:
                return
            self._at = self.clock()
            asker = Asker.over(self.source.store, now=self.source.now, utilization=utilization)
            try:
                answer = await held_not_busy(asker, limit=MAX_ROWS)
            except Exception as error:
                log.warning("metrics: utilisation unavailable: %s", error)
                self.errors.inc()
                return
            counts: dict[tuple[str, str], int] = {}
            for row in answer.claims:
                key = (row.cluster, row.namespace)
                counts[key] = counts.get(key, 0) + len(row.devices)
            self.gauge.clear()
            for (cluster, namespace), count in sorted(counts.items()):
                self.gauge.labels(cluster, namespace).set(count)
