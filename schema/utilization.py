"""Utilisation in the graph: how busy held devices are, and which are held but not busy.

    heldNotBusy(cluster, windowSeconds, first)                     -> HeldNotBusy!
    deviceUtilization(cluster, windowSeconds)                      -> [DeviceUtilization!]!
    claimUtilization(cluster, namespace, name, windowSeconds)      -> [DeviceUtilization!]

Each resolver answers the question of `service.questions.utilization` with the request's
asker, field for field. No utilisation source configured is an error with the code
`UTILIZATION_DISABLED`; a source that cannot answer, `STORE_UNAVAILABLE`.
"""

from __future__ import annotations

from typing import Any

import strawberry

from dra_mirror.service.questions import utilization
from dra_mirror.service.questions.asking import BadQuestion

from .asked import asked
from .context import Info


def _fields(value: Any) -> dict[str, Any]:
    return dict(vars(value))


def _window(seconds: float | None) -> float | None:
    if seconds is not None and not 60 <= seconds <= 31 * 86400:
        raise BadQuestion("windowSeconds must be between 60 and 2678400 (31 days)")
    return seconds


@strawberry.type(description="A device over a window, as dcgm-exporter read it.")
class DeviceUtilization:
    cluster: str
    driver: str
    pool: str
    device: str
    uuid: str | None
    node: str | None
    busy: float | None = strawberry.field(
        description="Percent busy, mean over the window; null: unknown (no readings), never 0."
    )
    source: str | None = strawberry.field(
        description="What it was read from: gr-engine-active, gpu-util, gpu-instance (a MIG "
        "device) or gpu-instances (a partitioned GPU, weighted by its instances)."
    )
    memory_used_mib: float | None
    power_watts: float | None
    energy_kwh: float | None = strawberry.field(
        description="Energy over the window (a claim's answer: its share of a shared device)."
    )
    not_busy_since: str | None = strawberry.field(
        description="Since when it has stayed below the busy threshold (null: busy now)."
    )


@strawberry.type(description="A claim held by a Running pod whose devices are not busy.")
class NotBusyClaim:
    cluster: str
    claim: str
    namespace: str
    consumers: list[str] = strawberry.field(description="Its Running consumer pods.")
    node: str | None
    devices: list[str]
    busy: float = strawberry.field(description="Percent busy over the window.")
    since: str = strawberry.field(description="Held, not busy since (RFC 3339).")
    not_busy_seconds: float
    energy_kwh: float | None = strawberry.field(
        description="Its share of its devices' energy since `since`: holding without working."
    )
    cost: float | None = strawberry.field(
        description="That energy at the source's pricePerKwh (null: no price configured)."
    )


@strawberry.type(description="Claims held, not busy: below `busyBelow` % for `notBusyAfter` s.")
class HeldNotBusy:
    busy_below: float
    not_busy_after: float
    window: float
    total: int
    unknown: int = strawberry.field(
        description="Held GPU claims with Running consumers and no readings: not judged."
    )
    clusters: list[str]
    claims: list[NotBusyClaim] = strawberry.field(description="Longest not busy first.")

    @classmethod
    def of(cls, answer: utilization.HeldNotBusy) -> HeldNotBusy:
        fields = _fields(answer)
        fields["claims"] = [NotBusyClaim(**_fields(r)) for r in answer.claims]
        return cls(**fields)


@strawberry.type
class Query:
    @strawberry.field(
        description="Claims held by a Running pod and not busy (dcgm-exporter's readings "
        "below the threshold long enough): by whom, since when, the energy."
    )
    async def held_not_busy(
        self,
        info: Info,
        cluster: str | None = None,
        window_seconds: float | None = None,
        first: int = 50,
    ) -> HeldNotBusy:
        if not 1 <= first <= 1000:
            raise BadQuestion("first must be between 1 and 1000")
        answer = await asked(
            utilization.held_not_busy(
                info.context.asker, cluster, window=_window(window_seconds), limit=first
            )
        )
        return HeldNotBusy.of(answer)

    @strawberry.field(description="Every GPU and MIG device's utilisation over the window.")
    async def device_utilization(
        self, info: Info, cluster: str | None = None, window_seconds: float = 3600
    ) -> list[DeviceUtilization]:
        window = _window(window_seconds) or 3600.0
        rows = await asked(
            utilization.device_utilization(info.context.asker, cluster, window=window)
        )
        return [DeviceUtilization(**_fields(r)) for r in rows]

    @strawberry.field(description="A claim's devices over the window (null: not allocated).")
    async def claim_utilization(
        self, info: Info, cluster: str, namespace: str, name: str, window_seconds: float = 3600
    ) -> list[DeviceUtilization] | None:
        window = _window(window_seconds) or 3600.0
        rows = await asked(
            utilization.claim_utilization(
                info.context.asker, cluster, namespace, name, window=window
            )
        )
        return None if rows is None else [DeviceUtilization(**_fields(r)) for r in rows]
