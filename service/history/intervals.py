"""Which history intervals a run of transitions opens and closes: the decisions, without SQL.

Rules (each replay-safe, so at-least-once delivery writes every fact exactly once):

* an opening transition (allocated, consumer_added, wait_started, idle_started,
  device_appeared) opens an interval unless one is already open for the same identity — a
  re-announcement (a relist, a replay) keeps the original start. Rows are inserted ON CONFLICT
  DO NOTHING on (identity, start): the replay of an interval already closed is a no-op.
* a closing transition closes the open interval of its identity if it started at or before
  the closing instant; otherwise (nothing open, or a later interval open) it is a replay and
  does nothing. claim_deleted closes everything still open for the claim. A hold or a
  reservation released because its claim was deleted ends `deleted` (the transition's reason),
  any other `released` / `removed`.
* a wait or an idle spell closed at the instant it opened, in the same batch, is no interval:
  its row is not written (zero-length spells are not intervals).
* device_changed closes the device's interval and opens one with the new data (or rewrites
  the data of an interval that started at that same instant).
* device_classified (a DeviceClass selects the device, as the model evaluated its CEL) records
  the device under the class (`device_classes`), as an allocation for the class does.
* a device appearing (or changing) with a uuid names the device of the allocations that held
  it without one (folded before any slice published it): rows of this batch get the uuid
  here, open rows already written are listed in `Plan.identified` for the recorder to fill.
* an interval still open when a new index started is `unconfirmed` (its end reason, while
  it stays open; service.history.recording): a re-announcement confirms it (one interval
  across the handover, its first start kept), a closing transition closes it as usual. A
  device re-announced with other data than the interval's is closed (`changed`) and opened
  anew.

A `Decider` walks transitions in order over the intervals open before the batch (read once by
`service.history.recording.BatchRecorder`, keyed by `KEYS`) and fills a `Plan`: rows to
insert, intervals to close (by id and start: the partition key), device data to rewrite, the
newest instant per cluster, the classes a device was allocated for (`device_classes`).

Promises: pure; the same transitions over the same open intervals give the same plan.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import orjson

from dra_mirror.service.history.models import (
    AllocationInterval,
    ConsumerInterval,
    DeviceInterval,
    IdleInterval,
    IntervalTable,
    WaitInterval,
)
from dra_mirror.service.history.times import to_us
from dra_mirror.service.model import changes as t
from dra_mirror.service.model.changes import Transition

__all__ = ["KEYS", "MULTI_TABLES", "UNCONFIRMED", "Decider", "OpenInterval", "Opened", "Plan"]

UNCONFIRMED = "unconfirmed"  # the mark of what was open when a new index started

# identity columns of each interval table (after `cluster`)
KEYS: dict[IntervalTable, tuple[str, ...]] = {
    AllocationInterval: ("cluster", "claim_uid", "request", "driver", "pool", "device", "share_id"),
    ConsumerInterval: ("cluster", "claim_uid", "pod_uid"),
    WaitInterval: ("cluster", "claim_uid"),
    IdleInterval: ("cluster", "claim_uid"),
    DeviceInterval: ("cluster", "driver", "pool", "device"),
}
MULTI_TABLES = (AllocationInterval, ConsumerInterval)  # several open intervals per claim
SPELLS = (WaitInterval, IdleInterval)  # a claim's states: one of zero length is none


@dataclass(slots=True)
class OpenInterval:
    """An interval open before or during the batch."""

    start_us: int
    row_id: int | None = None  # committed row
    new_row: dict[str, Any] | None = None  # row to insert in this batch
    unconfirmed: bool = False  # open when a new index started, not re-announced yet
    published: tuple[Any, ...] | None = None  # an unconfirmed device's (data, uuid, node)


# per table: identity (the KEYS columns) -> the interval open for it
Opened = dict[IntervalTable, dict[tuple, OpenInterval]]


@dataclass
class Plan:
    """Everything one segment of a batch writes."""

    inserts: dict[IntervalTable, list[dict[str, Any]]] = field(
        default_factory=lambda: defaultdict(list)
    )
    closes: dict[IntervalTable, list[dict[str, Any]]] = field(
        default_factory=lambda: defaultdict(list)
    )
    data_updates: list[dict[str, Any]] = field(default_factory=list)
    weight_updates: list[dict[str, Any]] = field(default_factory=list)  # committed allocations
    confirms: dict[IntervalTable, list[dict[str, Any]]] = field(
        default_factory=lambda: defaultdict(list)
    )  # unconfirmed intervals a new index re-announced: their mark goes
    marks: dict[str, int] = field(default_factory=dict)
    # (cluster, driver, pool, device) -> the uuid a slice now publishes for it
    identified: dict[tuple[str, str, str, str], str] = field(default_factory=dict)
    waits_from: int | None = None  # earliest wait start or end written (peak cache)
    device_classes: set[tuple[str, str, str]] = field(default_factory=set)

    def wait_touched(self, at: int) -> None:
        if self.waits_from is None or at < self.waits_from:
            self.waits_from = at


class Decider:
    """Walks transitions in order over the open intervals, filling a plan (no I/O)."""

    def __init__(self, plan: Plan, opened: Opened) -> None:
        self.plan = plan
        self.opened = opened
        # (cluster, claim uid) -> open intervals of the claim's tables keyed by more than the
        # claim (allocations, consumers), for claim_deleted; waits and idle holds are keyed by
        # the claim itself
        self.by_claim: dict[tuple[str, str], set[tuple[IntervalTable, tuple]]] = defaultdict(set)
        for table in MULTI_TABLES:
            for key in opened[table]:
                self.by_claim[(key[0], key[1])].add((table, key))
        # allocation rows of this batch written without a uuid, by device key
        self.unnamed: dict[tuple[str, str, str, str], list[dict[str, Any]]] = defaultdict(list)

        self._handlers: dict[str, Callable[[Transition, int], None]] = {
            t.ALLOCATED: self._allocated,
            t.RELEASED: lambda tr, at: self._close(
                AllocationInterval, _key(AllocationInterval, tr), at, tr.reason or "released"
            ),
            t.HOLD_WEIGHED: self._weigh,
            t.CONSUMER_ADDED: lambda tr, at: self._open(
                ConsumerInterval, tr, at, _claim_row(tr, pod=tr.pod, pod_uid=tr.pod_uid)
            ),
            t.CONSUMER_REMOVED: lambda tr, at: self._close(
                ConsumerInterval, _key(ConsumerInterval, tr), at, tr.reason or "removed"
            ),
            t.WAIT_STARTED: lambda tr, at: self._open(WaitInterval, tr, at, _wait_row(tr)),
            t.WAIT_ENDED: lambda tr, at: self._close(
                WaitInterval, _key(WaitInterval, tr), at, tr.reason or "allocated"
            ),
            t.IDLE_STARTED: lambda tr, at: self._open(IdleInterval, tr, at, _claim_row(tr)),
            t.IDLE_ENDED: lambda tr, at: self._close(
                IdleInterval, _key(IdleInterval, tr), at, "ended"
            ),
            t.CLAIM_DELETED: self._claim_deleted,
            t.DEVICE_APPEARED: self._appear_device,
            t.DEVICE_CHANGED: self._change_device,
            t.DEVICE_DISAPPEARED: lambda tr, at: self._close(
                DeviceInterval, _key(DeviceInterval, tr), at, "disappeared"
            ),
            t.DEVICE_CLASSIFIED: self._classified,
        }

    def apply(self, transitions: Iterable[Transition]) -> None:
        handlers = self._handlers
        for tr in transitions:
            handler = handlers.get(tr.type)
            if handler is not None:  # claim_created and the like open nothing by themselves
                handler(tr, to_us(tr.at))

    def _claim_deleted(self, tr: Transition, at: int) -> None:
        claim = (tr.cluster, tr.claim_uid)
        for table, key in list(self.by_claim.get(claim, ())):
            self._close(table, key, at, "deleted")
        for table in (WaitInterval, IdleInterval):
            self._close(table, claim, at, "deleted")

    def _classified(self, tr: Transition, at: int) -> None:
        """A class selects the device (its CEL, evaluated by the model): it counts under the
        class in the audits' inventory, allocated or not."""
        device = tr.uuid or f"{tr.driver}/{tr.pool}/{tr.device}"
        physical = tr.data.get("physical")  # the GPU a partition is part of counts for it too
        for name in tr.class_names:
            self.plan.device_classes.add((tr.cluster, device, name))
            if isinstance(physical, str) and physical != device:
                self.plan.device_classes.add((tr.cluster, physical, name))

    def _allocated(self, tr: Transition, at: int) -> None:
        row = _allocation_row(tr)
        if row["class_name"]:  # even a re-announcement: the class map is kept as a set
            device = tr.uuid or f"{tr.driver}/{tr.pool}/{tr.device}"
            self.plan.device_classes.add((tr.cluster, device, row["class_name"]))
        self._open(AllocationInterval, tr, at, row)

    def _weigh(self, tr: Transition, at: int) -> None:
        """What an open allocation takes, known only once a slice published its device: the
        weight it was written with (a lone device's) was never the truth, so it is replaced for
        the whole interval — and the device's model with it (none was known)."""
        current = self.opened[AllocationInterval].get(_key(AllocationInterval, tr))
        if current is None:
            return
        if current.new_row is not None:
            current.new_row.update(
                equivalents=tr.equivalents, device_type=tr.device_type, device_model=tr.device_model
            )
        elif current.row_id is not None:
            self.plan.weight_updates.append({"row_id": current.row_id, "new_equivalents":
                                             tr.equivalents, "new_type": tr.device_type,
                                             "new_model": tr.device_model})  # fmt: skip

    def _open(self, table: IntervalTable, tr: Transition, at: int, row: dict[str, Any]) -> None:
        key = _key(table, tr)
        current = self.opened[table].get(key)
        if current is not None and current.unconfirmed:
            if table is DeviceInterval and current.published != _published(row):
                self._close(table, key, at, "changed")  # changed while nobody watched
                current = None
            else:  # kept through a handover: the same interval goes on
                self.plan.confirms[table].append({"row_id": current.row_id})
                current.unconfirmed = False
        if current is not None:
            return  # already open: a re-announcement or a replay keeps the first start
        row["start_us"] = at
        row["end_us"] = None
        row["end_reason"] = None
        if table is WaitInterval:
            self.plan.wait_touched(at)
        self.opened[table][key] = OpenInterval(start_us=at, new_row=row)
        self.plan.inserts[table].append(row)
        if table is AllocationInterval and row["uuid"] is None:
            self.unnamed[(tr.cluster, tr.driver, tr.pool, tr.device)].append(row)
        if table in MULTI_TABLES:
            self.by_claim[(key[0], key[1])].add((table, key))

    def _close(self, table: IntervalTable, key: tuple, at: int, reason: str) -> None:
        current = self.opened[table].get(key)
        if current is None or at < current.start_us:
            return  # nothing open, or a later interval is open: a replay
        if table is WaitInterval:
            self.plan.wait_touched(at)
        if current.new_row is not None and at == current.start_us and table in SPELLS:
            # a spell that ended the instant it began (a wait served in the batch that
            # started it, a claim idle between two events of one instant) is no interval
            rows = self.plan.inserts[table]
            rows.pop(next(i for i, r in enumerate(rows) if r is current.new_row))
            self._forget(table, key)
            return
        if current.new_row is not None:
            current.new_row["end_us"] = at
            current.new_row["end_reason"] = reason
        else:
            self.plan.closes[table].append(
                {"row_id": current.row_id, "start": current.start_us, "end": at, "reason": reason}
            )
        self._forget(table, key)

    def _forget(self, table: IntervalTable, key: tuple) -> None:
        del self.opened[table][key]
        if table in MULTI_TABLES:
            self.by_claim[(key[0], key[1])].discard((table, key))

    def _identify(self, tr: Transition) -> None:
        """The device now has a uuid: name it in the allocations that held it without one."""
        if not tr.uuid:
            return
        device = (tr.cluster, tr.driver, tr.pool, tr.device)
        for row in self.unnamed.pop(device, ()):
            row["uuid"] = tr.uuid
        self.plan.identified[device] = tr.uuid

    def _appear_device(self, tr: Transition, at: int) -> None:
        self._identify(tr)
        self._open(DeviceInterval, tr, at, _device_row(tr))

    def _change_device(self, tr: Transition, at: int) -> None:
        self._identify(tr)
        key = _key(DeviceInterval, tr)
        current = self.opened[DeviceInterval].get(key)
        row = _device_row(tr)
        if current is not None and current.start_us == at:
            if current.new_row is not None:
                current.new_row.update(row)
            else:
                self.plan.data_updates.append(
                    {"row_id": current.row_id, "new_data": row["data"], "new_uuid": row["uuid"],
                     "new_node": row["node"]}
                )  # fmt: skip
            return
        self._close(DeviceInterval, key, at, "changed")
        self._open(DeviceInterval, tr, at, row)


