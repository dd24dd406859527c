"""The chargeback field of the graph (merged into the root `Query` by `schema.build_schema`).

    chargeback(from, to, groupBy: NAMESPACE | TEAM, cluster)   GPU-equivalent-hours and cost

Rows come from `service.questions.history.chargeback` with the request's asker: per namespace
the asker sees, or per team summed over those namespaces only. Definitions:
`service.history.chargeback` and docs/history.md. Errors as the other history fields'.
"""

from __future__ import annotations

import enum
from typing import Annotated

import strawberry

from dra_mirror.service.questions import history

from .asked import asked
from .context import Info
from .history import _window
from .scalars import DateTime


@strawberry.enum(description="How `chargeback` groups its rows (always within a cluster).")
class ChargebackGroup(enum.Enum):
    NAMESPACE = "NAMESPACE"
    TEAM = "TEAM"


@strawberry.type(
    description="What one namespace or team held of GPUs over the window, in "
    "GPU-equivalent-hours, and what that costs at the price table's prices."
)
class ChargebackRow:
    cluster: str
    group: str = strawberry.field(description="The namespace, or the team.")
    team: str = strawberry.field(
        description="The namespace's team label (the price table's teamLabel, from its "
        "namespaceLabels: the mirror does not watch Namespaces), else (unlabelled)."
    )
    gpu_hours_held: float = strawberry.field(
        description="GPU-equivalent-hours allocated: a whole GPU 1 per hour, a MIG partition "
        "its share of the GPU's memory slices, a share its consumed capacity over the GPU's."
    )
    gpu_hours_in_use: float = strawberry.field(
        description="Held minus idle-held: the GPU-equivalent-hours while a consumer pod ran "
        "(or was starting within its grace)."
    )
    cost_held: float | None = strawberry.field(
        description="gpuHoursHeld priced per hold (its device's model, else its class, else "
        "the default price per GPU-hour), in `currency`; null without a price table."
    )
    cost_in_use: float | None = strawberry.field(
        description="gpuHoursInUse priced the same way; null without a price table."
    )
    currency: str | None


@strawberry.type
class Query:
    @strawberry.field(
        description="GPU-equivalent-hours held and in use over [from, to), and their cost, per "
        "namespace or team. NICs and other device types are not charged."
    )
    async def chargeback(
        self,
        info: Info,
        from_: Annotated[DateTime, strawberry.argument(name="from")],
        to: DateTime,
        group_by: ChargebackGroup = ChargebackGroup.NAMESPACE,
        cluster: str | None = None,
    ) -> list[ChargebackRow]:
        start, end = _window(from_, to)
        rows = await asked(
            history.chargeback(info.context.asker, start, end, group_by.value, cluster)
        )
        return [
            ChargebackRow(cluster=r.cluster, group=r.group, team=r.team,
                          gpu_hours_held=r.gpu_hours_held, gpu_hours_in_use=r.gpu_hours_in_use,
                          cost_held=r.cost_held, cost_in_use=r.cost_in_use, currency=r.currency)
            for r in rows
        ]  # fmt: skip
