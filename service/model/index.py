"""The per-cluster index: current records, reverse maps, derived state, and the Changes.

`ClusterIndex.apply(events)` folds watch events (ADDED / MODIFIED / DELETED with the record)
into the index and returns one `Changes`; `resync(kind, records)` does the same for a (re)list
and turns what vanished into deletes. Nothing else decides what the stores and history write:
each `Changes` carries the records, the transitions, what a store must persist of the derived
state (`delta`) and the live events (`events`). The in-memory store IS this index (read-only
to its readers); the Redis store writes the Changes alone.

Rules, in the order they are applied to each event (see also claims.py, pools.py, inventory.py):

1. An upsert identical to the indexed record is a no-op; a DELETED for an unknown key too.
   A claim whose uid changed under the same name is a delete of the old claim plus a create.
2. Every reverse map (kopf's indexing is the model) is updated from the diff of the old and
   new record's links only, so each event costs O(its own links), plus O(pool) for slices.
3. Slices (and DeviceTaintRules, taint_rules.py): the pool's valid generation is recomputed
   (pools.py); devices appear, change (attributes, capacity, counters, taints, node) or go.
4. Claims: per allocation result (request, driver, pool, device, shareID) `allocated` /
   `released`; per status.reservedFor uid `consumer_added` / `consumer_removed`; a claim
   without allocation that an unfinished pod references is waiting (`wait_started`;
   `wait_ended` "allocated", "deleted" or "unreferenced": service.model.waiting). A deleted
   claim releases everything it held and ends its reservations, wait and idleness.
5. Idle: allocated, and no consumer pod Running or starting (no reservedFor, or every consumer
   pod gone, unscheduled, Succeeded, Failed, or scheduled and Pending for longer than the idle
   grace: service.model.activity, noticed by `tick` when no event comes); the consumers of a PodGroup entry are the group's pods,
   service.model.consumers; a consumer of a kind the mirror does not watch counts as
   running). `idle_started`/`idle_ended`, `idle_since`. Pod changes re-evaluate the claims
   that list the pod, or its PodGroup, in reservedFor. Until Pods have been
   listed once, a consumer pod the index has not seen is unknown, not gone, and counts as
   running: otherwise every claim synced before the pods would start and end an idle spell at
   each start of the mirror. The first complete Pod LIST re-evaluates the claims whose
   consumers are still missing.
6. Views: a claim's `template_name` is the pod's `resourceClaimTemplateName` for the pod
   claim whose generated name (status.resourceClaimStatuses) is the claim, and its origin is
   EXTENDED_RESOURCE when a pod's status.extendedResourceClaimStatus names it
   (service.model.claim_views); the index fills both into its view of the claim (and re-emits
   the claim when they change).
7. At the end of each batch the index settles: device statuses are re-derived where the batch
   moved them (devices_index.py), and the batch's `IndexDelta` and live events are built from
   what it touched (batch.py; no events for more than LIVE_BATCH_LIMIT objects, live.py).
8. Seeding: a fresh index may start from what a shared store holds (`seed`: records and idle
   marks of an earlier writer), silently — no transitions, no delta: the store has all that.
   Its relists then diff against the seed, so what vanished while nobody watched comes out
   as deletes with their whole derived delta. History closed every interval of the cluster
   when this index started watching ("cluster started"), so the first LIST of claims and of
   slices after a seed re-announces the opening transitions of everything it holds (history
   takes the re-announcement of an open interval as a no-op).
9. Announcing: every index, seeded or fresh, says once which batch carries a group of facts
   complete (`Changes.announced`): its first LIST of claims (holds, reservations, waits), its
   first LIST of slices (devices), and the first batch after which both claims and pods are
   listed (idleness — a fresh index re-announces there every claim idle by then). History
   keeps its intervals open across a new index's start and, at those batches, ends only what
   was not re-announced: a holding the cluster kept through a handover is one interval.

A `Changes` holds each key at most once, in `upserts` (the final view) or `deletes` (the last
known record), so stores may apply them in any order. What the index answers its readers is
`index_reads.IndexReads`, the half of `ClusterIndex` that reads.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from dra_mirror.service.model import changes as ch
from dra_mirror.service.model.activity import DEFAULT_GRACE
from dra_mirror.service.model.announcing import Announcements
from dra_mirror.service.model.batch import Batch, Touched, claim_events, device_events
from dra_mirror.service.model.claims_index import ClaimTracker
from dra_mirror.service.model.class_members import ClassMembers
from dra_mirror.service.model.devices_index import DeviceTracker
from dra_mirror.service.model.hooks import hooks
from dra_mirror.service.model.index_reads import IndexReads
from dra_mirror.service.model.kinds import KINDS, REGISTRY
from dra_mirror.service.model.links import Links
from dra_mirror.service.model.live import LIVE_BATCH_LIMIT, LiveEvent, Resync
from dra_mirror.service.model.ordering import IndexOrders
from dra_mirror.service.model.pods import on_pod
from dra_mirror.service.model.records import (
    POD,
    RESOURCE_CLAIM,
    ClaimRecord,
    ObjectKey,
    PodRecord,
    Record,
    SliceRecord,
    key_of,
)
from dra_mirror.service.model.relations import DEVICE_ALLOCATIONS, FAN_OUT, RELATIONS
from dra_mirror.service.model.taint_rules import SelectorMatcher

ADDED = "ADDED"
MODIFIED = "MODIFIED"
DELETED = "DELETED"
RECORD_TYPES = {kind.kind: kind.record for kind in REGISTRY}


class Event(NamedTuple):
    type: str  # ADDED | MODIFIED | DELETED
    record: Record


class ClusterIndex(IndexReads):
    """Everything the mirror knows of one cluster, kept consistent event by event."""

    def __init__(self, cluster: str, *, link_deltas: bool = True, transitions: bool = True,
                 selector_matcher: SelectorMatcher | None = None,
                 class_members: bool = False,
                 idle_grace: float = DEFAULT_GRACE) -> None:  # fmt: skip
        """`link_deltas=False`: no reverse-map entries in `Changes.delta` (the index is the store);
        `transitions=False`: no `Changes.transitions` (no history reads them); the rest is the same.
        `selector_matcher`: the CEL of 1.33/1.34 DeviceTaintRules (taint_rules.SelectorMatcher).
        `class_members`: keep which DeviceClasses offer each device and report it in
        `Changes.delta.classes` (class_members.py; for a store outside the process), with
        `selector_matcher` evaluating them."""
        self.cluster = cluster
        self.idle_grace = idle_grace  # seconds a starting consumer keeps its claim from idleness
        self._transitions = transitions
        self._objects: dict[str, dict[ObjectKey, Record]] = {kind: {} for kind in KINDS}
        self.links = Links(RELATIONS)
        self.listed: set[str] = set()  # kinds whose complete LIST the index has seen
        self._link_deltas = link_deltas
        self.touched = Touched()
        self.links.delta = self.touched.delta if link_deltas else None
        self._devices = DeviceTracker(self, selector_matcher)
        self.members = ClassMembers.kept(class_members, selector_matcher)
        self._claims = ClaimTracker(self)
        self._hooks = hooks(cluster, self.links, self._devices, self._claims)
        self._announcements = Announcements(
            cluster,
            claims=self._claims,
            devices=self._devices,
            claim_records=self._objects[RESOURCE_CLAIM],
        )
        self.order = IndexOrders(
            cluster, self._objects, self._devices.devices, self._devices.unpublished
        )

    # --- writing --------------------------------------------------------------------------------

    def apply(
        self,
        events: Iterable[Event],
        *,
        at: str,
        resource_version: str = "",
        listed: str | None = None,
        added: Iterable[Record] = (),
    ) -> ch.Changes:
        """Fold one batch of events. `listed`: the batch is the complete LIST of that kind
        (`resync` passes it); `added`: that LIST, when the index holds nothing of its kind
        (`resync` passes it instead of events: see `_add_listed`)."""
        batch = Batch(self.cluster, at, keep_transitions=self._transitions)
        self.order.before_batch()
        if listed is not None:
            self._add_listed(listed, added, batch)
        self._fold(events, batch, listed)
        announced = self._announcements.listed(listed, batch) if listed is not None else ()
        changes = self._settle(batch, resource_version, listed)
        changes.announced = announced
        return changes

    def tick(self, *, at: str) -> ch.Changes:
        """Time passed without an event: claims whose starting consumers' grace has run out by
        `at` become idle (service.model.activity)."""
        batch = Batch(self.cluster, at, keep_transitions=self._transitions)
        self.order.before_batch()
        self._claims.expire_grace(batch)
        return self._settle(batch, "", None)

    def next_tick(self) -> float | None:
        """When the first start grace ends, in seconds since the epoch (None: none runs)."""
        return min(self._claims.grace_until.values(), default=None)

    def resync(
        self, kind: str, records: Iterable[Record], *, at: str, resource_version: str = ""
    ) -> ch.Changes:
        """After a (re)list of `kind`: upsert what changed, delete what is no longer there. A
        LIST of a kind the index holds nothing of (its first) is folded in bulk: nothing can
        have vanished and every record is new (`_add_listed`; the same state and Changes)."""
        if not self._objects[kind]:
            return self.apply((), at=at, resource_version=resource_version, listed=kind,
                              added=records)  # fmt: skip
        events = [Event(MODIFIED, record) for record in records]
        seen = {key_of(e.record) for e in events}
        events.extend(
            Event(DELETED, old) for key, old in self._objects[kind].items() if key not in seen
        )
        return self.apply(events, at=at, resource_version=resource_version, listed=kind)

    def seed(self, seed: ch.Seed, *, at: str) -> None:
        """Start a fresh index from what a shared store holds (rule 8), silently."""
        if any(self._objects.values()):
            raise ValueError("only a fresh index can be seeded")
        batch = Batch(self.cluster, at, keep_transitions=False)
        self.order.before_batch()
        # Consumers the seed lacks are gone only if its pods are a complete LIST (rule 5).
        listed = POD if POD in seed.listed else None
        self._fold((Event(MODIFIED, r) for r in seed.records), batch, listed)
        self._claims.seed_idle(seed.idle_since)
        self._devices.remember_uuids(seed.uuids)
        self._settle(batch, "", None, live=False)
        if seed.records:
            self._announcements.seeded()

    def _fold(self, events: Iterable[Event], batch: Batch, listed: str | None) -> None:
        for event in events:
            if event.type == DELETED:
                self._delete(event.record, batch)
            else:
                self._upsert(event.record, batch)
        if listed is not None and listed not in self.listed:
            self.listed.add(listed)
            if listed == POD:
                self._claims.pods_listed(batch)

    def _add_listed(self, kind: str, records: Iterable[Record], batch: Batch) -> None:
        """Fold a LIST of a kind the index holds none of: what `_upsert` does with a record it
        has never seen, without looking for an old one to diff against (the same state and
        Changes; a key twice in the list, or a record of another kind, goes to `_upsert`)."""
        objects, cls = self._objects[kind], RECORD_TYPES[kind]
        claims, devices, upsert, touch = self._claims, self._devices, batch.upsert, self.order.touch
        for record in records:
            meta = record.meta
            key = ObjectKey(meta.cluster, kind, meta.namespace, meta.name)
            if type(record) is not cls or key in objects:
                self._upsert(record, batch)
                continue
            if isinstance(record, ClaimRecord):
                record = claims.view(key, record)
                self.touched.claim(key, None, claims.idle_since.get(key))
                objects[key] = record
                touch(key)
                claims.on_claim(key, None, record, batch)
            elif isinstance(record, PodRecord):
                objects[key] = record
                touch(key)
                on_pod(self.cluster, self.links, key, None, record)
                claims.on_pod(key, None, record, batch)
            elif isinstance(record, SliceRecord):
                objects[key] = record
                touch(key)
                for device in devices.on_slice(key, None, record, batch):
                    claims.reweigh(device, batch)  # as the "devices" hook does
            else:
                objects[key] = record
                touch(key)
                self._dispatch(key, None, record, batch)
            upsert(key, record)

    def _settle(
        self, batch: Batch, resource_version: str, listed: str | None, *, live: bool = True
    ) -> ch.Changes:
        self._devices.refresh_unpublished(self.touched)  # its links belong to this batch
        touched, self.touched = self.touched, Touched()
        self.order.settled(touched.devices)
        self.links.delta = self.touched.delta if self._link_deltas else None
        delta = touched.delta
        statuses_before = self._devices.settle(touched)
        for key in statuses_before:
            delta.statuses[key] = self._devices.statuses.get(key)
        if self.members is not None:
            self.members.settle(self._devices.devices, touched.entries, delta.classes)
            if batch.keep_transitions:  # history keeps which classes select each device
                for (name, key), member in sorted(delta.classes.items()):
                    entry = self._devices.devices.get(key)
                    if member and entry is not None:
                        unit = self.unit(key)  # its GPU counts for the class, through
                        physical = unit.counter or unit.physical  # the device counting it
                        batch.transition(
                            ch.DEVICE_CLASSIFIED, driver=key.driver, pool=key.pool,
                            device=key.device, uuid=entry.device.uuid, class_names=(name,),
                            data={"physical": physical},
                        )  # fmt: skip
        if self._link_deltas:
            for relation, from_key in delta.touched():
                if relation not in FAN_OUT:
                    delta.lists[(relation, from_key)] = self.lookup(relation, from_key)
        events: list[LiveEvent] = []
        if live and batch.size > LIVE_BATCH_LIMIT:
            events.append(Resync(self.cluster, f"a batch of {batch.size} objects"))
        elif live:
            claims = self._objects[RESOURCE_CLAIM]
            events.extend(
                claim_events(
                    self.cluster, touched, claims, self._claims.idle_since,
                    self._claims.consumer_pods,
                )
            )  # fmt: skip
            events.extend(
                device_events(
                    touched.entries.keys() | statuses_before.keys() | touched.holders.keys(),
                    touched.entries,
                    statuses_before,
                    touched.holders,
                    self._devices.devices,
                    self._devices.statuses,
                    self.links.reader(DEVICE_ALLOCATIONS),
                )
            )
        return ch.Changes(
            cluster=self.cluster,
            at=batch.at,
            upserts=list(batch.upserts.values()),
            deletes=list(batch.deletes.values()),
            transitions=batch.transitions,
            resource_version=resource_version,
            listed_kind=listed,
            delta=delta,
            events=events,
        )

    def _upsert(self, record: Record, batch: Batch) -> None:
        key = key_of(record)
        kind = key.kind
        objects = self._objects[kind]
        old = objects.get(key)
        if isinstance(record, ClaimRecord):
            record = self._claims.view(key, record)
            if old is not None and old.meta.uid and record.meta.uid != old.meta.uid:
                self._delete(old, batch)  # recreated under the same name
                old = None
        if old == record:
            return
        if isinstance(record, ClaimRecord):
            assert old is None or isinstance(old, ClaimRecord)
            self.touched.claim(key, old, self._claims.idle_since.get(key))
        objects[key] = record
        if old is None:
            self.order.touch(key)
        self._dispatch(key, old, record, batch)
        batch.upsert(key, record)

    def _delete(self, record: Record, batch: Batch) -> None:
        key = key_of(record)
        old = self._objects[key.kind].pop(key, None)
        if old is None:
            return
        self.order.touch(key)
        if isinstance(old, ClaimRecord):
            self.touched.claim(key, old, self._claims.idle_since.get(key))
        self._dispatch(key, old, None, batch)
        batch.delete(key, old)

    def _dispatch(
        self, key: ObjectKey, old: Record | None, new: Record | None, batch: Batch
    ) -> None:
        """What the index derives of the change, by the kind's `IndexHook` (the registry's)."""
        if self.members is not None:  # a DeviceClass is matched again
            self.members.on_record(old, new)
        self._hooks[key.kind](key, old, new, batch)

    def replace_claim_view(self, key: ObjectKey, batch: Batch) -> None:
        """A pod changed what it says of a claim (template, origin): re-emit the claim's view."""
        claims = self._objects[RESOURCE_CLAIM]
        claim = claims.get(key)
        if not isinstance(claim, ClaimRecord):
            return
        view = self._claims.view(key, claim)
        if view != claim:
            self.touched.claim(key, claim, self._claims.idle_since.get(key))
            claims[key] = view
            batch.upsert(key, view)


__all__ = ["ADDED", "DELETED", "MODIFIED", "RELATIONS", "ClusterIndex", "Event"]
