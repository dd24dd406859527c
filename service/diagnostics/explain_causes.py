"""What explainClaim adds to a diagnosis beyond the verdict: a derived attribute's run-time
error as kube-scheduler meets it, the node constraints of the claim's pods with the matching
devices free elsewhere, and for a wait whether it can ever end (never-fits) or which pods are
ahead of it in the queue. Pure."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence

from dra_mirror.service.diagnostics.derived import DerivedFailure
from dra_mirror.service.diagnostics.diagnoses import DRIVER_MISSING, SHARING_OFF, Diagnosis
from dra_mirror.service.diagnostics.ledger import Ledger
from dra_mirror.service.diagnostics.verdicts import (
    ALL_HELD,
    CLASS_MISSING,
    CONSTRAINTS,
    NEVER_FITS,
    NO_CAPACITY,
    NOT_ENOUGH,
    SELECTOR_ERROR,
    RequestVerdict,
)
from dra_mirror.service.diagnostics.waiting import (
    ahead_in_queue,
    free_elsewhere,
    never_fits,
    node_constraints,
)
from dra_mirror.service.model.records import (
    ClaimRecord,
    DeviceClassRecord,
    DeviceEntry,
    NodeRecord,
    ObjectKey,
    PodRecord,
)


def _no_share() -> str:
    return "explain"  # explain never writes the allocation it finds


def _claim_ref(key: ObjectKey) -> str:
    return f"{key.namespace}/{key.name}" if key.namespace else key.name


def derived_message(failure: DerivedFailure) -> str:
    where = f" on {failure.device}" if failure.device else ""
    return (
        f"request {failure.request}: derived attribute {failure.name!r} "
        f"({failure.expression!r}) fails{where}: {failure.message}. kube-scheduler aborts the "
        "allocation at a CEL error in derivedAttributes (KEP-6080), even where other devices "
        "would fit: the pod stays Pending until the expression is fixed (test an attribute "
        "with has() before reading it)"
    )


def state_node_constraints(
    base: Diagnosis,
    claim: ClaimRecord,
    users: Sequence[PodRecord],
    scope: Collection[str],
    classes: Mapping[str, DeviceClassRecord],
    devices: Sequence[DeviceEntry],
    nodes: Sequence[NodeRecord],
    ledger: Ledger,
) -> None:
    """The nodes its pods may use and why, and the matching devices free on the others."""
    said = node_constraints(users, scope, len(nodes))
    if said:
        base.message += f"; {said}"
    if base.verdict in (CLASS_MISSING, DRIVER_MISSING, SELECTOR_ERROR):
        return
    free = free_elsewhere(claim, classes=classes, devices=devices, scope=scope, ledger=ledger)
    if free:
        more = f" and {len(free) - 5} more" if len(free) > 5 else ""
        base.message += (
            f"; matching devices are free on nodes its pods may not use: {', '.join(free[:5])}"
            + more
        )


def wait_causes(
    base: Diagnosis,
    blocking: RequestVerdict,
    claim: ClaimRecord,
    users: Sequence[PodRecord],
    classes: Mapping[str, DeviceClassRecord],
    candidates: Sequence[DeviceEntry],
    ledger: Ledger,
    claims: Mapping[ObjectKey, ClaimRecord],
    pods: Sequence[PodRecord],
    nodes: Sequence[NodeRecord],
    visible: Callable[[str], bool] | None,
) -> None:
    """A wait that can never end is `never-fits`; one that can names the earlier waiters."""
    waits = base.verdict in (ALL_HELD, SHARING_OFF, NOT_ENOUGH, CONSTRAINTS) or (
        base.verdict == NO_CAPACITY and blocking.short
    )
    if not waits:
        return
    if base.verdict == CONSTRAINTS or claim.constraints or len(claim.requests) > 1:
        never = never_fits(
            claim, classes=classes, devices=candidates, ledger=ledger, share_id=_no_share
        )
        if never is not None:
            base.verdict = NEVER_FITS
            reason = never.message.removeprefix("cannot allocate all claims: ")
            base.message = (
                "it can never be placed on the nodes its pods may use, even with every holder "
                f"gone: {reason}"
            )
            return
    ahead = ahead_in_queue(
        claim, users, pods=pods, claims=claims, classes=classes, devices=candidates, nodes=nodes
    )
    # Pods the asker may not see are counted, never named (as holders are).
    base.ahead = [k for k in ahead if visible is None or visible(k.namespace)]
    hidden = len(ahead) - len(base.ahead)
    if ahead:
        said = [_claim_ref(k) for k in base.ahead]
        if hidden:
            said.append(f"{hidden} pod(s) outside your scope")
        base.message += f"; pods ahead of it in the queue, served first: {', '.join(said)}"
