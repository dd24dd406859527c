"""The claim side of the index: holds on devices, consumers, waiting, idleness and views.

The rules are in the docstring of `service.model.index` (points 4 to 6); this module keeps the
state they need and emits their transitions into the index's batch:

* holds: `device_allocations` maps a DeviceKey to {(claim, request, shareID): AllocationRef};
* consumers (`service.model.consumers`): pod -> the claims whose status.reservedFor names it,
  PodGroup -> the claims reserved for it: a pod's phase re-evaluates only their idleness;
* views: the template and origin pods say a claim has (`service.model.claim_views`);
* weights: the holds on a device a slice publishes for the first time weighed again."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from dra_mirror.service.model import changes as ch
from dra_mirror.service.model.activity import seconds
from dra_mirror.service.model.claim_activity import hold_transition, idleness, weigh_again
from dra_mirror.service.model.claim_sets import ClaimsBy
from dra_mirror.service.model.claim_views import ClaimViews
from dra_mirror.service.model.consumers import (
    GroupKey,
    consumers_of,
    group_refs,
    is_pod,
    is_pod_group,
    pod_group_key,
    pod_refs,
    reservations,
)
from dra_mirror.service.model.holds import class_names, holds_of
from dra_mirror.service.model.pods import pod_claim_keys
from dra_mirror.service.model.records import (
    POD,
    RESOURCE_CLAIM_TEMPLATE,
    AllocationRef,
    ClaimRecord,
    DeviceKey,
    ObjectKey,
    PodRecord,
)
from dra_mirror.service.model.relations import (
    CLASS_CLAIMS,
    DEVICE_ALLOCATIONS,
    GROUP_PODS,
    TEMPLATE_CLAIMS,
)
from dra_mirror.service.model.waiting import Waits

if TYPE_CHECKING:
    from dra_mirror.service.model.batch import Batch
    from dra_mirror.service.model.index import ClusterIndex


class ClaimTracker:
    def __init__(self, index: ClusterIndex) -> None:
        self._index = index
        self._cluster = index.cluster
        self.idle_since: dict[ObjectKey, str] = {}
        self.views = ClaimViews(index.cluster)
        self._consumers: ClaimsBy[ObjectKey] = ClaimsBy()  # pod -> claims it consumes
        self._groups: ClaimsBy[GroupKey] = ClaimsBy()  # PodGroup -> claims reserved for it
        self.waits = Waits(index)  # waiting claims (service.model.waiting)
        # claims kept from idleness only by starting consumers -> when the first grace ends
        self.grace_until: dict[ObjectKey, float] = {}

    def view(self, key: ObjectKey, claim: ClaimRecord) -> ClaimRecord:
        return self.views.view(key, claim)

    # --- claims ---------------------------------------------------------------------------------

    def _claim_fields(self, key: ObjectKey, claim: ClaimRecord) -> dict[str, Any]:
        return {
            "namespace": key.namespace,
            "claim": key.name,
            "claim_uid": claim.meta.uid,
            "class_names": class_names(claim),
            "node": claim.allocation.node_name if claim.allocation else None,
        }

    def on_claim(
        self, key: ObjectKey, old: ClaimRecord | None, new: ClaimRecord | None, batch: Batch
    ) -> None:
        if old is None and new is not None:
            self._claim_added(key, new, batch)
            return
        links = self._index.links
        cluster = self._cluster
        current = new if new is not None else old
        assert current is not None
        # Transition fields, only when transitions are kept (a store's index keeps none).
        fields = self._claim_fields(key, current) if batch.keep_transitions else {}

        # Most updates touch neither requests, allocation nor reservedFor (status.devices,
        # labels, resourceVersion): each diff below runs only when its part changed.
        old_requests = old.requests if old is not None else ()
        new_requests = new.requests if new is not None else ()
        if old_requests != new_requests:
            old_classes, new_classes = set(class_names(old)), set(class_names(new))
            for name in old_classes - new_classes:
                links.remove(CLASS_CLAIMS, (cluster, name), key)
            for name in new_classes - old_classes:
                links.add(CLASS_CLAIMS, (cluster, name), key)

        if old is None:
            batch.transition(ch.CLAIM_CREATED, **fields)
        self.waits.refresh(key, new, batch, fields)

        old_allocation = old.allocation if old is not None else None
        new_allocation = new.allocation if new is not None else None
        if old_allocation != new_allocation:
            self._diff_holds(key, old, new, batch)
        old_reserved = old.reserved_for if old is not None else ()
        new_reserved = new.reserved_for if new is not None else ()
        if old_reserved != new_reserved:
            self._diff_consumers(key, old, new, batch, fields)

        self._refresh_idle(key, new, batch, fields)
        if new is None:
            batch.transition(ch.CLAIM_DELETED, **fields)

    def _claim_added(self, key: ObjectKey, claim: ClaimRecord, batch: Batch) -> None:
        """`on_claim` for a claim the index did not hold: all of it is new, nothing to diff."""
        links = self._index.links
        keep = batch.keep_transitions
        fields = self._claim_fields(key, claim) if keep else {}
        for name in class_names(claim):
            links.add(CLASS_CLAIMS, (self._cluster, name), key)
        if keep:
            batch.transition(ch.CLAIM_CREATED, **fields)
        if claim.allocation is None:
            self.waits.refresh(key, claim, batch, fields)
        else:
            touched = self._index.touched
            held = touched.devices  # their statuses are re-derived at settle
            for (device, hold_id), hold in holds_of(self._cluster, key, claim).items():
                touched.holds(device, links.get(DEVICE_ALLOCATIONS, device))
                links.add(DEVICE_ALLOCATIONS, device, hold_id, hold[0])
                held.add(device)
                if keep:
                    self._hold_transition(ch.ALLOCATED, device, hold, claim, key, batch)
        if claim.reserved_for:
            if keep:
                self._diff_consumers(key, None, claim, batch, fields)
            else:  # what _diff_consumers keeps of them, without transitions
                self._consumers_added(key, claim)
        self._refresh_idle(key, claim, batch, fields)

    def _consumers_added(self, key: ObjectKey, claim: ClaimRecord) -> None:
        """The consumer maps of a claim the index did not hold (service.model.consumers)."""
        cluster, namespace = claim.meta.cluster, claim.meta.namespace
        for consumer in claim.reserved_for:
            if is_pod(consumer):
                pod = ObjectKey(cluster, POD, namespace, consumer.name)
                self._consumers.add(pod, key)
            elif is_pod_group(consumer):
                self._groups.add((cluster, namespace, consumer.name), key)

    def _diff_holds(
        self, key: ObjectKey, old: ClaimRecord | None, new: ClaimRecord | None, batch: Batch
    ) -> None:
        links = self._index.links
        old_holds, new_holds = holds_of(self._cluster, key, old), holds_of(self._cluster, key, new)
        touched = self._index.touched
        held = touched.devices  # their statuses are re-derived at settle
        for hold in old_holds.keys() - new_holds.keys():
            device, hold_id = hold
            touched.holds(device, links.get(DEVICE_ALLOCATIONS, device))
            links.remove(DEVICE_ALLOCATIONS, device, hold_id)
            held.add(device)
            # a claim deleted ends its holds as `deleted`, not as a deallocation
            self._hold_transition(ch.RELEASED, device, old_holds[hold], old, key, batch,
                                  reason="deleted" if new is None else "")  # fmt: skip
        for hold, (ref, _) in new_holds.items():
            device, hold_id = hold
            if hold not in old_holds:
                touched.holds(device, links.get(DEVICE_ALLOCATIONS, device))
                links.add(DEVICE_ALLOCATIONS, device, hold_id, ref)
                held.add(device)
                self._hold_transition(ch.ALLOCATED, device, new_holds[hold], new, key, batch)
            else:
                held.add(device)  # the allocation's node may have moved (unpublished devices)
                if old_holds[hold][0] != ref:
                    touched.holds(device, links.get(DEVICE_ALLOCATIONS, device))
                    links.add(DEVICE_ALLOCATIONS, device, hold_id, ref)

    def _diff_consumers(
        self,
        key: ObjectKey,
        old: ClaimRecord | None,
        new: ClaimRecord | None,
        batch: Batch,
        fields: dict[str, Any],
    ) -> None:
        if batch.keep_transitions:
            old_consumers, new_consumers = reservations(old), reservations(new)
            gone = "deleted" if new is None else ""  # the claim deleted, not the reservation
            for uid in old_consumers.keys() - new_consumers.keys():
                c = old_consumers[uid]
                batch.transition(
                    ch.CONSUMER_REMOVED, pod=c.name, pod_uid=c.uid, reason=gone, **fields
                )
            for uid in new_consumers.keys() - old_consumers.keys():
                c = new_consumers[uid]
                batch.transition(ch.CONSUMER_ADDED, pod=c.name, pod_uid=c.uid, **fields)
        old_pods, new_pods = pod_refs(old), pod_refs(new)
        for pod in old_pods.keys() - new_pods.keys():
            self._consumers.discard(pod, key)
        for pod in new_pods:
            if pod not in old_pods:
                self._consumers.add(pod, key)
        old_groups, new_groups = set(group_refs(old)), set(group_refs(new))
        for group in old_groups - new_groups:
            self._groups.discard(group, key)
        for group in new_groups - old_groups:
            self._groups.add(group, key)

    def _hold_transition(
        self,
        type_: str,
        device: DeviceKey,
        hold: tuple[AllocationRef, Any],
        claim: ClaimRecord | None,
        key: ObjectKey,
        batch: Batch,
        reason: str = "",
    ) -> None:
        if not batch.keep_transitions:
            return
        assert claim is not None
        fields = self._claim_fields(key, claim)
        hold_transition(
            self._index, batch, type_, device, hold, fields, self.waits.observed, reason
        )

    def reweigh(self, device: DeviceKey, batch: Batch) -> None:
        if batch.keep_transitions:
            weigh_again(self._index, batch, device, self._claim_fields, self.waits.observed)

    # --- idleness -------------------------------------------------------------------------------

    def idleness(self, claim: ClaimRecord | None, now: str) -> tuple[bool, float | None]:
        """Whether the claim is idle-held at `now`, and when the first consumer's grace ends
        (service.model.claim_activity)."""
        return idleness(self._index, claim, now)

    def expire_grace(self, batch: Batch) -> None:
        """Time passed: claims whose starting consumers' grace has run out become idle."""
        now = seconds(batch.at)
        if now is None:
            return
        for key in sorted(k for k, ends in self.grace_until.items() if ends <= now):
            self._refresh_idle(key, self._claim(key), batch)

    def _refresh_idle(
        self,
        key: ObjectKey,
        claim: ClaimRecord | None,
        batch: Batch,
        fields: dict[str, Any] | None = None,
    ) -> None:
        now, deadline = self.idleness(claim, batch.at)
        if deadline is None:
            self.grace_until.pop(key, None)
        else:
            self.grace_until[key] = deadline
        was = key in self.idle_since
        if now == was:
            return
        if fields is None:
            assert claim is not None
            fields = self._claim_fields(key, claim)
        touched = self._index.touched
        touched.claim(key, claim, self.idle_since.get(key))  # unless the batch changed it first
        if now:
            self.idle_since[key] = batch.at
            touched.delta.idle[key] = batch.at
            batch.transition(ch.IDLE_STARTED, **fields)
        else:
            del self.idle_since[key]
            touched.delta.idle[key] = None
            batch.transition(ch.IDLE_ENDED, **fields)

    def announce(self, key: ObjectKey, claim: ClaimRecord, batch: Batch) -> None:
        """The opening transitions of a claim as it is (the first LIST of claims after a
        seed): what `on_claim` says of a claim it sees for the first time."""
        fields = self._claim_fields(key, claim)
        batch.transition(ch.CLAIM_CREATED, **fields)
        if key in self.waits.waiting:
            batch.transition(ch.WAIT_STARTED, before_observation=True, **fields)
        for (device, _), hold in holds_of(self._cluster, key, claim).items():
            self._hold_transition(ch.ALLOCATED, device, hold, claim, key, batch)
        for consumer in reservations(claim).values():
            batch.transition(ch.CONSUMER_ADDED, pod=consumer.name, pod_uid=consumer.uid, **fields)
        if key in self.idle_since:
            batch.transition(ch.IDLE_STARTED, **fields)

    def announce_idle(self, batch: Batch) -> None:
        """`idle_started` for every claim idle now and `wait_started` for every claim waiting
        (the batch that completes idleness and waits: claims and pods listed)."""
        for key in sorted(self.idle_since):
            claim = self._claim(key)
            if claim is not None:
                batch.transition(ch.IDLE_STARTED, **self._claim_fields(key, claim))
        for key in sorted(self.waits.waiting):
            claim = self._claim(key)
            if claim is not None:
                fields = self._claim_fields(key, claim)
                batch.transition(ch.WAIT_STARTED, before_observation=True, **fields)

    def seed_idle(self, marks: dict[ObjectKey, str]) -> None:
        """Idle claims keep the time a store says they became idle (an earlier writer's)."""
        for key in self.idle_since.keys() & marks.keys():
            self.idle_since[key] = marks[key]

    def _claim(self, key: ObjectKey) -> ClaimRecord | None:
        claim = self._index.get(key)
        return claim if isinstance(claim, ClaimRecord) else None

    def pods_listed(self, batch: Batch) -> None:
        """Pods were listed for the first time: consumers still missing are gone."""
        waiting: set[ObjectKey] = set()
        for pod_key, claims in self._consumers.items():
            if self._index.get(pod_key) is None:
                waiting.update(claims)
        for group, claims in self._groups.items():
            if not self._index.links.get(GROUP_PODS, group):
                waiting.update(claims)
        for claim_key in sorted(waiting):
            self._refresh_idle(claim_key, self._claim(claim_key), batch)

    # --- pods -----------------------------------------------------------------------------------

    def on_pod(
        self, key: ObjectKey, old: PodRecord | None, new: PodRecord | None, batch: Batch
    ) -> None:
        for claim, (before, after) in self.views.on_pod(key, old, new).items():
            self._view_changed(claim, before, after, batch)
        if (
            old is None
            or new is None
            or old.phase != new.phase
            or old.claims != new.claims
            or (old.extended_claim_name != new.extended_claim_name)
        ):  # the claims it references may start or stop waiting
            for claim_key in sorted(pod_claim_keys(self._cluster, old)
                                    | pod_claim_keys(self._cluster, new)):  # fmt: skip
                record = self._claim(claim_key)
                if record is not None:
                    keep = batch.keep_transitions
                    fields = self._claim_fields(claim_key, record) if keep else {}
                    self.waits.refresh(claim_key, record, batch, fields)
        claims = set(self._consumers.get(key))
        if self._groups:  # claims reserved for the pod's PodGroup, before or after
            for group in {pod_group_key(old), pod_group_key(new)} - {None}:
                claims.update(self._groups.get(group))  # type: ignore[arg-type]
        if not claims:
            return
        # The claims' live events show their consumers as they are (a derived change).
        touched = self._index.touched
        touched.pod(key, old)
        for claim_key in claims:
            record = self._claim(claim_key)
            if record is not None:
                touched.claim(claim_key, record, self.idle_since.get(claim_key))
        if (
            old is None
            or new is None
            or old.phase != new.phase
            or old.node_name != new.node_name  # scheduled: starting (service.model.activity)
            or old.started_at != new.started_at
            or old.meta.uid != new.meta.uid
            or old.pod_group != new.pod_group  # immutable in Kubernetes; cheap to honour
        ):
            for claim_key in sorted(claims):
                self._refresh_idle(claim_key, self._claim(claim_key), batch)

    def consumer_pods(
        self, claim: ClaimRecord, before: Mapping[ObjectKey, PodRecord | None] | None
    ) -> tuple[PodRecord, ...]:
        """The pods consuming `claim`; with `before`, as they were before the batch."""
        links = self._index.links
        return consumers_of(
            claim, get=self._index.get, members=lambda g: links.get(GROUP_PODS, g), before=before
        )

    def _view_changed(
        self, claim: ObjectKey, before: str | None, after: str | None, batch: Batch
    ) -> None:
        links = self._index.links
        if before != after:
            if before is not None:
                links.remove(TEMPLATE_CLAIMS, self._template_key(claim, before), claim)
            if after is not None:
                links.add(TEMPLATE_CLAIMS, self._template_key(claim, after), claim)
        self._index.replace_claim_view(claim, batch)

    def _template_key(self, claim: ObjectKey, template: str) -> ObjectKey:
        return ObjectKey(self._cluster, RESOURCE_CLAIM_TEMPLATE, claim.namespace, template)
