"""What-if: where the pods and claims of manifests would be allocated in one cluster, or why
they would wait, and behind whom.

`plan_cluster(expansion, inputs)` takes what `expansion.expand` says the controllers would
create and places it the way kube-scheduler would, pod after pod in manifest order, over the
cluster's mirrored state (`PlanInputs`):

* the nodes a pod may use: its `nodeName`, or the nodes its nodeSelector, required node
  affinity and tolerations admit, cordons and node taints weighed (`node_filter`, the one
  node filter, through `cluster.eligible_nodes`);
* a claim already allocated pins the pod to its node; a claim shared by several pods
  (`resourceClaimName`) is allocated with the first of them and then followed by the others;
* on the first node (by name) where every claim the pod still needs can be allocated
  (`placement.allocate`, the shared allocator: selectors, exclusivity, shareable capacity,
  partition counters, device taints and tolerations) and its CPU and memory fit beside the pods
  already bound there, the pod is placed, and what it took is held for the pods after it;
* otherwise the pod would wait: the claim that blocks it is diagnosed by `explain.explain_claim`
  (no devices left and who holds them, no device matches, class missing, …), holders the
  asker may not see are counted but not named, and the idle holders whose release would let
  the pod in are named (`freed_by`: the manual's cleanup candidates).

Claims and templates that no pod of the manifests uses are planned alone (as soon as a pod
uses them, with no node constraint). What a plan answers is in `plan_results`; the claims and
templates a pod resolves to come from `plan_claims`.

Nothing is written anywhere: what a plan takes is committed to the cluster's allocation
`Ledger` only while `plan_cluster` runs and released before it returns, even when it raises
(`Tentative`); there is no `await` in between, so no other reader sees it.

Promises: pure; deterministic for the same inputs; the ledger is left as it was found.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

import msgspec

from dra_mirror.service.diagnostics.cluster import eligible_nodes, pod_requests, shortfall
from dra_mirror.service.diagnostics.expansion import Expansion, PlannedClaim, PlannedPod
from dra_mirror.service.diagnostics.explain import ALLOCATABLE, MAX_HOLDERS, explain_claim
from dra_mirror.service.diagnostics.node_filter import NodeFacts, PodTerms, rejections
from dra_mirror.service.diagnostics.placement import allocate
from dra_mirror.service.diagnostics.plan_claims import PlanObjects
from dra_mirror.service.diagnostics.plan_freed import freed_by
from dra_mirror.service.diagnostics.plan_results import (
    CLAIMS_APART,
    INVALID,
    NO_NODES,
    NODE_NAME_PINNED,
    NODE_RESOURCES,
    PLACEABLE,
    SHARING_OFF,
    ClaimOutcome,
    ClusterPlan,
    ItemPlan,
    PlanInputs,
    Tentative,
    held_message,
    placed_message,
    without_driver,
)
from dra_mirror.service.diagnostics.verdicts import ALL_HELD, NOT_ENOUGH
from dra_mirror.service.model.records import (
    POD,
    RESOURCE_CLAIM,
    Allocation,
    ClaimRecord,
    DeviceEntry,
    Meta,
    ObjectKey,
    PodRecord,
)


def plan_cluster(expansion: Expansion, inputs: PlanInputs) -> ClusterPlan:
    """The plan of everything `expansion` creates, in one cluster (see the module docstring)."""
    planner = _Planner(inputs)
    try:
        return planner.run(expansion)
    finally:
        planner.tentative.undo()


class _Planner:
    def __init__(self, inputs: PlanInputs) -> None:
        self.inputs = inputs
        self.tentative = Tentative(inputs.ledger)
        self.objects = PlanObjects(inputs)
        self.nodes = {n.meta.name: n for n in inputs.nodes}
        self.planned: dict[tuple[str, str], ClaimRecord] = {}  # manifest claims, as allocated
        self.usage: dict[str, dict[str, Fraction]] = {}  # node -> CPU/memory planned pods take
        self._shares = itertools.count(1)
        self._free: dict[tuple[str, ...] | None, list[DeviceEntry]] = {}
        self._nodes_for: dict[bytes, list[str]] = {}
        self.planned_keys: set[ObjectKey] = set()  # claims this plan allocated
        self.promised: set[ObjectKey] = set()  # idle holders an earlier pod's release counts on

    # --- the items --------------------------------------------------------------------------

    def run(self, expansion: Expansion) -> ClusterPlan:
        plan = ClusterPlan(self.inputs.cluster)
        manifest_claims = self.objects.manifest_claims(expansion)
        for pod in expansion.pods:
            plan.items.append(self._pod(pod, manifest_claims, expansion))
        for namespace, name in expansion.unused_claims:
            claim = PlannedClaim(name, name, shared=True)
            alone = PlannedPod(f"ResourceClaim {namespace}/{name}", "ResourceClaim", namespace,
                               name, 0, {}, (claim,))  # fmt: skip
            plan.items.append(self._pod(alone, manifest_claims, expansion, kind="ResourceClaim"))
        for namespace, name in expansion.unused_templates:
            claim = PlannedClaim("claim", f"{name}-{'?' * 5}", template=name)
            alone = PlannedPod(f"ResourceClaimTemplate {namespace}/{name}",
                               "ResourceClaimTemplate", namespace, name, 0, {}, (claim,))  # fmt: skip
            plan.items.append(
                self._pod(alone, manifest_claims, expansion, kind="ResourceClaimTemplate")
            )
        return plan

    def _pod(
        self,
        pod: PlannedPod,
        manifest_claims: Mapping[tuple[str, str], ClaimRecord | str],
        expansion: Expansion,
        *,
        kind: str = POD,
    ) -> ItemPlan:
        item = ItemPlan(kind, pod.workload, pod.namespace, pod.name, pod.replica, "", "")
        record = (
            self.objects.pod_record(pod)
            if kind == POD
            else PodRecord(
                meta=Meta(cluster=self.inputs.cluster, name=pod.name, namespace=pod.namespace)
            )
        )
        if isinstance(record, str):
            item.verdict, item.message = INVALID, f"the pod cannot be read: {record}"
            return item
        claims: list[tuple[PlannedClaim, ClaimRecord]] = []
        for planned in pod.claims:
            found = self.objects.claim(self.planned, pod, planned, manifest_claims, expansion)
            if isinstance(found, tuple):
                item.verdict, item.message = found
                item.blocking_claim = planned.name
                return item
            claims.append((planned, found))
        if record.node_name and any(c.allocation is None for _, c in claims):
            item.verdict = NODE_NAME_PINNED
            item.message = (
                f"nodeName {record.node_name} bypasses the scheduler, which is what allocates "
                "claims: its claims would never be allocated (use a nodeSelector on "
                "kubernetes.io/hostname)"
            )
            return item
        nodes = self._eligible(record)
        if not nodes:
            item.verdict = NO_NODES
            facts = [NodeFacts.of_record(n) for _, n in sorted(self.nodes.items())]
            item.message = (
                "no node admits the pod (its nodeName, nodeSelector, node affinity and "
                f"tolerations against cordons and node taints): {rejections(PodTerms.of_record(record), facts)}"
            )
            return item
        placed = self._place(record, claims, nodes)
        if isinstance(placed, tuple):
            item.node, item.claims = placed
            item.verdict = PLACEABLE
            item.message = placed_message(item)
            return item
        self._wait(item, record, claims, nodes, placed)
        return item

    def _eligible(self, pod: PodRecord) -> list[str]:
        """The nodes the pod may use (the replicas of a workload share the answer)."""
        key = msgspec.json.encode(
            (pod.node_name, pod.node_selector, pod.required_node_affinity, pod.tolerations)
        )
        found = self._nodes_for.get(key)
        if found is None:
            found = self._nodes_for[key] = self._eligible_now(pod)
        return found

    def _eligible_now(self, pod: PodRecord) -> list[str]:
        if pod.node_name:
            node = self.nodes.get(pod.node_name)
            return [pod.node_name] if node is not None else []
        return eligible_nodes(
            pod.node_selector,
            self.nodes.values(),
            pod.required_node_affinity,
            tolerations=pod.tolerations,
        )

    # --- placing one pod --------------------------------------------------------------------

    def _candidates(self, nodes: list[str]) -> list[DeviceEntry]:
        """The devices usable on `nodes` (and network-attached ones) not held exclusively: the
        only ones a non-admin request can be given (the allocator checks each again). Kept for
        the plan: holds taken since only make the allocator refuse more of them."""
        key = None if len(nodes) == len(self.nodes) else tuple(nodes)
        found = self._free.get(key)
        if found is None:
            taken = self.inputs.ledger.taken
            # One pass over every device of the cluster (40,000 on a 5,000-node one): the
            # common test first, the rare ones (shareable, another node) after.
            found = [e for e in self.inputs.devices if e.device.shareable or not taken(e.key)]
            if key is not None:
                allowed = set(nodes)
                found = [e for e in found if e.node is None or e.node in allowed]
            self._free[key] = found
        return found

    def _place(
        self, pod: PodRecord, claims: list[tuple[PlannedClaim, ClaimRecord]], nodes: list[str]
    ) -> tuple[str | None, list[ClaimOutcome]] | dict[str, Any]:
        """(node, outcomes) with the holds committed, or what was seen on the way."""
        pinned = {
            c.allocation.node_name for _, c in claims if c.allocation and c.allocation.node_name
        }
        order: list[str] | None = sorted(pinned & set(nodes)) if pinned else None
        needed = [(p, c) for p, c in claims if c.allocation is None]
        admin = any(r.admin_access for _, c in needed for r in c.requests)
        devices = self.inputs.devices if admin else self._candidates(nodes)
        by_node: dict[str | None, list[DeviceEntry]] = {}
        for entry in devices:
            by_node.setdefault(entry.node, []).append(entry)
        if order is None:
            if not needed or by_node.get(None):
                order = nodes
            else:
                allowed = set(nodes)
                order = sorted(n for n in by_node if n is not None and n in allowed)
        wanted = pod_requests(pod)
        seen: dict[str, Any] = {"room": [], "tried": 0}
        for node in order:
            if wanted and (why := self._no_room(node, wanted)) is not None:
                seen["room"].append((node, why))
                continue
            seen["tried"] += 1
            mark = self.tentative.mark()
            outcomes = self._allocate_all(
                needed, node, by_node.get(node, []) + by_node.get(None, [])
            )
            if outcomes is None:
                self.tentative.undo(mark)
                continue
            done = {id(c): o for (_, c), o in zip(needed, outcomes, strict=True)}
            result = []
            for planned, claim in claims:
                if id(claim) in done:
                    result.append(done[id(claim)])
                    self._remember(planned, claim, done[id(claim)])
                else:
                    assert claim.allocation is not None
                    result.append(ClaimOutcome(planned, claim.allocation.node_name,
                                               claim.allocation.results, allocated_before=True))  # fmt: skip
            if wanted:
                used = self.usage.setdefault(node, {})
                for resource, amount in wanted.items():
                    used[resource] = used.get(resource, Fraction(0)) + amount
            return node, result
        return seen

    def _allocate_all(
        self, needed: list[tuple[PlannedClaim, ClaimRecord]], node: str, devices: list[DeviceEntry]
    ) -> list[ClaimOutcome] | None:
        outcomes = []
        for planned, claim in needed:
            found = allocate(claim, classes=self.inputs.classes, devices=devices,
                             ledger=self.inputs.ledger, node=node, share_id=self._share_id)  # fmt: skip
            if not isinstance(found, Allocation):
                return None
            self.tentative.commit(_key(claim), found)
            self.planned_keys.add(_key(claim))
            outcomes.append(ClaimOutcome(planned, found.node_name, found.results,
                                         network=found.node_name is None))  # fmt: skip
        return outcomes

    def _remember(self, planned: PlannedClaim, claim: ClaimRecord, outcome: ClaimOutcome) -> None:
        """A shared claim allocated with one pod: the pods after it find it allocated."""
        if planned.template is None:
            allocation = Allocation(results=outcome.results, node_name=outcome.node)
            self.planned[(claim.meta.namespace, claim.meta.name)] = _with(claim, allocation)

    def _share_id(self) -> str:
        return f"plan-{next(self._shares)}"

    def _no_room(self, node: str, wanted: Mapping[str, Fraction]) -> tuple[str, str, str] | None:
        record = self.nodes.get(node)
        if record is None:
            return None
        used: dict[str, Fraction] = dict(self.usage.get(node, {}))
        for other in self.inputs.pods_on(node):
            if other.phase in ("Succeeded", "Failed"):
                continue
            for resource, amount in pod_requests(other).items():
                used[resource] = used.get(resource, Fraction(0)) + amount
        return shortfall(wanted, record, used)

    # --- why it would wait ------------------------------------------------------------------

    def _wait(
        self,
        item: ItemPlan,
        pod: PodRecord,
        claims: list[tuple[PlannedClaim, ClaimRecord]],
        nodes: list[str],
        seen: dict[str, Any],
    ) -> None:
        allowed = set(nodes)
        wanted = pod_requests(pod)
        lacking = [(n, why) for n in nodes if wanted and (why := self._no_room(n, wanted))]
        if lacking and len(lacking) == len(nodes):
            # kube-scheduler's NodeResourcesFit filters before DynamicResources: when no node
            # the pod may use has room for it, that is what it says, whatever the devices.
            node, (resource, requested, allocatable) = lacking[0]
            item.verdict = NODE_RESOURCES
            item.message = (
                f"the pod fits on none of the {len(nodes)} node(s) it may use: {node} lacks "
                f"{resource} ({requested} requested with the pods already there, {allocatable} "
                "allocatable)"
            )
            return
        needed = [(p, c) for p, c in claims if c.allocation is None]
        for planned, claim in needed:
            # Every device: explain_claim keeps to `nodes` itself, and says what is elsewhere.
            diagnosis = explain_claim(
                claim, classes=self.inputs.classes, devices=self.inputs.devices,
                ledger=self.inputs.ledger,
                claims=self.inputs.claims, pods=self.inputs.pods, nodes=self.inputs.nodes,
                eligible_nodes=nodes, visible=self.inputs.visible,
            )  # fmt: skip
            if diagnosis.verdict == ALLOCATABLE:
                continue  # this claim alone fits: another one (or the node's room) blocks
            item.blocking_claim = planned.name
            # Decided on every holder; those outside the asker's scope counted, not named.
            item.verdict, item.requests = diagnosis.verdict, diagnosis.requests
            visible = diagnosis.holders
            item.holders = visible
            item.holders_hidden = diagnosis.holders_hidden
            item.message = diagnosis.message
            ours = {h.claim for h in visible if h.claim in self.planned_keys}
            for holder in visible:
                if holder.claim in ours:
                    holder.idle = False  # a pod of this plan, placed before this one
            if item.verdict in (ALL_HELD, SHARING_OFF) and ours:
                item.verdict = ALL_HELD
                item.message = held_message(
                    diagnosis.requests, visible, item.holders_hidden, ours
                ) + without_driver(diagnosis.nodes_without_driver)
            if item.verdict in (ALL_HELD, NOT_ENOUGH, SHARING_OFF):
                holders = sorted(visible + diagnosis.withheld, key=lambda h: (not h.idle, h.claim))
                freed_by(self, item, pod, claims, nodes, holders[:MAX_HOLDERS])
            return
        if seen["room"]:
            # Each claim fits alone, not on the nodes with room: only nodes without room for
            # the pod have the devices it needs.
            node, (resource, requested, allocatable) = seen["room"][0]
            item.verdict = NODE_RESOURCES
            item.message = (
                f"the devices it needs are free only on node(s) without room for the pod: "
                f"{node} lacks {resource} ({requested} requested with the pods "
                f"already there, {allocatable} allocatable)"
            )
            return
        item.verdict = CLAIMS_APART
        pinned = sorted(
            {c.allocation.node_name for _, c in claims if c.allocation and c.allocation.node_name}
        )
        if len(pinned) > 1 or (pinned and pinned[0] not in allowed):
            item.message = (
                f"its claims are allocated on {', '.join(pinned)}: no node the pod may use has "
                "them all"
            )
        else:
            item.message = (
                "each of the pod's claims could be allocated alone, but no node the pod may use "
                "can give them all at once"
            )


def _key(claim: ClaimRecord) -> ObjectKey:
    meta = claim.meta
    return ObjectKey(meta.cluster, RESOURCE_CLAIM, meta.namespace, meta.name)


def _with(claim: ClaimRecord, allocation: Allocation) -> ClaimRecord:
    return msgspec.structs.replace(claim, allocation=allocation)
