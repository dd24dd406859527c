"""What a pending claim's diagnosis adds to the allocator's verdict: whether the wait can end,
who is ahead in the queue, and what the pods' node constraints leave out.

* **never, even with every holder gone**: a claim whose requests fit alone but not together
  (matchAttribute, distinctAttribute, several requests on one node) is tried again on a ledger
  where every claim holding a device it could use has released it (`never_fits`); if it still
  cannot be placed, no release will let it in (`never-fits`), whatever holds the devices now.
* **earlier waiters**: kube-scheduler's queue (PrioritySort) takes pods of equal priority in
  the order they were enqueued, their creation order here; a pod Pending before the claim's
  own pod, not bound to a node, whose own pending claims could use one of the devices the
  claim could use, gets a freed device first (`ahead_in_queue`), so a wait names them beside
  the holders.
* **node constraints**: the nodes the claim's pods may use (`node_filter`) are stated with the
  constraints that chose them, and matching devices free on the nodes they may not use are
  counted (`free_elsewhere`): "held" is never said while a device is free on a node the pod
  is kept off by its own nodeSelector.

Promises: pure; reads the ledger, never writes it (the second pass uses a ledger of its own).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence

from dra_mirror.service.diagnostics.candidates import alternatives, fit, match
from dra_mirror.service.diagnostics.ledger import Ledger
from dra_mirror.service.diagnostics.node_filter import NodeFacts, PodTerms, misfit
from dra_mirror.service.diagnostics.placement import allocate
from dra_mirror.service.diagnostics.verdicts import SEARCH_LIMIT, Unsatisfiable
from dra_mirror.service.model.records import (
    Allocation,
    ClaimRecord,
    DeviceClassRecord,
    DeviceEntry,
    DeviceKey,
    NodeRecord,
    ObjectKey,
    PodRecord,
    key_of,
)

MAX_AHEAD = 10


def never_fits(
    claim: ClaimRecord,
    *,
    classes: Mapping[str, DeviceClassRecord],
    devices: Sequence[DeviceEntry],
    ledger: Ledger,
    share_id: Callable[[], str],
) -> Unsatisfiable | None:
    """The allocator's answer with every holder of `devices` gone, when even then the claim
    cannot be placed (None: a release would let it in, or the search ran out)."""
    emptied = Ledger(ledger.base)
    for entry in devices:
        for holder in ledger.holders(entry.key):
            emptied.release(holder)
        if entry.device.consumes_counters:
            for holder in ledger.counter_blockers(entry):
                emptied.release(holder)
    again = allocate(claim, classes=classes, devices=devices, ledger=emptied, share_id=share_id)
    if isinstance(again, Allocation):
        return None
    if any(v.verdict == SEARCH_LIMIT for v in again.requests):
        return None
    return again


def wanted_devices(
    claim: ClaimRecord, classes: Mapping[str, DeviceClassRecord], devices: Sequence[DeviceEntry]
) -> set[DeviceKey]:
    """Every device one of the claim's requests (or subrequests) matches."""
    return {
        e.key
        for request in claim.requests
        for alt in alternatives(request)
        for e in match(alt, classes, devices).devices
    }


def ahead_in_queue(
    claim: ClaimRecord,
    users: Sequence[PodRecord],
    *,
    pods: Sequence[PodRecord],
    claims: Mapping[ObjectKey, ClaimRecord],
    classes: Mapping[str, DeviceClassRecord],
    devices: Sequence[DeviceEntry],
    nodes: Sequence[NodeRecord] = (),
) -> list[ObjectKey]:
    """Pods Pending before the claim's own pods whose pending claims could use a device the
    claim could use, on a node they may use (`node_filter`): they get a freed device first
    (queue order, at most MAX_AHEAD)."""
    stuck = [p for p in users if p.phase == "Pending" and not p.node_name]
    if not stuck:
        return []
    mine = min(_queue_order(p) for p in stuck)
    keys = wanted_devices(claim, classes, devices)
    wanted = [e for e in devices if e.key in keys]
    if not wanted:
        return []
    own = {key_of(p) for p in users}
    earlier = sorted(
        (
            p
            for p in pods
            if p.phase == "Pending"
            and not p.node_name
            and key_of(p) not in own
            and _queue_order(p) < mine
        ),
        key=_queue_order,
    )
    wanted_nodes = {e.node for e in wanted if e.node is not None}
    facts = {n.meta.name: NodeFacts.of_record(n) for n in nodes if n.meta.name in wanted_nodes}
    # Replicas of one workload share their terms and their claims' requests: each pair is
    # weighed once (a cluster may have thousands of pods waiting).
    reachable_for: dict[str, list[DeviceEntry]] = {}
    usable_for: dict[tuple[str, str], bool] = {}
    found: list[ObjectKey] = []
    for pod in earlier:
        terms = PodTerms.of_record(pod)
        terms_key = repr(terms)
        reachable = reachable_for.get(terms_key)
        if reachable is None:
            allowed = {n for n in wanted_nodes if n not in facts or misfit(terms, facts[n]) is None}
            reachable = [e for e in wanted if e.node is None or e.node in allowed]
            reachable_for[terms_key] = reachable
        if not reachable:
            continue
        for pod_claim in pod.claims:
            if pod_claim.claim_name is None:
                continue
            other = claims.get(
                ObjectKey(
                    claim.meta.cluster, "ResourceClaim", pod.meta.namespace, pod_claim.claim_name
                )
            )
            if other is None or other.allocation is not None or other is claim:
                continue
            usable_key = (terms_key, repr(other.requests))
            usable = usable_for.get(usable_key)
            if usable is None:
                usable = usable_for[usable_key] = bool(wanted_devices(other, classes, reachable))
            if usable:
                found.append(key_of(pod))
                break
        if len(found) >= MAX_AHEAD:
            break
    return found


def _queue_order(pod: PodRecord) -> tuple[str, str, str]:
    return (pod.meta.created_at or "", pod.meta.namespace, pod.meta.name)


def node_constraints(
    users: Sequence[PodRecord], scope: Collection[str] | None, total_nodes: int
) -> str:
    """The pods' node constraints in words, with the nodes they leave ("" when nothing rules a
    node out)."""
    if scope is None:
        return ""
    stuck = [p for p in users if p.phase == "Pending"] or list(users)
    said = [
        f"pod {p.meta.name}: {text}" for p in stuck if (text := PodTerms.of_record(p).describe())
    ]
    names = sorted(scope)
    shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
    where = f"{len(names)} of {total_nodes} nodes ({shown})" if names else "no node"
    if not stuck:
        return f"its pods may use {where}"
    reasons = f" by {'; '.join(said)}" if said else " (node taints and cordons)"
    return f"its pods may use {where}{reasons}"


def free_elsewhere(
    claim: ClaimRecord,
    *,
    classes: Mapping[str, DeviceClassRecord],
    devices: Sequence[DeviceEntry],
    scope: Collection[str],
    ledger: Ledger,
) -> list[str]:
    """The nodes outside `scope` with a matching device that could be given now, sorted."""
    # Devices held exclusively can be given to nobody: left out before any selector runs.
    taken = ledger.taken
    outside = [
        e
        for e in devices
        if e.node is not None and e.node not in scope and (e.device.shareable or not taken(e.key))
    ]
    found: set[str] = set()
    for request in claim.requests:
        for alt in alternatives(request):
            for entry in match(alt, classes, outside).devices:
                if entry.node not in found and fit(entry, alt, ledger)[0] is None:
                    found.add(entry.node or "")
    return sorted(found)
