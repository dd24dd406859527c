"""The control loops that act on DRA objects in one simulated cluster.

A `Controller` listens to one `ClusterStore` (so pods created by a scenario, by churn or by
`kubectl apply` against the simulator are all handled the same way) and does what three
Kubernetes components do to DRA objects:

* **resource-claim controller** (kube-controller-manager, `service.sim.claim_controller`):
  creates the claims of a pod's templates; releases, deletes and deallocates claims when a
  pod ends.
* **kube-scheduler** (`service.sim.scheduler` decides, this module writes): on the first node
  where the pod and all its claims fit, write `status.allocation` (+ the finalizer) and
  `status.reservedFor`, create the extended-resource claim if one is needed, and bind the pod.
  If no node fits, the pod stays Pending with `PodScheduled=False`, reason `Unschedulable` and
  the scheduler's message; it is retried when devices are released on a node, or nodes,
  slices, classes or the claims it waits for appear.
* **kubelet**: a bound pod turns Running (after `start_delay` seconds when an event loop runs);
  a pod created with `spec.nodeName` runs if its claims are allocated and usable there.

Promises: deterministic for a seed (node order, share ids, pod IPs); reentrant-safe (store
listeners are synchronous: work queued while handling is drained in order, never recursively);
bookkeeping (claims, devices, ledger) is updated from every store event, whoever wrote it; a
write the API server refuses is logged and never fails the client request that caused it.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import uuid
from collections import deque
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from dra_mirror.service.model.records import DELETE_PROTECTION_FINALIZER, Allocation
from dra_mirror.service.model.records import key_of as record_key
from dra_mirror.service.sim.claim_controller import pod_claims, release_pod_claims
from dra_mirror.service.sim.errors import ApiError
from dra_mirror.service.sim.scheduler import TERMINAL_PHASES, SchedulerState
from dra_mirror.service.sim.shapes import allocation_dict, running_status, scheduled_condition
from dra_mirror.service.sim.store import ClusterStore, timestamp

__all__ = ["Controller"]

log = logging.getLogger(__name__)


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
        claims = pod_claims(self.store, pod)
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
        claims = pod_claims(self.store, pod)
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
        """A pod ended: it waits no more; its claims are released (`release_pod_claims`)."""
        self.pending.pop(_pod_key(pod), None)
        release_pod_claims(self.store, pod)


# ---- pods ---------------------------------------------------------------------------------------


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
        (pod.get("status") or {}).get("phase") in TERMINAL_PHASES
    )


def _unschedulable(pod: dict) -> bool:
    return any(
        c.get("type") == "PodScheduled" and c.get("reason") == "Unschedulable"
        for c in (pod.get("status") or {}).get("conditions") or []
    )


def _condition(kind: str, status: str, now: str) -> dict:
    return {"type": kind, "status": status, "lastProbeTime": None, "lastTransitionTime": now}
