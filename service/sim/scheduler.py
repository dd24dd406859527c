"""What kube-scheduler knows about one simulated cluster, and where it would place a pod.

`SchedulerState` is the scheduler's cache, kept current from store events: normalized device
classes, slices and claims, the devices of each node, the allocation `Ledger`, and per node
the bound pods and the device-plugin resources they use. `SchedulerState.place` filters nodes
in name order by nodeName, nodeSelector, required node affinity, cordons, readiness and node
taints against the pod's tolerations (with `service.diagnostics.node_filter`, the rules
`explainClaim` and `plan` read eligible nodes by), pod count, CPU and memory requests against
the node's allocatable (as `plan` counts them, `service.diagnostics.cluster.spec_requests`) and device-plugin extended resources; on the first node where every unallocated claim of the pod (and the
extended-resource claim, see `service.sim.extended`) can be allocated by
`service.diagnostics.placement.allocate` — the same pure code `explainClaim` uses — it returns
the allocations; otherwise kube-scheduler's message ("0/3 nodes are available: 1 cannot
allocate all claims, …").

Promises: no writes (the controller writes what `place` decides); a tentative allocation is
committed to the ledger and must be released by the caller if it is not written; a verdict
"does not fit on node N" is remembered until devices are released on N or slices, classes or
nodes change; deterministic for the same store contents (node and device order).
"""

from __future__ import annotations

import gc
import re
from collections import Counter
from collections.abc import Callable, Iterable
from fractions import Fraction
from typing import Any

import msgspec

from dra_mirror.service.diagnostics import node_filter
from dra_mirror.service.diagnostics.cel import rule_selector_matches
from dra_mirror.service.diagnostics.cluster import NODE_RESOURCES, spec_requests
from dra_mirror.service.diagnostics.ledger import Ledger
from dra_mirror.service.diagnostics.placement import allocate
from dra_mirror.service.model.holdings import Holdings
from dra_mirror.service.model.normalize import MalformedObject, normalize
from dra_mirror.service.model.pools import valid_devices
from dra_mirror.service.model.quantity import parse_quantity
from dra_mirror.service.model.records import (
    DEVICE_CLASS,
    DEVICE_TAINT_RULE,
    RESOURCE_CLAIM,
    RESOURCE_SLICE,
    Allocation,
    ClaimRecord,
    DeviceClassRecord,
    DeviceEntry,
    ObjectKey,
    SliceRecord,
    TaintRuleRecord,
)
from dra_mirror.service.model.records import key_of as record_key
from dra_mirror.service.model.taint_rules import NO_CEL, RuleMatching, with_rules
from dra_mirror.service.sim.extended import ExtendedClaim, extended_claim, extended_requests
from dra_mirror.service.sim.shapes import node_ip, pod_ip
from dra_mirror.service.sim.store import ClusterStore

__all__ = ["TERMINAL_PHASES", "SchedulerState", "device_entries"]

TERMINAL_PHASES = ("Succeeded", "Failed")