def _key(table: IntervalTable, tr: Transition) -> tuple:
    if table is AllocationInterval:
        return (tr.cluster, tr.claim_uid, tr.request, tr.driver, tr.pool, tr.device,
                tr.share_id or "")  # fmt: skip
    if table is ConsumerInterval:
        return (tr.cluster, tr.claim_uid, tr.pod_uid)
    if table is DeviceInterval:
        return (tr.cluster, tr.driver, tr.pool, tr.device)
    return (tr.cluster, tr.claim_uid)


def _claim_row(tr: Transition, **extra: Any) -> dict[str, Any]:
    row = {"cluster": tr.cluster, "namespace": tr.namespace, "claim": tr.claim,
           "claim_uid": tr.claim_uid}  # fmt: skip
    row.update(extra)
    return row


def _wait_row(tr: Transition) -> dict[str, Any]:
    return _claim_row(tr, class_name=tr.class_names[0] if tr.class_names else "",
                      class_names=",".join(tr.class_names),
                      started_before_observation=tr.before_observation)  # fmt: skip


def _allocation_row(tr: Transition) -> dict[str, Any]:
    return _claim_row(
        tr,
        driver=tr.driver,
        pool=tr.pool,
        device=tr.device,
        uuid=tr.uuid,
        node=tr.node,
        request=tr.request,
        share_id=tr.share_id or "",
        consumed_capacity=orjson.dumps(tr.consumed_capacity, option=orjson.OPT_SORT_KEYS).decode(),
        class_name=tr.class_names[0] if tr.class_names else "",
        started_before_observation=tr.before_observation,
        equivalents=tr.equivalents,
        device_type=tr.device_type,
        device_model=tr.device_model,
    )


def _published(row: dict[str, Any]) -> tuple[Any, ...]:
    return (row["data"], row["uuid"], row["node"])


def _device_row(tr: Transition) -> dict[str, Any]:
    return {
        "cluster": tr.cluster,
        "driver": tr.driver,
        "pool": tr.pool,
        "device": tr.device,
        "uuid": tr.uuid,
        "node": tr.node,
        "data": orjson.dumps(tr.data, option=orjson.OPT_SORT_KEYS).decode(),
        "equivalents": tr.equivalents,
        "device_type": tr.device_type,
    }
