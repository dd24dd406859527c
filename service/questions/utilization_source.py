"""What the utilisation questions read beside the store: a source of dcgm readings.

`UtilizationReads` is the seam: the runtime passes `service.utilization.PrometheusSource`
(Prometheus' HTTP API), tests pass readings they built. Its thresholds come with it, so
every front end applies the same ones.
"""

from __future__ import annotations

from typing import Protocol

from dra_mirror.service.model.dcgm import Readings

__all__ = ["UtilizationReads"]


class UtilizationReads(Protocol):
    busy_below: float  # percent
    not_busy_after: float  # seconds
    # optional: price_per_kwh (float | None), what a kWh costs (held-not-busy rows' `cost`)

    def covers(self, cluster: str) -> bool:
        """Whether a source is configured for `cluster`."""
        ...

    async def readings(self, cluster: str, start: float, end: float) -> Readings:
        """The cluster's readings from `start` to `end` (unix seconds); `ReadingsUnavailable`
        (service.model.dcgm) when the source cannot answer."""
        ...