class SchedulerState:
    """The scheduler's cache of one cluster, kept current from store events: normalized
    classes, slices and claims, devices per node, the allocation `Ledger`, and per node the
    bound pods and the device-plugin resources they use."""

    def __init__(self, cluster: str) -> None:
        self.cluster = cluster
        self.classes: dict[str, DeviceClassRecord] = {}
        self.slices: dict[str, SliceRecord] = {}
        self.rules: dict[str, TaintRuleRecord] = {}  # DeviceTaintRules by name
        self.claims: dict[ObjectKey, ClaimRecord] = {}
        self.nodes: dict[str, dict] = {}
        self.node_facts: dict[str, node_filter.NodeFacts] = {}  # what the node filter reads
        self.node_index: dict[str, int] = {}
        self.bound: dict[tuple[str, str], str] = {}  # pod -> node
        self.on_node: dict[str, dict[tuple[str, str], dict[str, Fraction]]] = {}  # node -> pods
        self._ip_slots: dict[str, int] = {}
        # node -> claim sets that did not fit there. Allocations only take devices away, so a
        # verdict holds until something is released on that node (kube-scheduler's queueing
        # hints serve the same purpose): full nodes are skipped without running the allocator.
        self._misses: dict[str, set[bytes]] = {}
        self._devices: dict[str | None, list[DeviceEntry]] | None = None
        self._ledger: Ledger | None = None

    @classmethod
    def load(cls, store: ClusterStore) -> SchedulerState:
        state = cls(store.name)
        # Tens of thousands of new records: keep the cyclic GC from walking the heap each time.
        enabled = gc.isenabled()
        gc.disable()
        try:
            for plural in (
                "deviceclasses",
                "devicetaintrules",
                "resourceslices",
                "resourceclaims",
                "nodes",
                "pods",
            ):
                for obj in store.iter_objects(plural):
                    state.observe("ADDED", plural, obj)
            state.ledger  # noqa: B018 (build the ledger now, under the same pause)
        finally:
            if enabled:
                gc.enable()
        return state

    # ---- keeping current ---------------------------------------------------------------------

    def observe(self, kind: str, plural: str, obj: dict) -> set[str] | None:
        """Fold one store event in; the nodes where devices were released, if any."""
        released = self._observe(kind, plural, obj)
        if plural in ("deviceclasses", "devicetaintrules", "resourceslices", "nodes"):
            self._misses.clear()  # new devices, selectors or node facts: every verdict is stale
        elif released:
            for node in released:
                self._misses.pop(node, None)
        return released

    def _observe(self, kind: str, plural: str, obj: dict) -> set[str] | None:
        name = obj["metadata"]["name"]
        gone = kind == "DELETED"
        if plural == "deviceclasses":
            self._put(
                self.classes, name, None if gone else _record(DEVICE_CLASS, obj, self.cluster)
            )
            if self.rules:
                self._devices = None  # a rule naming the class may select other devices now
                self._ledger = None
        elif plural == "devicetaintrules":
            self._put(
                self.rules, name, None if gone else _record(DEVICE_TAINT_RULE, obj, self.cluster)
            )
            self._devices = None
            self._ledger = None
            return set(self.nodes) if gone else None
        elif plural == "resourceslices":
            self._put(
                self.slices, name, None if gone else _record(RESOURCE_SLICE, obj, self.cluster)
            )
            self._devices = None
            self._ledger = None
            return set(self.nodes) if gone else None
        elif plural == "resourceclaims":
            return self._claim(obj, gone)
        elif plural == "nodes":
            self.node_facts.pop(name, None)
            if gone:
                self.nodes.pop(name, None)
            else:
                self.nodes[name] = obj
                self.node_index.setdefault(name, len(self.node_index))
        elif plural == "pods":
            return self._pod(obj, gone)
        return None

    @staticmethod
    def _put(table: dict, key: Any, value: Any) -> None:
        if value is None:
            table.pop(key, None)
        else:
            table[key] = value

    def _claim(self, obj: dict, gone: bool) -> set[str] | None:
        record = None if gone else _record(RESOURCE_CLAIM, obj, self.cluster)
        key = ObjectKey(
            self.cluster,
            "ResourceClaim",
            obj["metadata"].get("namespace", ""),
            obj["metadata"]["name"],
        )
        old = self.claims.pop(key, None)
        if isinstance(record, ClaimRecord):
            self.claims[key] = record
        new_allocation = record.allocation if isinstance(record, ClaimRecord) else None
        old_allocation = old.allocation if old is not None else None
        if self._ledger is not None and new_allocation != old_allocation:
            self._ledger.release(key)
            if new_allocation is not None:
                self._ledger.commit(key, new_allocation)
        if old_allocation is not None and new_allocation is None:
            return {old_allocation.node_name} if old_allocation.node_name else set(self.nodes)
        return None

    def _pod(self, obj: dict, gone: bool) -> set[str] | None:
        key = (obj["metadata"].get("namespace", ""), obj["metadata"]["name"])
        node = obj["spec"].get("nodeName")
        phase = (obj.get("status") or {}).get("phase")
        if gone or not node or phase in TERMINAL_PHASES:
            previous = self.bound.pop(key, None)
            if previous is None:
                return None
            usage = self.on_node.get(previous, {}).pop(key, None)
            return {previous} if usage else None
        self.bound[key] = node
        self.on_node.setdefault(node, {})[key] = _requests(obj)
        return None

    # ---- derived views -----------------------------------------------------------------------

    @property
    def devices(self) -> dict[str | None, list[DeviceEntry]]:
        """Devices of the valid generation of every pool, by node (None: not node-local)."""
        if self._devices is None:
            matching = RuleMatching(self.classes.get, rule_selector_matches)
            self._devices = device_entries(self.slices.values(), self.rules.values(), matching)
        return self._devices

    @property
    def ledger(self) -> Ledger:
        if self._ledger is None:
            entries = [e for group in self.devices.values() for e in group]
            self._ledger = Ledger(
                Holdings.build(entries, self.claims.values(), slices=self.slices.values())
            )
        return self._ledger

    def claim_record(self, claim: dict) -> ClaimRecord:
        key = ObjectKey(
            self.cluster, "ResourceClaim", claim["metadata"]["namespace"], claim["metadata"]["name"]
        )
        record = self.claims.get(key)
        if record is None:
            record = _record(RESOURCE_CLAIM, claim, self.cluster)
        return record

    def addresses(self, node: str) -> tuple[str, str]:
        """The node's InternalIP and a pod IP from its range (the next free slot)."""
        index = self.node_index.get(node, 0)
        # Like a CNI's host-local IPAM: the next address of the node's range, not reused.
        used = self._ip_slots[node] = self._ip_slots.get(node, 0) + 1
        addresses = ((self.nodes.get(node) or {}).get("status") or {}).get("addresses") or []
        host = next((a["address"] for a in addresses if a.get("type") == "InternalIP"), None)
        return host or node_ip(index), pod_ip(index, used)

    # ---- placing a pod -----------------------------------------------------------------------

    def place(
        self,
        pod: dict,
        claims: list[ClaimRecord],
        *,
        nodes: set[str] | None,
        share_id: Callable[[], str],
    ) -> tuple[str, dict[ObjectKey, Allocation], ExtendedClaim | None] | str:
        """The first node (by name) where the pod and all its claims fit, with the new
        allocations (and the extended-resource claim the scheduler must create, if the pod's
        `limits` name a DeviceClass's extended resource that no device plugin offers on that
        node); or kube-scheduler's message saying why no node fits."""
        reasons: Counter[str] = Counter()
        candidates = sorted(self.nodes) if nodes is None else sorted(nodes & self.nodes.keys())
        ledger = self.ledger
        missing = [c for c in claims if c.allocation is None]
        wanted = extended_requests(pod)
        requests = _requests(pod)  # NodeResourcesFit's, read once for every node
        terms = node_filter.PodTerms.of_spec(pod["spec"])
        by_dra = self.extended_classes() if wanted else {}
        for name in candidates:
            allocatable = (self.nodes[name].get("status") or {}).get("allocatable") or {}
            dra = {r: by_dra[r] for r in wanted if r not in allocatable and r in by_dra}
            extended = extended_claim(pod, dra, self.cluster) if dra else None
            why = self._node_misfit(terms, self.nodes[name], requests, skip=dra.keys())
            if why is None and any(
                c.allocation is not None and c.allocation.node_name not in (None, name)
                for c in claims
            ):
                why = "node(s) unavailable due to one or more resource claims"
            if why is not None:
                reasons[why] += 1
                continue
            wanted_claims = missing + ([extended.record] if extended else [])
            signature = msgspec.json.encode([(c.requests, c.constraints) for c in wanted_claims])
            if signature in self._misses.get(name, ()):
                reasons["cannot allocate all claims"] += 1
                continue
            devices = self.devices.get(name, []) + self.devices.get(None, [])
            done: dict[ObjectKey, Allocation] = {}
            for claim in wanted_claims:
                result = allocate(
                    claim,
                    classes=self.classes,
                    devices=devices,
                    ledger=ledger,
                    node=name,
                    share_id=share_id,
                )
                if not isinstance(result, Allocation):
                    break
                ledger.commit(record_key(claim), result)
                done[record_key(claim)] = result
            else:
                if extended is not None:
                    extended.allocation = done[record_key(extended.record)]
                return name, done, extended
            for key in done:
                ledger.release(key)
            self._misses.setdefault(name, set()).add(signature)
            reasons["cannot allocate all claims"] += 1
        if not self.nodes:
            return "no nodes available to schedule pods"
        total = len(self.nodes)
        detail = ", ".join(f"{n} {why}" for why, n in sorted(reasons.items()))
        return (
            f"0/{total} nodes are available: {detail}. preemption: 0/{total} nodes are "
            f"available: {total} Preemption is not helpful for scheduling."
        )

    def extended_classes(self) -> dict[str, str]:
        """Extended resource name -> the DeviceClass that provides it through DRA: the class's
        `extendedResourceName`, and implicitly `deviceclass.resource.kubernetes.io/<class>`.
        (Kubernetes lets the newest class win a shared name; here the first by name does.)"""
        out: dict[str, str] = {}
        for name in sorted(self.classes):
            out.setdefault(f"deviceclass.resource.kubernetes.io/{name}", name)
            explicit = self.classes[name].extended_resource_name
            if explicit:
                out.setdefault(explicit, name)
        return out

    def _node_misfit(
        self,
        terms: node_filter.PodTerms,
        node: dict,
        requests: dict[str, Fraction],
        *,
        skip: Iterable[str] = (),
    ) -> str | None:
        name = node["metadata"]["name"]
        facts = self.node_facts.get(name)
        if facts is None:
            facts = self.node_facts[name] = node_filter.NodeFacts.of_raw(node)
        why = node_filter.misfit(terms, facts)
        if why is not None:
            return why
        here = list(self.on_node.get(name, {}).values())
        allocatable = (node.get("status") or {}).get("allocatable") or {}
        if len(here) >= int(allocatable.get("pods", 110)):
            return "Too many pods"
        for resource, amount in requests.items():
            if resource in skip:
                continue
            if resource in NODE_RESOURCES and resource not in allocatable:
                continue  # NodeResourcesFit weighs what the node states
            used = sum((u.get(resource, Fraction(0)) for u in here), Fraction(0))
            if used + amount > parse_quantity(allocatable.get(resource, "0")):
                return f"Insufficient {resource}"
        return None


