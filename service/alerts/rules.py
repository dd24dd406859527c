"""The alert rules, pure: what holds now in one cluster's index, and since when.

Each rule turns an `IndexView` (the reactor's own index) into `Condition`s — one per subject
(a claim, a device, a node, a pool), identified by `(rule, cluster, namespace, name)` so the
engine can tell a condition that goes on from a new one:

    pending-behind-idle      a claim a Pending pod references, Pending while devices that pod
                             could use are held by idle claims (allocated, no consumer pod
                             Running): the devices its requests match, on the nodes its pods
                             may use (`node_filter`: nodeName, nodeSelector, affinity, cordons,
                             node taints), whose taints its requests tolerate — the allocator's
                             own rule; the manual's cleanup candidates, with the waiting claim
                             named; since its creation. A claim no pod references waits for
                             nothing: it never fires
    idle-holder              a claim holding devices with no consumer pod Running; since it
                             became idle (`idle_since`)
    gpu-node-without-slices  a node that looks like a GPU node (device-plugin capacity such as
                             nvidia.com/gpu, GPU labels) on which no ResourceSlice publishes a
                             device: the driver is missing or down; since first seen so
    pool-incomplete          a pool with fewer slices of its highest generation than its
                             resourceSliceCount (its devices cannot all be allocated); since
                             first seen so
    held-not-busy            a claim held by a Running pod whose GPUs stayed below the
                             utilisation source's busy threshold
                             (`service.questions.utilization.held_not_busy`, which the engine
                             asks before it evaluates and hands in as `not_busy`); since the
                             run below the threshold began; routed to the holder's namespace
    tainted-while-held       a held device carrying a NoSchedule/NoExecute taint, published by
                             its driver in its ResourceSlice or put on it by a DeviceTaintRule
                             (an admin's drain; the summary names which); published or not;
                             since the taint's timeAdded, else first seen so

`since` is None where only the engine can know (it then counts from its first sight).
`details["namespaces"]` names every namespace an alert concerns — the waiting claim's and the
holders' for a claim, the holders' for a device, the workloads' on a node or in a pool — so
the notifier reaches each owning team's channel, not only the default one.

Promises: pure (no I/O, no clock: `now` is not needed, times are data); one pass per kind.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from dra_mirror.service.diagnostics.candidates import alternatives, blocking_taints, match
from dra_mirror.service.diagnostics.cluster import gpu_nodes, pods_eligible_nodes
from dra_mirror.service.model.records import (
    DEVICE_CLASS,
    NODE,
    POD,
    RESOURCE_CLAIM,
    RESOURCE_SLICE,
    ClaimRecord,
    DeviceClassRecord,
    DeviceEntry,
    DeviceKey,
    NodeRecord,
    ObjectKey,
    PodRecord,
    SliceRecord,
    key_of,
)
from dra_mirror.service.model.taint_rules import UNAVAILABLE_EFFECTS, shown
from dra_mirror.service.model.view import IndexView
from dra_mirror.service.questions.utilization import NotBusyRow

PENDING_BEHIND_IDLE = "pending-behind-idle"
IDLE_HOLDER = "idle-holder"
GPU_NODE_WITHOUT_SLICES = "gpu-node-without-slices"
POOL_INCOMPLETE = "pool-incomplete"
TAINTED_WHILE_HELD = "tainted-while-held"
HELD_NOT_BUSY = "held-not-busy"
RULES = (
    PENDING_BEHIND_IDLE,
    IDLE_HOLDER,
    GPU_NODE_WITHOUT_SLICES,
    POOL_INCOMPLETE,
    TAINTED_WHILE_HELD,
    HELD_NOT_BUSY,
)
SEVERITY = {
    PENDING_BEHIND_IDLE: "warning",
    IDLE_HOLDER: "info",
    GPU_NODE_WITHOUT_SLICES: "warning",
    POOL_INCOMPLETE: "warning",
    TAINTED_WHILE_HELD: "critical",
    HELD_NOT_BUSY: "info",
}


@dataclass(frozen=True)
class Condition:
    """One rule holding for one subject. `details` name the parties (claim, holders, device,
    node, pool) for messages and links; `since` is when it started, when the data says."""

    rule: str
    cluster: str
    namespace: str
    name: str
    summary: str
    since: str | None = None
    details: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def key(self) -> tuple[str, str, str, str]:
        return (self.rule, self.cluster, self.namespace, self.name)


def evaluate(
    index: IndexView, rules: Iterable[str], not_busy: Sequence[NotBusyRow] = ()
) -> list[Condition]:
    """The conditions of `rules` holding in the cluster now (`not_busy`: the cluster's claims
    held, not busy, as the utilisation source last said)."""
    wanted = set(rules)
    found: list[Condition] = []
    if HELD_NOT_BUSY in wanted:
        found += [_not_busy(index.cluster, row) for row in not_busy]
    if wanted & {PENDING_BEHIND_IDLE, IDLE_HOLDER}:
        found += _claims(index, wanted)
    if GPU_NODE_WITHOUT_SLICES in wanted:
        found += _nodes_without_slices(index)
    if POOL_INCOMPLETE in wanted:
        found += _incomplete_pools(index)
    if TAINTED_WHILE_HELD in wanted:
        found += _tainted_held(index)
    return found


def _not_busy(cluster: str, row: NotBusyRow) -> Condition:
    name = row.claim.split("/", 1)[-1]
    return Condition(
        HELD_NOT_BUSY, cluster, row.namespace, name,
        f"claim {row.claim} holds {', '.join(row.devices)} at {row.busy:.0f}% busy, its pods "
        f"{', '.join(row.consumers)} Running",
        since=row.since,
        details={"claim": row.claim, "devices": list(row.devices), "node": row.node,
                 "pods": [f"{row.namespace}/{p}" for p in row.consumers],
                 "namespaces": [row.namespace]},
    )  # fmt: skip


def _ref(key: ObjectKey) -> str:
    return f"{key.namespace}/{key.name}"


def _claims(index: IndexView, wanted: set[str]) -> list[Condition]:
    cluster = index.cluster
    out: list[Condition] = []
    idle: dict[ObjectKey, ClaimRecord] = {}
    for key in index.idle_claims():
        record = index.get(key)
        if isinstance(record, ClaimRecord) and record.allocation is not None:
            idle[key] = record
    if IDLE_HOLDER in wanted:
        for key, claim in idle.items():
            assert claim.allocation is not None
            devices = [f"{r.driver}/{r.pool}/{r.device}" for r in claim.allocation.results]
            out.append(Condition(
                IDLE_HOLDER, cluster, key.namespace, key.name,
                f"claim {_ref(key)} holds {', '.join(devices) or 'no device'} with no pod Running",
                since=index.idle_since(key),
                details={"claim": _ref(key), "devices": devices, "node": claim.allocation.node_name},
            ))  # fmt: skip
    if PENDING_BEHIND_IDLE not in wanted or not idle:
        return out
    held: dict[DeviceKey, ObjectKey] = {}
    for key, claim in idle.items():
        assert claim.allocation is not None
        for r in claim.allocation.results:
            held[DeviceKey(cluster, r.driver, r.pool, r.device)] = key
    entries = [e for k in held if (e := index.device(k)) is not None]
    classes = {
        c.meta.name: c for c in index.records(DEVICE_CLASS) if isinstance(c, DeviceClassRecord)
    }
    waiting = _waiting_pods(index)
    nodes = [n for n in index.records(NODE) if isinstance(n, NodeRecord)]
    for record in index.records(RESOURCE_CLAIM):
        if not isinstance(record, ClaimRecord) or record.allocation is not None:
            continue
        if record.meta.deleted_at is not None or not record.requests:
            continue
        pods = waiting.get((record.meta.namespace, record.meta.name))
        if not pods:
            continue  # no pod waits for it: nothing is blocked
        allowed = pods_eligible_nodes(pods, nodes)
        usable = entries if allowed is None else _on_nodes(entries, set(allowed))
        holders = _matching_holders(record, classes, usable, held)
        if not holders:
            continue
        meta = record.meta
        names = ", ".join(_ref(h) for h in holders[:5])
        out.append(Condition(
            PENDING_BEHIND_IDLE, cluster, meta.namespace, meta.name,
            f"claim {meta.namespace}/{meta.name} is Pending while devices it could use are held "
            f"by idle claims: {names}" + (f" and {len(holders) - 5} more" if len(holders) > 5 else ""),
            since=meta.created_at,
            details={"claim": f"{meta.namespace}/{meta.name}", "holders": [_ref(h) for h in holders],
                     "pods": sorted(_ref(key_of(p)) for p in pods),
                     "namespaces": sorted({meta.namespace, *(h.namespace for h in holders)})},
        ))  # fmt: skip
    return out


def _waiting_pods(index: IndexView) -> dict[tuple[str, str], list[PodRecord]]:
    """Pending pods by the claims they reference: (namespace, claim name) -> pods."""
    found: dict[tuple[str, str], list[PodRecord]] = defaultdict(list)
    for pod in index.records(POD):
        if not isinstance(pod, PodRecord) or pod.phase != "Pending":
            continue
        if pod.meta.deleted_at is not None:
            continue
        names = {c.claim_name for c in pod.claims if c.claim_name}
        if pod.extended_claim_name:
            names.add(pod.extended_claim_name)
        for name in names:
            found[(pod.meta.namespace, name)].append(pod)
    return found


def _on_nodes(entries: list[DeviceEntry], nodes: set[str]) -> list[DeviceEntry]:
    return [e for e in entries if e.node is None or e.node in nodes]


def _matching_holders(
    claim: ClaimRecord,
    classes: dict[str, DeviceClassRecord],
    entries: list[DeviceEntry],
    held: dict[DeviceKey, ObjectKey],
) -> list[ObjectKey]:
    """The idle holders of devices the claim could be given once they are released: matched
    by its class and selectors, their taints tolerated (the allocator's rule, `candidates`)."""
    found: set[ObjectKey] = set()
    for request in claim.requests:
        for alt in alternatives(request):
            for entry in match(alt, classes, entries).devices:
                if not blocking_taints(entry, alt):
                    found.add(held[entry.key])
    return sorted(found)


def _nodes_without_slices(index: IndexView) -> list[Condition]:
    nodes = [n for n in index.records(NODE) if isinstance(n, NodeRecord)]
    covered = {e.node for e in index.devices() if e.node is not None}
    out = []
    users: dict[str, set[str]] = defaultdict(set)  # node -> namespaces of its pods with claims
    for pod in index.records(POD):
        if isinstance(pod, PodRecord) and pod.node_name and (pod.claims or pod.extended_claim_name):
            users[pod.node_name].add(pod.meta.namespace)
    for node in gpu_nodes(nodes):
        name = node.meta.name
        if name in covered:
            continue
        out.append(Condition(
            GPU_NODE_WITHOUT_SLICES, index.cluster, "", name,
            f"node {name} looks like a GPU node, but no ResourceSlice publishes a device on it "
            "(the DRA driver is not installed there, or not running)",
            details={"node": name, "namespaces": sorted(users.get(name, ()))},
        ))  # fmt: skip
    return out


def _incomplete_pools(index: IndexView) -> list[Condition]:
    slices: dict[tuple[str, str], list[SliceRecord]] = defaultdict(list)
    for s in index.records(RESOURCE_SLICE):
        if isinstance(s, SliceRecord):
            slices[(s.driver, s.pool.name)].append(s)
    out = []
    for (driver, pool), members in sorted(slices.items()):
        newest = max(s.pool.generation for s in members)
        current = [s for s in members if s.pool.generation == newest]
        expected = max(s.pool.resource_slice_count for s in current)
        if len(current) >= expected:
            continue
        out.append(Condition(
            POOL_INCOMPLETE, index.cluster, "", f"{driver}/{pool}",
            f"pool {driver}/{pool} is incomplete: {len(current)} of {expected} slices of "
            f"generation {newest} published",
            details={"driver": driver, "pool": pool, "node": current[0].node_name,
                     "namespaces": _pool_namespaces(index, current)},
        ))  # fmt: skip
    return out


def _pool_namespaces(index: IndexView, slices: list[SliceRecord]) -> list[str]:
    """The namespaces of the claims holding devices the slices publish."""
    found: set[str] = set()
    for s in slices:
        for device in s.devices:
            key = DeviceKey(index.cluster, s.driver, s.pool.name, device.name)
            found.update(ref.claim.namespace for ref in index.holds(key))
    return sorted(found)


def _tainted_held(index: IndexView) -> list[Condition]:
    out = []
    for entry in (*index.devices(), *index.unpublished_devices()):
        taints = [t for t in shown(entry) if t.get("effect") in UNAVAILABLE_EFFECTS]
        if not taints or not index.held(entry.key):
            continue
        key = entry.key
        refs = index.holds(key)
        holders = sorted({_ref(ref.claim) for ref in refs})
        taint = taints[0]
        source = (
            f" by DeviceTaintRule {taint['rule']}"
            if "rule" in taint
            else " by its driver, in its ResourceSlice"
        )
        out.append(Condition(
            TAINTED_WHILE_HELD, index.cluster, "", f"{key.driver}/{key.pool}/{key.device}",
            f"device {key.driver}/{key.pool}/{key.device} is tainted "
            f"{taint.get('key')}={taint.get('value', '')}:{taint.get('effect')}{source} while "
            f"held by {', '.join(holders)}",
            since=taint.get("timeAdded"),
            details={"driver": key.driver, "pool": key.pool, "device": key.device,
                     "node": entry.node, "holders": holders, "uuid": entry.device.uuid,
                     "rule": taint.get("rule"),
                     "namespaces": sorted({ref.claim.namespace for ref in refs})},
        ))  # fmt: skip
    return out
