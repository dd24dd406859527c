"""The per-cluster index: current records, reverse maps, and the Changes each batch makes.

`ClusterIndex.apply(events)` folds watch events (ADDED / MODIFIED / DELETED with the record)
into the index and returns one `Changes`; `resync(kind, records)` does the same for a (re)list
and turns what vanished into deletes. Nothing else decides what the stores and history write.

Rules, in the order they are applied to each event (see also claims.py, pools.py, inventory.py):

1. An upsert identical to the indexed record is a no-op; a DELETED for an unknown key too.
   A claim whose uid changed under the same name is a delete of the old claim plus a create.
2. Every reverse map (kopf's indexing is the model) is updated from the diff of the old and
   new record's links only, so each event costs O(its own links), plus O(pool) for slices.
3. Slices: the pool's valid generation is recomputed (pools.py); devices appear, change
   (attributes, capacity, counters, taints, node) or disappear as generations change.
4. Claims: per allocation result (request, driver, pool, device, shareID) `allocated` /
   `released`; per status.reservedFor uid `consumer_added` / `consumer_removed`; a claim
   without allocation is waiting (`wait_started` when created unallocated or deallocated,
   `wait_ended` "allocated" or "deleted"). A deleted claim releases everything it held and ends
   its reservations, wait and idleness.
5. Idle: allocated, and no consumer pod Running (no reservedFor, or every consumer pod gone,
   Pending, Succeeded or Failed; a consumer that is not a pod — a PodGroup — counts as
   running because the mirror cannot see it). `idle_started`/`idle_ended`, `idle_since`.
   Pod changes re-evaluate the claims that list the pod in reservedFor. Until Pods have been
   listed once, a consumer pod the index has not seen is unknown, not gone, and counts as
   running: otherwise every claim synced before the pods would start and end an idle spell at
   each start of the mirror. The first complete Pod LIST re-evaluates the claims whose
   consumers are still missing.
6. Templates: a claim's `template_name` is the pod's `resourceClaimTemplateName` for the pod
   claim whose generated name (status.resourceClaimStatuses) is the claim; the index fills it
   into its view of the claim (and re-emits the claim when it changes).

A `Changes` holds each key at most once, in `upserts` (the final view) or `deletes` (the last
known record), so stores may apply them in any order.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple

from msgspec.structs import replace

from dra_mirror.service.model import changes as ch
from dra_mirror.service.model.claims_index import ClaimTracker
from dra_mirror.service.model.delta import IndexDelta
from dra_mirror.service.model.devices_index import DeviceTracker
from dra_mirror.service.model.links import Links
from dra_mirror.service.model.pools import ValidPool
from dra_mirror.service.model.records import (
    KINDS,
    POD,
    RESOURCE_CLAIM,
    RESOURCE_SLICE,
    AllocationRef,
    DeviceEntry,
    DeviceKey,
    ObjectKey,
    PodRecord,
    Record,
    key_of,
)
from dra_mirror.service.model.relations import (  # re-exported: the relation names live there
    CLAIM_REFERRERS,
    CLASS_CLAIMS,
    DEVICE_ALLOCATIONS,
    NAME_DEVICES,
    NODE_DEVICES,
    NODE_PODS,
    NODE_SLICES,
    POOL_DEVICES,
    RELATIONS,
    SLICE_DEVICES,
    TEMPLATE_CLAIMS,
    UUID_DEVICES,
)

ADDED = "ADDED"
MODIFIED = "MODIFIED"
DELETED = "DELETED"


class Event(NamedTuple):
    type: str  # ADDED | MODIFIED | DELETED
    record: Record


class Batch:
    """The Changes being built for one apply(): each key once, in upserts or deletes."""

    def __init__(self, cluster: str, at: str, *, keep_transitions: bool = True) -> None:
        self.cluster = cluster
        self.at = at
        self.keep_transitions = keep_transitions
        self.upserts: dict[ObjectKey, Record] = {}
        self.deletes: dict[ObjectKey, Record] = {}
        self.transitions: list[ch.Transition] = []

    def upsert(self, key: ObjectKey, record: Record) -> None:
        self.deletes.pop(key, None)
        self.upserts[key] = record

    def delete(self, key: ObjectKey, record: Record) -> None:
        self.upserts.pop(key, None)
        self.deletes[key] = record

    def transition(self, type_: str, **fields: Any) -> None:
        if not self.keep_transitions:
            return
        self.transitions.append(
            ch.Transition(type=type_, cluster=self.cluster, at=self.at, **fields)
        )

    def changes(self, resource_version: str) -> ch.Changes:
        return ch.Changes(
            cluster=self.cluster,
            at=self.at,
            upserts=list(self.upserts.values()),
            deletes=list(self.deletes.values()),
            transitions=self.transitions,
            resource_version=resource_version,
        )


class ClusterIndex:
    """Everything the mirror knows of one cluster, kept consistent event by event."""

    def __init__(self, cluster: str, *, transitions: bool = True, deltas: bool = False) -> None:
        """`transitions=False` derives the same state without building transitions (for a
        store's own index: the history has them from the reactor's index already);
        `deltas=True` notes what each batch changed in the derived state (`take_delta`)."""
        self.cluster = cluster
        self.transitions = transitions
        self._objects: dict[str, dict[ObjectKey, Record]] = {kind: {} for kind in KINDS}
        self.links = Links(RELATIONS)
        self.listed: set[str] = set()  # kinds whose complete LIST the index has seen
        self._delta: IndexDelta | None = IndexDelta() if deltas else None
        self.links.delta = self._delta
        self._devices = DeviceTracker(self)
        self._claims = ClaimTracker(self)

    # --- reading --------------------------------------------------------------------------------

    def get(self, key: ObjectKey) -> Record | None:
        objects = self._objects.get(key[1])
        return objects.get(key) if objects is not None else None

    def records(self, kind: str) -> Iterable[Record]:
        return self._objects[kind].values()

    def count(self, kind: str) -> int:
        return len(self._objects[kind])

    def device(self, key: DeviceKey) -> DeviceEntry | None:
        return self._devices.devices.get(key)

    def devices(self) -> Iterable[DeviceEntry]:
        """Every device of the valid generation of its pool."""
        return self._devices.devices.values()

    def lookup(self, relation: str, key: Any) -> list[Any]:
        """The values a relation maps `key` to (see service.stores.protocols.Relation)."""
        if relation == DEVICE_ALLOCATIONS:
            return self.holds(key)
        return sorted(self.links.get(relation, key))

    def holds(self, key: DeviceKey) -> list[AllocationRef]:
        """Every claim's hold on a device, in (claim, request, shareID) order."""
        holds = self.links.get(DEVICE_ALLOCATIONS, key)
        return [holds[k] for k in sorted(holds)]  # type: ignore[index]

    def pool(self, driver: str, pool: str) -> ValidPool:
        return self._devices.pool(driver, pool)

    def counters_free(self, driver: str, pool: str) -> dict[str, dict[str, Any]]:
        """What is left of a pool's shared counters (Fractions) after its allocated devices."""
        return self._devices.counters_free(driver, pool)

    def device_status(self, key: DeviceKey) -> str | None:
        """free | held | shared | blocked, or None for a device not in a valid pool."""
        return self._devices.status(key)

    def idle_since(self, claim: ObjectKey) -> str | None:
        """When the claim last became idle (allocated, no consumer pod Running), or None."""
        return self._claims.idle_since.get(claim)

    def idle_claims(self) -> Iterator[ObjectKey]:
        return iter(self._claims.idle_since)

    def take_delta(self) -> IndexDelta:
        """What the batches since the last call changed in the derived state (deltas=True)."""
        if self._delta is None:
            raise ValueError("this index was made without deltas=True")
        delta, self._delta = self._delta, IndexDelta()
        self.links.delta = self._delta
        return delta

    def note_idle(self, claim: ObjectKey, since: str | None) -> None:
        if self._delta is not None:
            self._delta.idle[claim] = since

    def note_device(self, key: DeviceKey, entry: DeviceEntry | None) -> None:
        if self._delta is not None:
            self._delta.devices[key] = entry

    # --- writing --------------------------------------------------------------------------------

    def apply(
        self,
        events: Iterable[Event],
        *,
        at: str,
        resource_version: str = "",
        listed: str | None = None,
    ) -> ch.Changes:
        """Fold one batch of events. `listed`: the batch is the complete LIST of that kind
        (`resync` passes it; a store's own index passes on `Changes.listed_kind`)."""
        batch = Batch(self.cluster, at, keep_transitions=self.transitions)
        for event in events:
            if event.type == DELETED:
                self._delete(event.record, batch)
            else:
                self._upsert(event.record, batch)
        if listed is not None and listed not in self.listed:
            self.listed.add(listed)
            if listed == POD:
                self._claims.pods_listed(batch)
        changes = batch.changes(resource_version)
        changes.listed_kind = listed
        return changes

    def resync(
        self, kind: str, records: Iterable[Record], *, at: str, resource_version: str = ""
    ) -> ch.Changes:
        """After a (re)list of `kind`: upsert what changed, delete what is no longer there."""
        events = [Event(MODIFIED, record) for record in records]
        seen = {key_of(e.record) for e in events}
        events.extend(
            Event(DELETED, old) for key, old in self._objects[kind].items() if key not in seen
        )
        return self.apply(events, at=at, resource_version=resource_version, listed=kind)

    def _upsert(self, record: Record, batch: Batch) -> None:
        key = key_of(record)
        kind = key.kind
        objects = self._objects[kind]
        old = objects.get(key)
        if kind == RESOURCE_CLAIM:
            record = self._claims.view(key, record)  # type: ignore[arg-type]
            if old is not None and old.meta.uid and record.meta.uid != old.meta.uid:
                self._delete(old, batch)  # recreated under the same name
                old = None
        if old == record:
            return
        objects[key] = record
        self._dispatch(kind, key, old, record, batch)
        batch.upsert(key, record)

    def _delete(self, record: Record, batch: Batch) -> None:
        key = key_of(record)
        old = self._objects[key.kind].pop(key, None)
        if old is None:
            return
        self._dispatch(key.kind, key, old, None, batch)
        batch.delete(key, old)

    def _dispatch(
        self, kind: str, key: ObjectKey, old: Record | None, new: Record | None, batch: Batch
    ) -> None:
        if kind == RESOURCE_SLICE:
            self._devices.on_slice(key, old, new, batch)  # type: ignore[arg-type]
        elif kind == RESOURCE_CLAIM:
            self._claims.on_claim(key, old, new, batch)  # type: ignore[arg-type]
        elif kind == POD:
            self._on_pod(key, old, new, batch)  # type: ignore[arg-type]

    def replace_claim_view(self, key: ObjectKey, template_name: str | None, batch: Batch) -> None:
        """A pod changed which template a claim came from: re-emit the claim's view."""
        claims = self._objects[RESOURCE_CLAIM]
        claim = claims.get(key)
        if claim is not None and claim.template_name != template_name:  # type: ignore[union-attr]
            claims[key] = view = replace(claim, template_name=template_name)
            batch.upsert(key, view)

    # --- pods -----------------------------------------------------------------------------------

    def _on_pod(
        self, key: ObjectKey, old: PodRecord | None, new: PodRecord | None, batch: Batch
    ) -> None:
        cluster = self.cluster
        old_node = old.node_name if old else None
        new_node = new.node_name if new else None
        if old_node != new_node:
            if old_node:
                self.links.remove(NODE_PODS, (cluster, old_node), key)
            if new_node:
                self.links.add(NODE_PODS, (cluster, new_node), key)
        old_claims = _pod_claim_keys(cluster, old)
        new_claims = _pod_claim_keys(cluster, new)
        if old_claims != new_claims:
            for claim in old_claims - new_claims:
                self.links.remove(CLAIM_REFERRERS, claim, key)
            for claim in new_claims - old_claims:
                self.links.add(CLAIM_REFERRERS, claim, key)
        self._claims.on_pod(key, old, new, batch)


def _pod_claim_keys(cluster: str, pod: PodRecord | None) -> set[ObjectKey]:
    if pod is None:
        return set()
    namespace = pod.meta.namespace
    return {
        ObjectKey(cluster, RESOURCE_CLAIM, namespace, c.claim_name)
        for c in pod.claims
        if c.claim_name
    }


__all__ = [
    "ADDED",
    "CLAIM_REFERRERS",
    "CLASS_CLAIMS",
    "DELETED",
    "DEVICE_ALLOCATIONS",
    "MODIFIED",
    "NAME_DEVICES",
    "NODE_DEVICES",
    "NODE_PODS",
    "NODE_SLICES",
    "POOL_DEVICES",
    "RELATIONS",
    "SLICE_DEVICES",
    "TEMPLATE_CLAIMS",
    "UUID_DEVICES",
    "ClusterIndex",
    "Event",
]
