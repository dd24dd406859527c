"""What a plan answers, and the holds it takes while it runs.

The verdicts a planned pod may get besides `explainClaim`'s (`PLACEABLE`, `CLAIM_MISSING`,
`TEMPLATE_MISSING`, …); `PlanInputs`, one cluster's mirrored state as the planner reads it;
`ItemPlan` per pod (or claim planned alone) with its `ClaimOutcome`s, `ClusterPlan` per
cluster; `Tentative`, the holds committed to the cluster's allocation ledger for the length
of one plan and undone in reverse order; and the messages that name what a pod takes or who
holds what it needs (only the holders the asker may see).

Promises: plain data and message text; `Tentative.undo` leaves the ledger as it was found.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from dra_mirror.service.diagnostics.diagnoses import Holder
from dra_mirror.service.diagnostics.expansion import PlannedClaim
from dra_mirror.service.diagnostics.ledger import Ledger
from dra_mirror.service.diagnostics.verdicts import RequestVerdict
from dra_mirror.service.model.records import (
    Allocation,
    AllocationResult,
    ClaimRecord,
    DeviceClassRecord,
    DeviceEntry,
    NodeRecord,
    ObjectKey,
    PodRecord,
    TemplateRecord,
)

PLACEABLE = "placeable"
CLAIM_MISSING = "claim-missing"
TEMPLATE_MISSING = "template-missing"
CLAIM_DELETING = "claim-deleting"
NO_NODES = "no-nodes"
CLAIMS_APART = "claims-apart"
INVALID = "invalid"
SHARING_OFF = "sharing-off"
NODE_NAME_PINNED = "node-name-pinned"
NODE_RESOURCES = "node-resources"


@dataclass
class PlanInputs:
    """One cluster's mirrored state, as the planner reads it. `claims`, `pods_on` and the
    ledger cover the whole cluster (what is taken is taken, whoever took it); `visible(ns)`
    says whether the asker may see a namespace's objects, and `templates` holds the templates
    the asker may see."""

    cluster: str
    classes: Mapping[str, DeviceClassRecord]
    devices: Sequence[DeviceEntry]
    ledger: Ledger
    claims: Mapping[ObjectKey, ClaimRecord]
    nodes: Sequence[NodeRecord]
    pods: Sequence[PodRecord]  # every pod (whether a holder's pods run)
    pods_on: Callable[[str], Sequence[PodRecord]]  # the pods bound to a node
    templates: Mapping[tuple[str, str], TemplateRecord]
    visible: Callable[[str], bool]


@dataclass
class ClaimOutcome:
    """Where one claim of a planned pod (or a claim planned alone) would be allocated."""

    claim: PlannedClaim
    node: str | None = None
    results: tuple[AllocationResult, ...] = ()
    allocated_before: bool = False  # an existing claim, allocated already
    network: bool = False  # allocated, network-attached devices only (any node)


@dataclass
class ItemPlan:
    """One pod (or a claim planned alone) and its fate: placed, or why it would wait."""

    kind: str  # Pod | ResourceClaim | ResourceClaimTemplate
    workload: str
    namespace: str
    name: str
    replica: int
    verdict: str
    message: str
    node: str | None = None
    claims: list[ClaimOutcome] = field(default_factory=list)
    blocking_claim: str | None = None
    requests: list[RequestVerdict] = field(default_factory=list)
    holders: list[Holder] = field(default_factory=list)  # those the asker may see
    holders_hidden: int = 0
    freed_by: list[ObjectKey] = field(default_factory=list)  # idle holders to release
    freed_hidden: int = 0

    @property
    def placeable(self) -> bool:
        return self.verdict == PLACEABLE


@dataclass
class ClusterPlan:
    cluster: str
    items: list[ItemPlan] = field(default_factory=list)

    @property
    def placeable(self) -> bool:
        return all(item.placeable for item in self.items)


class Tentative:
    """Holds committed to a ledger for the length of a plan, undone in reverse order."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        self._undo: list[tuple[ObjectKey, Allocation | None]] = []

    def commit(self, key: ObjectKey, allocation: Allocation) -> None:
        self.ledger.commit(key, allocation)
        self._undo.append((key, None))

    def release(self, key: ObjectKey, allocation: Allocation) -> None:
        self.ledger.release(key)
        self._undo.append((key, allocation))

    def mark(self) -> int:
        return len(self._undo)

    def undo(self, to: int = 0) -> None:
        while len(self._undo) > to:
            key, allocation = self._undo.pop()
            if allocation is None:
                self.ledger.release(key)
            else:
                self.ledger.commit(key, allocation)


def held_message(
    requests: list[RequestVerdict], visible: list[Holder], hidden: int, ours: set[ObjectKey]
) -> str:
    """all-held in the manual's words, naming only the holders the asker may see."""
    request = next(
        (v.request for v in requests if v.held_by), requests[0].request if requests else ""
    )
    names = [
        f"{h.claim.namespace}/{h.claim.name}"
        + (" (this plan)" if h.claim in ours else " (idle)" if h.idle else "")
        for h in visible[:10]
    ]
    if len(visible) > 10:
        names.append(f"{len(visible) - 10} more")
    if hidden:
        names.append(f"{hidden} claim(s) outside your scope")
    idle = sum(1 for h in visible if h.idle)
    idle_note = f"; {idle} of them idle" if idle else ""
    return (
        f"request {request}: no devices left: every matching device is held by "
        f"{', '.join(names)}{idle_note}"
    )


def without_driver(nodes: list[str]) -> str:
    if not nodes:
        return ""
    shown = ", ".join(nodes[:10]) + (f" and {len(nodes) - 10} more" if len(nodes) > 10 else "")
    return f" (GPU nodes where the class's driver publishes no devices: {shown})"


def placed_message(item: ItemPlan) -> str:
    taken = [f"{r.driver}/{r.pool}/{r.device}" for outcome in item.claims for r in outcome.results]
    where = f"on node {item.node}" if item.node else "on any node (network-attached devices)"
    return f"would be placed {where}: " + (", ".join(taken) or "no devices needed")