def _requests(pod: dict) -> dict[str, Fraction]:
    """What NodeResourcesFit counts of a pod: its CPU and memory requests (`spec_requests`,
    as `plan` counts them) and the device-plugin resources in its limits."""
    return {**spec_requests(pod["spec"]), **extended_requests(pod)}


def _record(kind: str, obj: dict, cluster: str) -> Any:
    try:
        return normalize(kind, obj, cluster=cluster)
    except MalformedObject:
        return None  # the API server validated it; a record that fails here is not placeable


def _natural(text: str) -> tuple:
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text))


def _slice_order(sl: SliceRecord) -> tuple:
    first = sl.devices[0].name if sl.devices else ""
    return (sl.driver, sl.pool.name, _natural(first), sl.meta.name)


def device_entries(
    slices: Iterable[SliceRecord],
    rules: Iterable[TaintRuleRecord] = (),
    matching: RuleMatching = NO_CEL,
) -> dict[str | None, list[DeviceEntry]]:
    """Devices of the valid generation of each pool (`service.model.pools`, the mirror's own
    rules) with the taints the DeviceTaintRules put on them (`service.model.taint_rules`, as
    the mirror's index reads them), grouped by the node they are on (None: not node-local)."""
    slices = list(slices)
    if not slices:
        return {}
    entries = valid_devices(slices[0].meta.cluster, slices)
    rules = list(rules)
    if rules:
        entries = [with_rules(e, rules, matching) for e in entries]
    # Within a node, devices in the drivers' order (gpu-0 … gpu-7), whatever the slice names;
    # the sort is stable, so a slice keeps its own device order.
    order = {record_key(sl): _slice_order(sl) for sl in slices}
    entries.sort(key=lambda entry: order[entry.slice] if entry.slice is not None else ())
    by_node: dict[str | None, list[DeviceEntry]] = {}
    for entry in entries:
        by_node.setdefault(entry.node, []).append(entry)
    return by_node
