"""How one batch of outbox entries becomes rows, inside the writer's one transaction.

Rules (each replay-safe, so at-least-once delivery writes every fact exactly once):

* object versions: INSERT … ON CONFLICT DO NOTHING on (cluster, uid, resourceVersion, deleted);
  the body is the record's msgspec JSON, never parsed by the database.
* an opening transition (allocated, consumer_added, wait_started, idle_started,
  device_appeared) opens an interval unless one is already open for the same identity — a
  re-announcement (a relist, a replay) keeps the original start. Rows are inserted ON CONFLICT
  DO NOTHING on (identity, start): the replay of an interval already closed is a no-op.
* a closing transition closes the open interval of its identity if it started at or before
  the closing instant; otherwise (nothing open, or a later interval open) it is a replay and
  does nothing. claim_deleted closes everything still open for the claim.
* device_changed closes the device's interval and opens one with the new data (or rewrites
  the data of an interval that started at that same instant).
* "started" (a fresh index began watching a cluster): records the gap since the newest
  observation written for that cluster and closes every interval left open then, with reason
  `unwatched` — the fresh index re-announces what is still held, opening new intervals.

Two steps: `prepare(entries)` is pure (object version rows, instants, transitions in order), so
the writer prepares the next batch while SQL works on the current one; `BatchRecorder` then reads
the open intervals a batch touches once (one SELECT per table), decides in Python, and writes
with one executemany per table — on PostgreSQL through COPY and a staging table (`pgcopy`): the
cost is a few statements per batch, not per row.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any

import orjson
from sqlalchemy import String, any_, bindparam, func, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.ext.asyncio import AsyncConnection

from dra_mirror.service.history import peaks, pgcopy
from dra_mirror.service.history.models import (
    INTERVAL_TABLES,
    AllocationInterval,
    ClusterMark,
    ConsumerInterval,
    DeviceInterval,
    Gap,
    IdleInterval,
    ObjectVersion,
    OutboxPosition,
    WaitInterval,
)
from dra_mirror.service.history.outbox import ChangesEntry, GapEntry, OutboxEntry, StartedEntry
from dra_mirror.service.history.times import to_us
from dra_mirror.service.model import changes as t
from dra_mirror.service.model.changes import Transition

CHUNK = 2000  # bound on IN-list parameters per SELECT (SQLite allows 32766 in total)

# identity columns of each interval table (after `cluster`)
_KEYS: dict[type, tuple[str, ...]] = {
    AllocationInterval: ("cluster", "claim_uid", "request", "driver", "pool", "device", "share_id"),
    ConsumerInterval: ("cluster", "claim_uid", "pod_uid"),
    WaitInterval: ("cluster", "claim_uid"),
    IdleInterval: ("cluster", "claim_uid"),
    DeviceInterval: ("cluster", "driver", "pool", "device"),
}
_MULTI_TABLES = (AllocationInterval, ConsumerInterval)  # several open intervals per claim


@dataclass(slots=True)
class _Open:
    start_us: int
    row_id: int | None = None  # committed row
    new_row: dict[str, Any] | None = None  # row to insert in this batch


@dataclass
class _Plan:
    """Everything one segment of a batch writes."""

    inserts: dict[type, list[dict[str, Any]]] = field(default_factory=lambda: defaultdict(list))
    closes: dict[type, list[dict[str, Any]]] = field(default_factory=lambda: defaultdict(list))
    data_updates: list[dict[str, Any]] = field(default_factory=list)
    marks: dict[str, int] = field(default_factory=dict)
    waits_from: int | None = None  # earliest wait start or end written (peak cache)

    def wait_touched(self, at: int) -> None:
        if self.waits_from is None or at < self.waits_from:
            self.waits_from = at


def _insert(conn: AsyncConnection, table: type):
    dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
    return dialect.insert(table)


VERSION_COLUMNS = ("cluster", "kind", "namespace", "name", "uid", "resource_version",
                   "observed_us", "deleted", "body")  # fmt: skip


@dataclass
class Segment:
    """A run of consecutive Changes entries, prepared without the database: their object
    versions as rows (tuples in VERSION_COLUMNS order), the newest instant per cluster, and
    their transitions in order."""

    versions: list[tuple[Any, ...]] = field(default_factory=list)
    marks: dict[str, int] = field(default_factory=dict)
    transitions: list[Transition] = field(default_factory=list)


Prepared = list[Segment | GapEntry | StartedEntry]


def prepare(entries: Iterable[OutboxEntry], into: Prepared | None = None) -> Prepared:
    """Everything about a batch that needs no database (decoding aside, the costliest part):
    pure, so the writer prepares the next batch while SQL works on the current one. With
    `into`, the entries continue what was prepared there (a batch prepared in slices)."""
    prepared: Prepared = [] if into is None else into
    segment = prepared[-1] if prepared and isinstance(prepared[-1], Segment) else None
    for entry in entries:
        if not isinstance(entry, ChangesEntry):
            prepared.append(entry)
            segment = None
            continue
        if segment is None:
            segment = Segment()
            prepared.append(segment)
        cluster = entry.cluster
        observed = to_us(entry.at)
        for v in entry.versions:
            segment.versions.append(
                (cluster, v.kind, v.namespace, v.name, v.uid, v.resource_version, observed,
                 v.deleted, v.body.decode())
            )  # fmt: skip
        if observed > segment.marks.get(cluster, -1):
            segment.marks[cluster] = observed
        segment.transitions.extend(entry.transitions)
    return prepared


class BatchRecorder:
    """Writes one batch of entries through `conn` (the caller owns the transaction)."""

    def __init__(self, conn: AsyncConnection) -> None:
        self.conn = conn
        self.rows = 0  # rows inserted or updated, for the writer's metrics

    async def record_prepared(self, prepared: Prepared) -> None:
        for part in prepared:
            if isinstance(part, Segment):
                await self._segment(part)
            elif isinstance(part, GapEntry):
                await self._gap(part.cluster, to_us(part.start), to_us(part.end))
            else:
                await self._started(part.cluster, to_us(part.at))

    async def position(self, stream: str, entry_id: str, now_us: int) -> None:
        stmt = _insert(self.conn, OutboxPosition).values(
            stream=stream, position=entry_id, updated_us=now_us
        )
        stmt = stmt.on_conflict_do_update(
            index_elements=["stream"],
            set_={"position": stmt.excluded.position, "updated_us": stmt.excluded.updated_us},
        )
        await self.conn.execute(stmt)

    # --- one run of Changes entries -------------------------------------------------------

    async def _segment(self, segment: Segment) -> None:
        # object versions first: the largest write, which needs no decision; while SQL takes
        # it in, the writer's read-ahead prepares the next batch
        await self._write_versions(segment.versions)
        plan = _Plan(marks=segment.marks)
        if segment.transitions:
            opened = await self._open_intervals(segment.transitions)
            _Decider(plan, opened).apply(segment.transitions)
        await self._write(plan)

    async def _write_versions(self, versions: list[tuple[Any, ...]]) -> None:
        conn = self.conn
        if conn.dialect.name == "postgresql" and len(versions) >= pgcopy.MIN_ROWS:
            await pgcopy.copy_insert(conn, ObjectVersion.__tablename__, VERSION_COLUMNS, versions)
        elif versions:
            rows = [dict(zip(VERSION_COLUMNS, version, strict=True)) for version in versions]
            await conn.execute(_insert(conn, ObjectVersion).on_conflict_do_nothing(), rows)
        self.rows += len(versions)

    async def _open_intervals(self, transitions: list[Transition]) -> dict[type, dict]:
        claim_uids = sorted({tr.claim_uid for tr in transitions if tr.claim_uid})
        devices = sorted({tr.device for tr in transitions if tr.type.startswith("device_")})
        opened: dict[type, dict] = {table: {} for table in INTERVAL_TABLES}
        for table in INTERVAL_TABLES:
            keys = _KEYS[table]
            column, values = (
                (DeviceInterval.device, devices)
                if table is DeviceInterval
                else (table.claim_uid, claim_uids)
            )
            for start in range(0, len(values), CHUNK):
                chunk = values[start : start + CHUNK]
                columns = [getattr(table, name) for name in keys]
                # PostgreSQL: one array parameter, so the statement text (and its prepared
                # plan) is the same for every batch; SQLite has no arrays: an IN list
                wanted = (
                    column == any_(bindparam("wanted", chunk, type_=ARRAY(String)))
                    if self.conn.dialect.name == "postgresql"
                    else column.in_(chunk)
                )
                query = select(table.id, table.start_us, *columns).where(
                    table.end_us.is_(None), wanted
                )
                for row in await self.conn.execute(query):
                    opened[table][tuple(row[2:])] = _Open(start_us=row[1], row_id=row[0])
        return opened

    async def _write(self, plan: _Plan) -> None:
        conn = self.conn
        if plan.waits_from is not None:
            await peaks.invalidate(conn, plan.waits_from, max(plan.marks.values()))
        bulk = conn.dialect.name == "postgresql"
        for table, rows in plan.inserts.items():
            if bulk and len(rows) >= pgcopy.MIN_ROWS:
                columns = tuple(rows[0])
                records = list(map(itemgetter(*columns), rows))
                await pgcopy.copy_insert(conn, table.__tablename__, columns, records)
            elif rows:
                await conn.execute(_insert(conn, table).on_conflict_do_nothing(), rows)
        for table, rows in plan.closes.items():
            if bulk and len(rows) >= pgcopy.MIN_ROWS:
                await pgcopy.copy_close(conn, table.__tablename__, rows)
            elif rows:
                stmt = (
                    update(table)
                    .where(table.id == bindparam("row_id"))
                    .values(end_us=bindparam("end"), end_reason=bindparam("reason"))
                )
                await conn.execute(stmt, rows)
        if plan.data_updates:
            stmt = (
                update(DeviceInterval)
                .where(DeviceInterval.id == bindparam("row_id"))
                .values(data=bindparam("new_data"), uuid=bindparam("new_uuid"),
                        node=bindparam("new_node"))
            )  # fmt: skip
            await conn.execute(stmt, plan.data_updates)
        for cluster, seen in plan.marks.items():
            stmt = _insert(conn, ClusterMark).values(cluster=cluster, last_seen_us=seen)
            newest = (func.greatest if conn.dialect.name == "postgresql" else func.max)(
                ClusterMark.last_seen_us, stmt.excluded.last_seen_us
            )
            await conn.execute(
                stmt.on_conflict_do_update(
                    index_elements=["cluster"], set_={"last_seen_us": newest}
                )
            )
        self.rows += (
            sum(len(rows) for rows in plan.inserts.values())
            + sum(len(rows) for rows in plan.closes.values())
            + len(plan.data_updates)
        )

    # --- gaps --------------------------------------------------------------------------

    async def _gap(self, cluster: str, start: int, end: int) -> None:
        if end <= start:
            return
        stmt = _insert(self.conn, Gap).values(cluster=cluster, start_us=start, end_us=end)
        await self.conn.execute(stmt.on_conflict_do_nothing())
        self.rows += 1

    async def _started(self, cluster: str, at: int) -> None:
        last_seen = await self.conn.scalar(
            select(ClusterMark.last_seen_us).where(ClusterMark.cluster == cluster)
        )
        if last_seen is None or last_seen >= at:
            return
        await self._gap(cluster, last_seen, at)
        await peaks.invalidate(self.conn, last_seen, at)  # open waits end at last_seen
        for table in INTERVAL_TABLES:
            await self.conn.execute(
                update(table)
                .where(table.cluster == cluster, table.end_us.is_(None))
                .where(table.start_us <= last_seen)
                .values(end_us=last_seen, end_reason="unwatched")
            )


class _Decider:
    """Walks transitions in order over the open intervals, filling a plan (no I/O)."""

    def __init__(self, plan: _Plan, opened: dict[type, dict]) -> None:
        self.plan = plan
        self.opened = opened
        # (cluster, claim uid) -> open intervals of the claim's tables keyed by more than the
        # claim (allocations, consumers), for claim_deleted; waits and idle holds are keyed by
        # the claim itself
        self.by_claim: dict[tuple[str, str], set[tuple[type, tuple]]] = defaultdict(set)
        for table in _MULTI_TABLES:
            for key in opened[table]:
                self.by_claim[(key[0], key[1])].add((table, key))

        self._handlers: dict[str, Callable[[Transition, int], None]] = {
            t.ALLOCATED: lambda tr, at: self._open(AllocationInterval, tr, at, _allocation_row(tr)),
            t.RELEASED: lambda tr, at: self._close(
                AllocationInterval, _key(AllocationInterval, tr), at, "released"
            ),
            t.CONSUMER_ADDED: lambda tr, at: self._open(
                ConsumerInterval, tr, at, _claim_row(tr, pod=tr.pod, pod_uid=tr.pod_uid)
            ),
            t.CONSUMER_REMOVED: lambda tr, at: self._close(
                ConsumerInterval, _key(ConsumerInterval, tr), at, "removed"
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
            t.DEVICE_APPEARED: lambda tr, at: self._open(DeviceInterval, tr, at, _device_row(tr)),
            t.DEVICE_CHANGED: self._change_device,
            t.DEVICE_DISAPPEARED: lambda tr, at: self._close(
                DeviceInterval, _key(DeviceInterval, tr), at, "disappeared"
            ),
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

    def _open(self, table: type, tr: Transition, at: int, row: dict[str, Any]) -> None:
        key = _key(table, tr)
        if key in self.opened[table]:
            return  # already open: a re-announcement or a replay keeps the first start
        row["start_us"] = at
        row["end_us"] = None
        row["end_reason"] = None
        if table is WaitInterval:
            self.plan.wait_touched(at)
        self.opened[table][key] = _Open(start_us=at, new_row=row)
        self.plan.inserts[table].append(row)
        if table in _MULTI_TABLES:
            self.by_claim[(key[0], key[1])].add((table, key))

    def _close(self, table: type, key: tuple, at: int, reason: str) -> None:
        current = self.opened[table].get(key)
        if current is None or at < current.start_us:
            return  # nothing open, or a later interval is open: a replay
        if table is WaitInterval:
            self.plan.wait_touched(at)
        if current.new_row is not None:
            current.new_row["end_us"] = at
            current.new_row["end_reason"] = reason
        else:
            self.plan.closes[table].append({"row_id": current.row_id, "end": at, "reason": reason})
        del self.opened[table][key]
        if table in _MULTI_TABLES:
            self.by_claim[(key[0], key[1])].discard((table, key))

    def _change_device(self, tr: Transition, at: int) -> None:
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


def _key(table: type, tr: Transition) -> tuple:
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
                      class_names=",".join(tr.class_names))  # fmt: skip


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
    )


def _device_row(tr: Transition) -> dict[str, Any]:
    return {
        "cluster": tr.cluster,
        "driver": tr.driver,
        "pool": tr.pool,
        "device": tr.device,
        "uuid": tr.uuid,
        "node": tr.node,
        "data": orjson.dumps(tr.data, option=orjson.OPT_SORT_KEYS).decode(),
    }
