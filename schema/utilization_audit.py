"""The utilisation audit in the graph: busy-hours against held-hours, and energy, per group.

    utilizationAudit(from, to, groupBy, cluster) -> [UtilizationAuditRow!]!
    deviceUtilizationHistory(cluster, driver, pool, device, from, to) -> [UtilizationPoint!]!

Answers `service.questions.history.utilization_audit` (the history's five-minute buckets
joined to its allocations, `service.history.utilization_audit`) with the request's asker;
`deviceUtilizationHistory` answers `service.questions.history.device_utilization` (one
device's buckets, unknown ones with a null `busy`: never 0).
No history is `HISTORY_DISABLED`; a database that cannot answer, `HISTORY_STORE_UNAVAILABLE`.
"""

from __future__ import annotations

import enum
from typing import Annotated

import strawberry

from dra_mirror.service.questions import history

from .asked import asked
from .context import Info
from .history import _time, _window
from .scalars import DateTime


@strawberry.enum(description="How `utilizationAudit` groups its rows (always within a cluster).")
class UtilizationGroup(enum.Enum):
    NAMESPACE = "NAMESPACE"
    CLASS = "CLASS"
    NODE = "NODE"
    CLUSTER = "CLUSTER"
    CLAIM = "CLAIM"


@strawberry.type(description="One group over the window: GPU-equivalent-hours and energy.")
class UtilizationAuditRow:
    cluster: str
    group: str = strawberry.field(description="The namespace, class, node, cluster or ns/claim.")
    held_hours: float = strawberry.field(description="GPU-equivalent-hours held.")
    known_hours: float = strawberry.field(
        description="The held hours a utilisation bucket covers (the device's exporter read)."
    )
    unknown_hours: float = strawberry.field(description="Held hours without readings.")
    busy_hours: float | None = strawberry.field(
        description="the sum of equivalents * busy fraction * hours held, over the known hours; null: "
        "no held hour was read (unknown, never 0)."
    )
    busy_percent: float | None = strawberry.field(description="busyHours / knownHours * 100.")
    energy_kwh: float | None = strawberry.field(
        description="The energy of the devices while held, in proportion to what was held "
        "(null: no energy counter read)."
    )


@strawberry.type(description="One device over one five-minute bucket.")
class UtilizationPoint:
    start: DateTime = strawberry.field(description="The bucket's start.")
    busy: float | None = strawberry.field(
        description="Mean busy percent over the bucket; null: unknown (no readings), never 0."
    )
    energy_kwh: float | None = strawberry.field(
        description="The device's energy over the bucket (null: unknown or no energy counter)."
    )


@strawberry.type
class Query:
    @strawberry.field(
        description="Busy-hours against held GPU-equivalent-hours, and energy (kWh), per "
        "namespace, class, node, cluster or claim over [from, to), from the history's "
        "five-minute utilisation buckets."
    )
    async def utilization_audit(
        self,
        info: Info,
        from_: Annotated[DateTime, strawberry.argument(name="from")],
        to: DateTime,
        group_by: UtilizationGroup = UtilizationGroup.NAMESPACE,
        cluster: str | None = None,
    ) -> list[UtilizationAuditRow]:
        start, end = _window(from_, to)
        rows = await asked(
            history.utilization_audit(info.context.asker, start, end, group_by.value, cluster)
        )
        return [
            UtilizationAuditRow(cluster=r.cluster, group=r.group, held_hours=r.held_hours,
                                known_hours=r.known_hours, unknown_hours=r.unknown_hours,
                                busy_hours=r.busy_hours, busy_percent=r.busy_percent,
                                energy_kwh=r.energy_kwh)
            for r in rows
        ]  # fmt: skip

    @strawberry.field(
        description="One device's five-minute utilisation buckets over [from, to) (at most 31 "
        "days), from the history: one point per bucket, busy null where it was not read."
    )
    async def device_utilization_history(
        self,
        info: Info,
        cluster: str,
        driver: str,
        pool: str,
        device: str,
        from_: Annotated[DateTime, strawberry.argument(name="from")],
        to: DateTime,
    ) -> list[UtilizationPoint]:
        start, end = _window(from_, to)
        points = await asked(
            history.device_utilization(
                info.context.asker, cluster, driver, pool, device, start, end
            )
        )
        return [
            UtilizationPoint(start=_time(p.start_us), busy=p.busy, energy_kwh=p.energy_kwh)
            for p in points
        ]
