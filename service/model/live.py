"""Live events: what changed in one claim or one device, with its old and new state.

The index derives them once per batch from what the batch changed (`Changes.events`); the
stores only publish them (the in-process bus, a Redis stream per cluster) and the GraphQL subscriptions
carry them. Because they come from the derived state, a change of a DERIVED field is an event
even when the object itself did not change:

* `ClaimEvent` — a ResourceClaim ADDED, MODIFIED or DELETED; old/new are the claim record as
  the stores serve it (template name included), its idle mark (`idle_since`: allocated and
  no consumer pod Running, since when) and its consumer pods (service.model.consumers) as
  they were then. A consumer pod changing phase (starting to run, finishing) is a MODIFIED
  whose records are equal and whose consumers (and, often, idle marks) differ;
* `DeviceEvent` — a device of a valid pool ADDED, MODIFIED (its entry, its status or its
  holders changed: free -> held when a claim is allocated, free -> blocked when sibling
  partitions took its counters, held -> held when one claim released it and another was
  allocated it in the same batch) or DELETED (no longer in a valid pool generation). Each side
  carries the device's holders (one `AllocationRef` per allocation result) as they were at
  that moment, so the old side of an event is the true previous snapshot.

One rule for large batches (initial syncs, relists): a batch that changes more than
LIVE_BATCH_LIMIT objects carries no per-object events — the payload would be the whole cluster
twice over, for every subscriber — but one `Resync`: a subscriber re-reads with a query.

Events are frozen, acyclic msgspec Structs (tagged by `topic`), so they encode as they are.
"""

from __future__ import annotations

from msgspec import Struct

from dra_mirror.service.model.records import (
    AllocationRef,
    ClaimRecord,
    DeviceEntry,
    DeviceKey,
    PodRecord,
)

ADDED, MODIFIED, DELETED = "ADDED", "MODIFIED", "DELETED"
LIVE_BATCH_LIMIT = 2000
"""Batches that change more objects than this carry no per-object live events."""


class DeviceState(Struct, frozen=True, gc=False):
    entry: DeviceEntry
    status: str | None = None  # free | held | shared | blocked
    holders: tuple[AllocationRef, ...] = ()  # its allocation results then, in a stable order


class ClaimEvent(Struct, frozen=True, gc=False, tag_field="topic", tag="claim"):
    type: str
    cluster: str
    namespace: str
    name: str
    old: ClaimRecord | None = None
    new: ClaimRecord | None = None
    old_idle_since: str | None = None
    new_idle_since: str | None = None
    old_consumers: tuple[PodRecord, ...] = ()
    new_consumers: tuple[PodRecord, ...] = ()


class DeviceEvent(Struct, frozen=True, gc=False, tag_field="topic", tag="device"):
    type: str
    key: DeviceKey
    node: str | None = None  # the device's node (new state, else old); None: network-attached
    old: DeviceState | None = None
    new: DeviceState | None = None


class Resync(Struct, frozen=True, gc=False, tag_field="topic", tag="resync"):
    """Events of the cluster were left out here (a batch too large to carry them, or a
    subscriber that fell behind or resumed from a point no longer kept): re-read with a query."""

    cluster: str
    reason: str = ""


LiveEvent = ClaimEvent | DeviceEvent | Resync


def change_type(old: object | None, new: object | None) -> str:
    if old is None:
        return ADDED
    return DELETED if new is None else MODIFIED


def event_cluster(event: LiveEvent) -> str:
    return event.key.cluster if isinstance(event, DeviceEvent) else event.cluster
