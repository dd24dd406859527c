"""What one batch of watch events changes: the value handed from the model to every sink.

The model decides everything worth writing, once, in the reactor's one `ClusterIndex`:

* `upserts` (new or changed records) and `deletes` (the last known record of what vanished);
* `transitions` — the facts history keeps: a claim allocated, a device released, a consumer
  added, a claim started waiting…;
* `delta` — what a store must persist of the DERIVED state (`service.model.delta`: reverse-map
  entries, valid devices, device statuses, idle marks), net per entry;
* `events` — the live events subscribers get (`service.model.live`: each claim and device the
  batch changed, old and new state, derived fields included; none for a batch of more than
  `LIVE_BATCH_LIMIT` objects);
* `announced` — the groups of facts (`CLAIM_FACTS`, `IDLE_FACTS`, `DEVICE_FACTS`) whose
  opening transitions this batch carries COMPLETE for the first time in this index's life:
  everything of that group the cluster holds now is opened (or re-announced) in it. History
  keeps what it had open across a start of a new index and, at these batches, ends what the
  new index did not re-announce (service.history.recording).

Sinks (state stores, the history outbox, the live bus) only carry a `Changes` out; they never
re-derive it and keep no index of their own. A `Changes` is plain data, comparable in tests.
"""

from __future__ import annotations

from typing import Any

from msgspec import Struct, field

from dra_mirror.service.model.delta import IndexDelta
from dra_mirror.service.model.live import LiveEvent
from dra_mirror.service.model.records import DeviceKey, ObjectKey, Record, key_of

# Transition types. Times (`at`) are RFC 3339 UTC observation times given to the model.
CLAIM_CREATED = "claim_created"
CLAIM_DELETED = "claim_deleted"
WAIT_STARTED = "wait_started"  # unallocated, and an unfinished pod references it (waiting.py)
# served (reason "allocated") or abandoned ("deleted": the claim; "unreferenced": no pod needs it)
WAIT_ENDED = "wait_ended"
ALLOCATED = "allocated"  # one allocation result: a device (or a share of it) given to a claim
RELEASED = "released"  # that result ended: deallocated, or the claim deleted (reason "deleted")
# what an open allocation takes, known only now: its device was held before a slice published it
HOLD_WEIGHED = "hold_weighed"
CONSUMER_ADDED = "consumer_added"  # a pod appeared in status.reservedFor
CONSUMER_REMOVED = "consumer_removed"  # reason "deleted" when the claim was deleted
IDLE_STARTED = "idle_started"  # allocated, and no consumer pod Running
IDLE_ENDED = "idle_ended"
DEVICE_APPEARED = "device_appeared"  # in the valid (highest) generation of its pool
DEVICE_CHANGED = "device_changed"  # attributes, capacity, counters or taints changed
DEVICE_DISAPPEARED = "device_disappeared"
# a DeviceClass selects the device (its CEL evaluated when the device or the class appeared or
# changed: class_members.py): class_names holds the class. Kept by an index keeping members.
DEVICE_CLASSIFIED = "device_classified"

# Groups of facts a batch may announce complete (`Changes.announced`) and the transitions
# that open them: a claim's holds, reservations and wait; its idleness; the devices published.
CLAIM_FACTS = "claims"  # allocated, consumer_added
IDLE_FACTS = "idle"  # idle_started, wait_started (both need the pods)
DEVICE_FACTS = "devices"  # device_appeared
FACT_GROUPS = (CLAIM_FACTS, IDLE_FACTS, DEVICE_FACTS)

TRANSITION_TYPES = frozenset(
    {
        CLAIM_CREATED,
        CLAIM_DELETED,
        WAIT_STARTED,
        WAIT_ENDED,
        ALLOCATED,
        RELEASED,
        HOLD_WEIGHED,
        CONSUMER_ADDED,
        CONSUMER_REMOVED,
        IDLE_STARTED,
        IDLE_ENDED,
        DEVICE_APPEARED,
        DEVICE_CHANGED,
        DEVICE_DISAPPEARED,
        DEVICE_CLASSIFIED,
    }
)


class Transition(Struct, frozen=True, gc=False):
    """One fact for history. Fields not relevant to `type` keep their defaults.

    Immutable and acyclic: `gc=False` keeps it out of the cyclic garbage collector.

    * claim transitions: namespace, claim, claim_uid (+ class_names, node)
    * allocated / released / hold_weighed: + driver, pool, device, uuid, request, share_id,
      consumed_capacity, node
    * consumer_*: + pod, pod_uid
    * device_*: driver, pool, device, uuid, node, data (attributes/capacity as JSON)
    * wait_ended: reason ("allocated" | "deleted" | "unreferenced")
    * released, consumer_removed: reason "deleted" when the claim itself was deleted
    """

    type: str
    cluster: str
    at: str
    namespace: str = ""
    claim: str = ""
    claim_uid: str = ""
    class_names: tuple[str, ...] = ()
    driver: str = ""
    pool: str = ""
    device: str = ""
    uuid: str | None = None
    request: str = ""
    share_id: str | None = None
    consumed_capacity: dict[str, str] = field(default_factory=dict)
    node: str | None = None
    pod: str = ""
    pod_uid: str = ""
    reason: str = ""
    data: dict[str, Any] = field(default_factory=dict)
    # wait_started, allocated: it began before the index observed the cluster (its claims and
    # pods listed once): the start is when the mirror first saw it (service.model.waiting).
    before_observation: bool = False
    # allocated, hold_weighed: the GPU-equivalents the hold takes; device_*: those the device stands for in
    # inventory (1 for the device counting its physical device, else 0); with the physical
    # device's type (gpu, nic, or the driver): service.model.physical
    equivalents: float = 0.0
    device_type: str = ""
    # allocated, hold_weighed: the model the device publishes (`physical.product_name`), ""
    device_model: str = ""


class Changes(Struct):
    """The effect of one batch of events of one cluster."""

    cluster: str
    at: str
    upserts: list[Record] = field(default_factory=list)
    deletes: list[Record] = field(default_factory=list)  # last known state of removed objects
    transitions: list[Transition] = field(default_factory=list)
    resource_version: str = ""  # the newest resourceVersion the batch covers (for resuming)
    # The kind whose complete LIST this batch reconciles (ClusterIndex.resync), else None.
    listed_kind: str | None = None
    delta: IndexDelta = field(default_factory=IndexDelta)
    events: list[LiveEvent] = field(default_factory=list)
    announced: tuple[str, ...] = ()  # fact groups this batch carries complete (FACT_GROUPS)

    def __bool__(self) -> bool:
        return bool(
            self.upserts
            or self.deletes
            or self.transitions
            or self.delta
            or self.events
            or self.announced
        )

    def keys(self) -> list[ObjectKey]:
        return [key_of(r) for r in self.upserts] + [key_of(r) for r in self.deletes]


class Seed(Struct):
    """What a shared store holds of one cluster, for a fresh index to start from
    (`ClusterIndex.seed`): the records an earlier writer left, the idle marks it wrote (a
    claim idle since before a takeover keeps that time), and the kinds whose complete LIST
    those records reflect (every kind once the earlier writer reported the cluster synced; a
    kind with records at least, since a kind's first LIST is written as one batch), and the
    uuids of the held devices no slice published any more."""

    records: list[Record] = field(default_factory=list)
    idle_since: dict[ObjectKey, str] = field(default_factory=dict)
    listed: frozenset[str] = frozenset()
    # The uuids of held devices no slice publishes (their slices went before the takeover).
    uuids: dict[DeviceKey, str] = field(default_factory=dict)
