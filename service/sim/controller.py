"""kube-scheduler, kubelet and the resource-claim controller, as far as DRA needs them.

A `Controller` listens to one `ClusterStore` (so pods created by a scenario, by churn or by
`kubectl apply` against the simulator are all handled the same way) and does what those
three components do to DRA objects:

* **resource-claim controller** (kube-controller-manager): for each `resourceClaimTemplateName`
  of a new pod, create the claim exactly as Kubernetes does — `generateName` `<pod>-<claim>-`
  (both parts truncated proportionally when longer than 57 characters), the
  `resource.kubernetes.io/pod-claim-name` annotation, the template's labels and annotations,
  a Pod controller ownerReference with blockOwnerDeletion — and record its name in
  `pod.status.resourceClaimStatuses`. When a pod ends (deleted, Succeeded, Failed): remove it
  from `reservedFor`; delete the claims generated for it; deallocate a claim that carries the
  `resource.kubernetes.io/delete-protection` finalizer once nothing reserves it. A claim
  allocated by hand (no finalizer) stays allocated: that is the "idle holder" of DESIGN.md.
* **kube-scheduler**: nodes in name order, filtered by nodeSelector, readiness, pod count and
  device-plugin extended resources (`limits: nvidia.com/gpu` the old way); on the first node
  where every unallocated claim of the pod can be allocated by
  `service.diagnostics.placement.allocate` — the same pure code `explainClaim` uses — write
  `status.allocation` (+ the finalizer) and `status.reservedFor`, and bind the pod. If no node
  fits, the pod stays Pending with `PodScheduled=False`, reason `Unschedulable` and the
  scheduler's message ("0/3 nodes are available: 1 cannot allocate all claims, …"); it is
  retried when devices are released on a node, or nodes and slices appear.
* **kubelet**: a bound pod turns Running (after `start_delay` seconds when an event loop runs).

Promises: deterministic for a seed (node order, share ids, pod IPs); reentrant-safe (store
listeners are synchronous: work queued while handling is drained in order, never recursively);
bookkeeping (claims, devices, ledger) is updated from every store event, whoever wrote it.
"""

from __future__ import annotations

import asyncio
import gc
import hashlib
import logging
import re
import uuid
from collections import Counter, deque
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from fractions import Fraction
from typing import Any

import msgspec

from service.diagnostics.ledger import Ledger
from service.diagnostics.placement import allocate
from service.model.normalize import MalformedObject, normalize
from service.model.quantity import parse_quantity
from service.model.records import (
    DELETE_PROTECTION_FINALIZER,
    DEVICE_CLASS,
    EXTENDED_RESOURCE_CLAIM_ANNOTATION,
    POD_CLAIM_NAME_ANNOTATION,
    RESOURCE_CLAIM,
    RESOURCE_SLICE,
    Allocation,
    ClaimRecord,
    DeviceClassRecord,
    DeviceEntry,
    DeviceKey,
    ObjectKey,
    SliceRecord,
)
from service.model.records import key_of as record_key
from service.sim.errors import ApiError
from service.sim.generate import (
    allocation_dict,
    node_ip,
    pod_ip,
    running_status,
    scheduled_condition,
)
from service.sim.store import ClusterStore, timestamp

__all__ = ["Controller", "SchedulerState", "claim_from_template", "device_entries", "generate_name"]

log = logging.getLogger(__name__)

_TERMINAL = ("Succeeded", "Failed")
MAX_RESERVED_FOR = 256  # ResourceClaimReservedForMaxSize
MAX_GENERATE_BASE = 57  # leaves room for 5 random characters within a 63-character name


