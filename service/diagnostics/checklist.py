"""The operations manual's checklist of an allocated claim: allocated, node and devices named,
every pod that references it among its consumers, those pods Running — and the verdict:

    ok               every check passes
    node-resources   allocated, but its pod is Pending: the node lacks CPU or memory
    idle             allocated, but no consumer pod is Running
    pod-not-running  a consumer pod is not Running (yet)

Pure; `explain.explain_claim` calls it for a claim with an allocation.
"""

from __future__ import annotations

from collections.abc import Sequence

from dra_mirror.service.diagnostics.cluster import node_shortfall
from dra_mirror.service.diagnostics.diagnoses import (
    IDLE,
    NODE_RESOURCES,
    OK,
    POD_NOT_RUNNING,
    Check,
    Diagnosis,
)
from dra_mirror.service.model.records import ClaimRecord, NodeRecord, PodRecord


def checklist(
    claim: ClaimRecord,
    diagnosis: Diagnosis,
    users: list[PodRecord],
    pods: Sequence[PodRecord],
    nodes: Sequence[NodeRecord],
) -> Diagnosis:
    """`diagnosis` of an allocated claim: the manual's checklist and its verdict. `users`: the
    pods that reference the claim."""
    allocation = claim.allocation
    assert allocation is not None
    reserved = {c.uid for c in claim.reserved_for}
    consumers = [p for p in users if p.meta.uid in reserved]
    devices = ", ".join(f"{r.driver}/{r.pool}/{r.device}" for r in allocation.results)
    node = allocation.node_name
    checks = [
        Check("allocated", True, f"{len(allocation.results)} device(s)"),
        Check("node", True, node or "network-attached: usable on any node"),
        Check("devices", bool(allocation.results), devices or "no devices"),
        Check(
            "consumers",
            bool(users) and len(consumers) == len(users),
            ", ".join(f"{p.meta.namespace}/{p.meta.name}" for p in consumers)
            or "no pod reserves it",
        ),
        Check(
            "running",
            bool(consumers) and all(p.phase == "Running" for p in consumers),
            ", ".join(f"{p.meta.name}: {p.phase}" for p in users) or "no pod uses it",
        ),
    ]
    diagnosis.checks = checks
    pending = [p for p in users if p.phase == "Pending"]
    for pod in pending:
        target = node or pod.node_name
        record = next((n for n in nodes if n.meta.name == target), None)
        shortfall = node_shortfall(pod, record, pods) if record is not None else None
        if shortfall is not None:
            resource, requested, allocatable = shortfall
            diagnosis.verdict = NODE_RESOURCES
            diagnosis.message = (
                f"the claim is allocated on {target}, but pod {pod.meta.name} is Pending: the node "
                f"lacks {resource} ({requested} requested with the pods already there, "
                f"{allocatable} allocatable)"
            )
            return diagnosis
    if all(c.ok for c in checks):
        diagnosis.verdict, diagnosis.message = (
            OK,
            f"allocated on {node or 'any node'}: {devices}; in use",
        )
    elif not any(p.phase == "Running" for p in consumers):
        diagnosis.verdict = IDLE
        diagnosis.message = f"allocated ({devices}) but no consumer pod is Running"
    else:
        diagnosis.verdict = POD_NOT_RUNNING
        failing = [c for c in checks if not c.ok]
        diagnosis.message = "; ".join(f"{c.name}: {c.detail}" for c in failing)
    return diagnosis