def generate_name(pod_name: str, pod_claim_name: str) -> str:
    """The claim `generateName` kube-controller-manager uses (resourceclaim controller):
    `<pod>-<claim>-`, or both parts cut proportionally (and no trailing dash) when too long."""
    base = f"{pod_name}-{pod_claim_name}-"
    if len(base) > MAX_GENERATE_BASE:
        total = len(base)
        base = (
            pod_name[: len(pod_name) * MAX_GENERATE_BASE // total]
            + "-"
            + pod_claim_name[: len(pod_claim_name) * MAX_GENERATE_BASE // total]
        )
    return base


class Controller:
    """The DRA-relevant control loops of one simulated cluster (see the module docstring)."""

    def __init__(
        self,
        store: ClusterStore,
        *,
        start_delay: float = 0.0,
        seed: str = "",
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self.store = store
        self.cluster = store.name
        self.start_delay = start_delay
        self._seed = seed
        self._clock = clock or (lambda: datetime.now(UTC))
        self._queue: deque[tuple[str, Any]] = deque()
        self._busy = False
        self._shares = 0
        self._state: SchedulerState | None = None  # built on first need
        self.pending: dict[tuple[str, str], None] = {}  # Unschedulable pods, in arrival order
        self.scheduled = 0
        self.unschedulable = 0

    # ---- wiring ----------------------------------------------------------------------------

    def attach(self) -> None:
        """Listen to the store; pick up pods that are waiting already."""
        self.store.add_listener(self._on_event)
        for pod in self.store.iter_objects("pods"):
            if _waiting(pod):
                if _unschedulable(pod):
                    self.pending[_pod_key(pod)] = None
                else:
                    self._queue.append(("schedule", _pod_key(pod)))
        self._drain()

    @property
    def state(self) -> SchedulerState:
        if self._state is None:
            self._state = SchedulerState.load(self.store)
        return self._state

    def _on_event(self, kind: str, plural: str, obj: dict) -> None:
        if self._state is not None:
            released = self._state.observe(kind, plural, obj)
            if released:
                self._queue.append(("retry", released))
        if plural == "pods":
            if kind == "ADDED" and _waiting(obj):
                self._queue.append(("schedule", _pod_key(obj)))
            elif kind == "ADDED" and _bound_by_hand(obj):
                self._queue.append(("kubelet", _pod_key(obj)))
            elif kind == "DELETED" or _ended(obj):
                self._queue.append(("end", obj))
        elif kind == "DELETED":
            pass
        elif plural == "nodes":
            self._queue.append(("retry", {obj["metadata"]["name"]}))
        elif plural == "resourceslices":
            node = (obj.get("spec") or {}).get("nodeName")
            self._queue.append(("retry", {node} if node else None))
        elif plural == "deviceclasses":
            self._queue.append(("retry", None))
        elif plural == "resourceclaims" and kind == "ADDED" and self.pending:
            self._queue.append(
                ("claim", (obj["metadata"].get("namespace"), obj["metadata"]["name"]))
            )
        self._drain()

    def _drain(self) -> None:
        if self._busy:
            return
        self._busy = True
        try:
            while self._queue:
                action, arg = self._queue.popleft()
                try:
                    self._act(action, arg)
                except ApiError as error:
                    # A write the API server refused (e.g. a claim changed under us): the
                    # object is left as it is, the next event retries, the client's own
                    # request is never failed by the world's reaction to it. Tentative holds
                    # may be left in the ledger: rebuild the cache from the store.
                    self._state = None
                    log.warning(
                        "sim controller: %s failed: %s %s",
                        action,
                        error.code,
                        error.message,
                        extra={"cluster": self.cluster},
                    )
        finally:
            self._busy = False

    def _act(self, action: str, arg: Any) -> None:
        if action == "schedule":
            self._schedule(arg)
        elif action == "end":
            self._end(arg)
        elif action == "retry":
            self._retry(arg)
        elif action == "claim":
            self._retry_users(*arg)
        elif action == "kubelet":
            self._run_bound(arg)

    # ---- scheduling ------------------------------------------------------------------------

    def _retry(self, nodes: set[str] | None) -> None:
        for key in list(self.pending):
            if key in self.pending:
                self._schedule(key, nodes=nodes)

    def _retry_users(self, namespace: str, claim: str) -> None:
        """A claim appeared: pods waiting for it by name may now fit."""
        for key in [k for k in self.pending if k[0] == namespace]:
            pod = self.store.stored("pods", key)
            if pod is not None and any(
                e.get("resourceClaimName") == claim for e in pod["spec"].get("resourceClaims") or []
            ):
                self.pending.pop(key, None)
                self._schedule(key)

    def _schedule(self, key: tuple[str, str], *, nodes: set[str] | None = None) -> None:
        pod = self.store.get("pods", key[0], key[1])
        if pod is None or not _waiting(pod):
            self.pending.pop(key, None)
            return
        claims = self._pod_claims(pod)
        if isinstance(claims, str):
            self._unschedulable(pod, claims)
            return
        state = self.state
        records = [state.claim_record(c) for c in claims]
        placed = state.place(pod, records, nodes=nodes, share_id=self._share_id)
        if isinstance(placed, str):
            if nodes is None or key not in self.pending:
                self._unschedulable(pod, placed)
            return
        node, allocations, extended = placed
        for claim, record in zip(claims, records, strict=True):
            self._reserve(claim, pod, allocations.get(record_key(record)))
        if extended is not None:
            # Created at PreBind, after the node is chosen; the tentative hold is replaced by
            # the real claim's as its events arrive.
            state.ledger.release(record_key(extended.record))
            created = self.store.create("resourceclaims", extended.body)
            self._reserve(created, pod, extended.allocation)
            status = {
                "resourceClaimName": created["metadata"]["name"],
                "requestMappings": extended.mappings,
            }
            self.store.patch(
                "pods",
                key[0],
                key[1],
                {"status": {"extendedResourceClaimStatus": status}},
                subresource="status",
            )
        self.pending.pop(key, None)
        self.scheduled += 1
        self._bind(pod, node)

    def _run_bound(self, key: tuple[str, str]) -> None:
        """A pod created with spec.nodeName skips the scheduler: kubelet runs it if its claims
        are allocated and usable there; otherwise it stays Pending, as kubelet leaves it."""
        pod = self.store.get("pods", key[0], key[1])
        if pod is None or not _bound_by_hand(pod):
            return
        claims = self._pod_claims(pod)
        if isinstance(claims, str):
            return
        node = pod["spec"]["nodeName"]
        for claim in claims:
            allocation = self.state.claim_record(claim).allocation
            if allocation is None or allocation.node_name not in (None, node):
                return
        for claim in claims:
            self._reserve(claim, pod, None)
        self._start(key[0], key[1])

    def _share_id(self) -> str:
        self._shares += 1
        digest = hashlib.sha256(f"{self._seed}/share/{self._shares}".encode()).digest()
        return str(uuid.UUID(bytes=digest[:16], version=4))

    def _pod_claims(self, pod: dict) -> list[dict] | str:
        """The pod's claims (creating template claims first); a message if one is missing."""
        meta = pod["metadata"]
        ns = meta["namespace"]
        statuses = {
            s["name"]: s.get("resourceClaimName")
            for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []
        }
        claims: list[dict] = []
        created = False
        problem = None
        for entry in pod["spec"].get("resourceClaims") or []:
            claim, problem, new = self._pod_claim(pod, entry, statuses)
            created = created or new
            if problem is not None:
                break
            claims.append(claim)
        if created:
            # Recorded at once, so that a retry finds the claims instead of making more.
            status = [{"name": n, "resourceClaimName": c} for n, c in statuses.items()]
            self.store.patch(
                "pods",
                ns,
                meta["name"],
                {"status": {"resourceClaimStatuses": status}},
                subresource="status",
            )
        return problem if problem is not None else claims

    def _pod_claim(
        self, pod: dict, entry: dict, statuses: dict[str, str | None]
    ) -> tuple[dict, str | None, bool]:
        """One pod.spec.resourceClaims entry: (claim, problem, created)."""
        meta = pod["metadata"]
        ns = meta["namespace"]
        created = False
        if entry.get("resourceClaimName"):
            claim = self.store.get("resourceclaims", ns, entry["resourceClaimName"])
            if claim is None:
                return {}, f'resourceclaim "{entry["resourceClaimName"]}" not found', False
            reserved = (claim.get("status") or {}).get("reservedFor") or []
            if len(reserved) >= MAX_RESERVED_FOR and all(
                r.get("uid") != meta["uid"] for r in reserved
            ):
                message = f'resourceclaim "{entry["resourceClaimName"]}" is in use by too many pods'
                return {}, message, False
        else:
            name = statuses.get(entry["name"])
            claim = self.store.get("resourceclaims", ns, name) if name else None
            if claim is None:
                template_name = entry["resourceClaimTemplateName"]
                template = self.store.get("resourceclaimtemplates", ns, template_name)
                if template is None:
                    message = (
                        f'resource claim template "{template_name}": '
                        "resourceclaimtemplate not found"
                    )
                    return {}, message, False
                claim = self.store.create(
                    "resourceclaims", claim_from_template(pod, entry["name"], template)
                )
                statuses[entry["name"]] = claim["metadata"]["name"]
                created = True
        if claim["metadata"].get("deletionTimestamp"):
            return {}, f'resourceclaim "{claim["metadata"]["name"]}" is being deleted', created
        return claim, None, created

    def _reserve(self, claim: dict, pod: dict, allocation: Allocation | None) -> None:
        meta = claim["metadata"]
        status = dict(claim.get("status") or {})
        if allocation is not None:
            status["allocation"] = allocation_dict(allocation)
            if DELETE_PROTECTION_FINALIZER not in (meta.get("finalizers") or []):
                # The scheduler adds the finalizer before it writes the allocation.
                meta["finalizers"] = [*(meta.get("finalizers") or []), DELETE_PROTECTION_FINALIZER]
                claim = self.store.update("resourceclaims", claim)
        reserved = list(status.get("reservedFor") or [])
        pod_meta = pod["metadata"]
        if not any(r.get("uid") == pod_meta["uid"] for r in reserved):
            reserved.append({"resource": "pods", "name": pod_meta["name"], "uid": pod_meta["uid"]})
        status["reservedFor"] = reserved
        self.store.update("resourceclaims", {**claim, "status": status}, subresource="status")

    def _bind(self, pod: dict, node: str) -> None:
        meta = pod["metadata"]
        now = timestamp(self._clock())
        # kube-scheduler binds through pods/binding; the effect is spec.nodeName.
        self.store.patch("pods", meta["namespace"], meta["name"], {"spec": {"nodeName": node}})
        conditions = [scheduled_condition(now)]
        self.store.patch(
            "pods",
            meta["namespace"],
            meta["name"],
            {"status": {"conditions": conditions}},
            subresource="status",
        )
        if self.start_delay > 0:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                loop = None
            if loop is not None:
                loop.call_later(self.start_delay, self._start, meta["namespace"], meta["name"])
                return
        self._start(meta["namespace"], meta["name"])

    def _start(self, namespace: str, name: str) -> None:
        pod = self.store.get("pods", namespace, name)
        if pod is None or pod["metadata"].get("deletionTimestamp"):
            return
        host_ip, ip = self.state.addresses(pod["spec"].get("nodeName") or "")
        status = running_status(pod, host_ip=host_ip, ip=ip, now=timestamp(self._clock()))
        self.store.patch("pods", namespace, name, {"status": status}, subresource="status")
        self._drain()

    def _unschedulable(self, pod: dict, message: str) -> None:
        meta = pod["metadata"]
        self.pending[_pod_key(pod)] = None
        self.unschedulable += 1
        old = {c.get("type"): c for c in (pod.get("status") or {}).get("conditions") or []}
        previous = old.get("PodScheduled") or {}
        if previous.get("reason") == "Unschedulable" and previous.get("message") == message:
            return
        condition = _condition("PodScheduled", "False", timestamp(self._clock()))
        condition |= {"reason": "Unschedulable", "message": message}
        self.store.patch(
            "pods",
            meta["namespace"],
            meta["name"],
            {"status": {"conditions": [condition]}},
            subresource="status",
        )

    # ---- pods ending -----------------------------------------------------------------------

    def _end(self, pod: dict) -> None:
        """Unreserve the pod's claims; delete its generated claims; deallocate what the
        scheduler allocated and nobody reserves any more."""
        meta = pod["metadata"]
        self.pending.pop(_pod_key(pod), None)
        ns, uid = meta["namespace"], meta["uid"]
        names = [e.get("resourceClaimName") for e in pod["spec"].get("resourceClaims") or []]
        names += [
            s.get("resourceClaimName")
            for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []
        ]
        names.append(
            ((pod.get("status") or {}).get("extendedResourceClaimStatus") or {}).get(
                "resourceClaimName"
            )
        )
        for name in dict.fromkeys(n for n in names if n):
            claim = self.store.get("resourceclaims", ns, name)
            if claim is None:
                continue
            status = claim.get("status") or {}
            reserved = status.get("reservedFor") or []
            left = [r for r in reserved if r.get("uid") != uid]
            if len(left) != len(reserved):
                status = {k: v for k, v in status.items() if k != "reservedFor"}
                if left:
                    status["reservedFor"] = left
                claim = self.store.update(
                    "resourceclaims", {**claim, "status": status}, subresource="status"
                )
            if left:
                continue
            owned = any(
                o.get("controller") and o.get("uid") == uid
                for o in claim["metadata"].get("ownerReferences") or []
            )
            if owned:
                claim = self.store.delete("resourceclaims", ns, name)
            if DELETE_PROTECTION_FINALIZER in (claim["metadata"].get("finalizers") or []):
                self._deallocate(claim)

    def _deallocate(self, claim: dict) -> None:
        meta = claim["metadata"]
        status = {k: v for k, v in (claim.get("status") or {}).items() if k != "allocation"}
        if claim.get("status", {}).get("allocation"):
            claim = self.store.update(
                "resourceclaims", {**claim, "status": status}, subresource="status"
            )
        finalizers = [f for f in meta.get("finalizers") or [] if f != DELETE_PROTECTION_FINALIZER]
        if finalizers:
            claim["metadata"]["finalizers"] = finalizers
        else:
            claim["metadata"].pop("finalizers", None)
        self.store.update("resourceclaims", claim)


# ---- helpers ----------------------------------------------------------------------------------


def claim_from_template(pod: dict, pod_claim_name: str, template: dict) -> dict:
    """The ResourceClaim kube-controller-manager creates for one template entry of a pod."""
    meta = pod["metadata"]
    template_meta = (template.get("spec") or {}).get("metadata") or {}
    annotations = dict(template_meta.get("annotations") or {})
    annotations[POD_CLAIM_NAME_ANNOTATION] = pod_claim_name
    claim_meta: dict[str, Any] = {
        "generateName": generate_name(meta["name"], pod_claim_name),
        "namespace": meta["namespace"],
        "annotations": annotations,
        "ownerReferences": [
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "name": meta["name"],
                "uid": meta["uid"],
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],
    }
    if template_meta.get("labels"):
        claim_meta["labels"] = dict(template_meta["labels"])
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": claim_meta,
        "spec": (template.get("spec") or {}).get("spec") or {},
    }


def _pod_key(pod: dict) -> tuple[str, str]:
    return (pod["metadata"].get("namespace") or "default", pod["metadata"]["name"])


def _waiting(pod: dict) -> bool:
    """Not bound, not ending: a pod the scheduler still has to place."""
    return (
        not pod["spec"].get("nodeName")
        and not pod["metadata"].get("deletionTimestamp")
        and (pod.get("status") or {}).get("phase", "Pending") == "Pending"
    )


def _bound_by_hand(pod: dict) -> bool:
    return (
        bool(pod["spec"].get("nodeName"))
        and not pod["metadata"].get("deletionTimestamp")
        and (pod.get("status") or {}).get("phase", "Pending") == "Pending"
    )


def _ended(pod: dict) -> bool:
    return bool(pod["metadata"].get("deletionTimestamp")) or (
        (pod.get("status") or {}).get("phase") in _TERMINAL
    )


def _unschedulable(pod: dict) -> bool:
    return any(
        c.get("type") == "PodScheduled" and c.get("reason") == "Unschedulable"
        for c in (pod.get("status") or {}).get("conditions") or []
    )


def _condition(kind: str, status: str, now: str) -> dict:
    return {"type": kind, "status": status, "lastProbeTime": None, "lastTransitionTime": now}


# ---- what the scheduler knows -----------------------------------------------------------------

_NODE_RESOURCES = ("cpu", "memory", "ephemeral-storage", "pods")


class SchedulerState:
    """The scheduler's cache of one cluster, kept current from store events: normalized
    classes, slices and claims, devices per node, the allocation `Ledger`, and per node the
    bound pods and the device-plugin resources they use."""

    def __init__(self, cluster: str) -> None:
        self.cluster = cluster
        self.classes: dict[str, DeviceClassRecord] = {}
        self.slices: dict[str, SliceRecord] = {}
        self.claims: dict[ObjectKey, ClaimRecord] = {}
        self.nodes: dict[str, dict] = {}
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
            for plural in ("deviceclasses", "resourceslices", "resourceclaims", "nodes", "pods"):
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
        if plural in ("deviceclasses", "resourceslices", "nodes"):
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
        if gone or not node or phase in _TERMINAL:
            previous = self.bound.pop(key, None)
            if previous is None:
                return None
            usage = self.on_node.get(previous, {}).pop(key, None)
            return {previous} if usage else None
        self.bound[key] = node
        self.on_node.setdefault(node, {})[key] = _extended_requests(obj)
        return None

    # ---- derived views -----------------------------------------------------------------------

    @property
    def devices(self) -> dict[str | None, list[DeviceEntry]]:
        """Devices of the valid generation of every pool, by node (None: not node-local)."""
        if self._devices is None:
            self._devices = device_entries(self.slices.values())
        return self._devices

    @property
    def ledger(self) -> Ledger:
        if self._ledger is None:
            entries = [e for group in self.devices.values() for e in group]
            self._ledger = Ledger.build(entries, self.claims.values(), slices=self.slices.values())
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
        wanted = _extended_requests(pod)
        by_dra = self.extended_classes() if wanted else {}
        for name in candidates:
            allocatable = (self.nodes[name].get("status") or {}).get("allocatable") or {}
            dra = {r: by_dra[r] for r in wanted if r not in allocatable and r in by_dra}
            extended = extended_claim(pod, dra, self.cluster) if dra else None
            why = self._node_misfit(pod, self.nodes[name], skip=dra.keys())
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

    def _node_misfit(self, pod: dict, node: dict, *, skip: Iterable[str] = ()) -> str | None:
        spec = pod["spec"]
        labels = node["metadata"].get("labels") or {}
        if spec.get("nodeName") and spec["nodeName"] != node["metadata"]["name"]:
            return "node(s) didn't match the requested node name"
        if any(labels.get(k) != v for k, v in (spec.get("nodeSelector") or {}).items()):
            return "node(s) didn't match Pod's node affinity/selector"
        if (node.get("spec") or {}).get("unschedulable"):
            return "node(s) were unschedulable"
        ready = [
            c
            for c in (node.get("status") or {}).get("conditions") or []
            if c.get("type") == "Ready"
        ]
        if ready and ready[0].get("status") != "True":
            return "node(s) had untolerated taint {node.kubernetes.io/not-ready: }"
        name = node["metadata"]["name"]
        here = list(self.on_node.get(name, {}).values())
        allocatable = (node.get("status") or {}).get("allocatable") or {}
        if len(here) >= int(allocatable.get("pods", 110)):
            return "Too many pods"
        for resource, amount in _extended_requests(pod).items():
            if resource in skip:
                continue
            used = sum((u.get(resource, Fraction(0)) for u in here), Fraction(0))
            if used + amount > parse_quantity(allocatable.get(resource, "0")):
                return f"Insufficient {resource}"
        return None


class ExtendedClaim:
    """The claim kube-scheduler creates for extended resources served by DRA (DRAExtendedResource):
    `generateName <pod>-extended-resources-`, the `resource.kubernetes.io/extended-resource-claim`
    annotation, one request `container-<i>-request-<j>` per container and resource."""

    def __init__(self, body: dict, mappings: list[dict], record: ClaimRecord) -> None:
        self.body = body
        self.mappings = mappings
        self.record = record
        self.allocation: Allocation | None = None


def extended_claim(pod: dict, classes: dict[str, str], cluster: str) -> ExtendedClaim:
    meta = pod["metadata"]
    requests, mappings = [], []
    for i, container in enumerate(pod["spec"].get("containers") or []):
        limits = (container.get("resources") or {}).get("limits") or {}
        for j, resource in enumerate(r for r in limits if r in classes):
            request = f"container-{i}-request-{j}"
            count = int(parse_quantity(str(limits[resource])))
            requests.append(
                {
                    "name": request,
                    "exactly": {
                        "deviceClassName": classes[resource],
                        "allocationMode": "ExactCount",
                        "count": count,
                    },
                }
            )
            mappings.append(
                {
                    "containerName": container["name"],
                    "resourceName": resource,
                    "requestName": request,
                }
            )
    body = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {
            "generateName": f"{meta['name']}-extended-resources-",
            "namespace": meta["namespace"],
            "annotations": {EXTENDED_RESOURCE_CLAIM_ANNOTATION: "true"},
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "name": meta["name"],
                    "uid": meta["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {"devices": {"requests": requests}},
    }
    named = {**body, "metadata": {**body["metadata"], "name": f"{meta['name']}-extended-resources"}}
    return ExtendedClaim(body, mappings, normalize(RESOURCE_CLAIM, named, cluster=cluster))


def _record(kind: str, obj: dict, cluster: str) -> Any:
    try:
        return normalize(kind, obj, cluster=cluster)
    except MalformedObject:
        return None  # the API server validated it; a record that fails here is not placeable


def _extended_requests(pod: dict) -> dict[str, Fraction]:
    """Device-plugin resources (`nvidia.com/gpu`) the pod's containers ask for in limits."""
    out: dict[str, Fraction] = {}
    for container in pod["spec"].get("containers") or []:
        for resource, amount in ((container.get("resources") or {}).get("limits") or {}).items():
            if resource in _NODE_RESOURCES or resource.startswith("hugepages-"):
                continue
            out[resource] = out.get(resource, Fraction(0)) + parse_quantity(str(amount))
    return out


def _natural(text: str) -> tuple:
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text))


def _slice_order(sl: SliceRecord) -> tuple:
    first = sl.devices[0].name if sl.devices else ""
    return (sl.driver, sl.pool.name, _natural(first), sl.meta.name)


def device_entries(slices: Iterable[SliceRecord]) -> dict[str | None, list[DeviceEntry]]:
    """Devices of the highest generation of each pool, grouped by the node they are on."""
    slices = list(slices)
    newest: dict[tuple[str, str], int] = {}
    for sl in slices:
        pool = (sl.driver, sl.pool.name)
        newest[pool] = max(newest.get(pool, sl.pool.generation), sl.pool.generation)
    present: Counter[tuple[str, str]] = Counter(
        (sl.driver, sl.pool.name)
        for sl in slices
        if sl.pool.generation == newest[(sl.driver, sl.pool.name)]
    )
    by_node: dict[str | None, list[DeviceEntry]] = {}
    # Within a node, devices in the drivers' order (gpu-0 … gpu-7), whatever the slice names.
    for sl in sorted(slices, key=_slice_order):
        pool = (sl.driver, sl.pool.name)
        if sl.pool.generation != newest[pool]:
            continue
        for device in sl.devices:
            node = sl.node_name or device.node_name
            by_node.setdefault(node, []).append(
                DeviceEntry(
                    key=DeviceKey(sl.meta.cluster, sl.driver, sl.pool.name, device.name),
                    device=device,
                    slice=record_key(sl),
                    node=node,
                    pool_generation=sl.pool.generation,
                    pool_complete=present[pool] == sl.pool.resource_slice_count,
                )
            )
    return by_node
