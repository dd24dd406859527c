"""How one batch of outbox entries becomes rows, inside the writer's one transaction.

* object versions: INSERT … ON CONFLICT DO NOTHING on (cluster, uid, resourceVersion, deleted);
  the body is the record's msgspec JSON, never parsed by the database.
* transitions: the intervals they open and close, decided by `service.history.intervals`
  (replay-safe rules, written down there) over the intervals open before the batch.
* "watched" (a bookmark, a lease renewal, a clean stop): the cluster was watched until then,
  quiet or not — its mark moves there, so a later start counts a gap only from there.
* "started" (a new index began watching a cluster): records the gap since the cluster's mark
  (the newest observation or "watched" written for it) and marks every interval still open
  `unconfirmed` (it stays open). The new index's first complete list of each group of facts
  (`Changes.announced`) re-announces what is still true: those intervals go on (one interval
  across a handover, however quiet the cluster was); what it did not re-announce ends there,
  when it was seen gone (as after a reconnect's relist), with reason `unwatched`.

On PostgreSQL the growing tables are partitioned by month (`service.history.partitions`): a
batch first makes sure the months it writes exist (`partitions.cover`); object versions are
unique only with their observation time there, so a version already stored (a re-announcement
after a restart) is looked up and skipped before the COPY; closes name the row by (id, start),
the partitioned primary key. Allocations also record the classes a device was allocated for
(`device_classes`, read by `contention` by CLASS).

Two steps: `prepare(entries)` (`service.history.preparing`) is pure (object version rows, instants, transitions in order), so
the writer prepares the next batch while SQL works on the current one; `BatchRecorder` then reads
the open intervals a batch touches once (one SELECT per table), decides in Python
(`service.history.intervals`), and writes
with one executemany per table — on PostgreSQL through COPY and a staging table (`pgcopy`): the
cost is a few statements per batch, not per row.
"""

from __future__ import annotations

from operator import itemgetter
from typing import Any

from sqlalchemy import String, bindparam, func, select, text, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.ext.asyncio import AsyncConnection

from dra_mirror.service.history import devices, partitions, peaks, pgcopy
from dra_mirror.service.history.intervals import (
    KEYS,
    UNCONFIRMED,
    Decider,
    Opened,
    OpenInterval,
    Plan,
)
from dra_mirror.service.history.models import (
    INTERVAL_TABLES,
    AllocationInterval,
    Base,
    ClusterMark,
    ConsumerInterval,
    DeviceClass,
    DeviceInterval,
    Gap,
    IdleInterval,
    IntervalTable,
    ObjectVersion,
    OutboxPosition,
    WaitInterval,
)
from dra_mirror.service.history.outbox import (
    GapEntry,
    WatchedEntry,
)
from dra_mirror.service.history.preparing import VERSION_COLUMNS, Prepared, Segment, months_needed
from dra_mirror.service.history.times import to_us
from dra_mirror.service.model import changes as ch
from dra_mirror.service.model.changes import Transition
from dra_mirror.service.model.records import RESOURCE_CLAIM

CHUNK = 2000  # bound on IN-list parameters per SELECT (SQLite allows 32766 in total)
RECENT = 24 * 3600 * 1_000_000  # how far back a re-emitted view of a version is looked for

# the tables whose intervals each group of facts a new index announces (`Changes.announced`)
GROUP_TABLES: dict[str, tuple[IntervalTable, ...]] = {
    ch.CLAIM_FACTS: (AllocationInterval, ConsumerInterval),
    ch.IDLE_FACTS: (IdleInterval, WaitInterval),  # both need the pods
    ch.DEVICE_FACTS: (DeviceInterval,),
}


def _insert(conn: AsyncConnection, table: type[Base]) -> postgresql.Insert | sqlite.Insert:
    dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
    return dialect.insert(table)


class BatchRecorder:
    """Writes one batch of entries through `conn` (the caller owns the transaction)."""

    def __init__(self, conn: AsyncConnection) -> None:
        self.conn = conn
        self.rows = 0  # rows inserted or updated, for the writer's metrics
        self.gaps = 0  # gaps recorded (a cluster not watched for a while), for the metrics

    async def record_prepared(self, prepared: Prepared) -> None:
        await partitions.cover(self.conn.engine, self.conn, months_needed(prepared))
        for part in prepared:
            if isinstance(part, Segment):
                await self._segment(part)
            elif isinstance(part, GapEntry):
                await self._gap(part.cluster, to_us(part.start), to_us(part.end))
            elif isinstance(part, WatchedEntry):
                await self._watched(part.cluster, to_us(part.until))
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
        await self._write_versions(segment)
        plan = Plan(marks=segment.marks)
        if segment.transitions:
            opened = await self._open_intervals(segment.transitions)
            Decider(plan, opened).apply(segment.transitions)
        await self._write(plan)
        for cluster, groups, at in segment.announced:
            await self._settle_unconfirmed(cluster, groups, to_us(at))

    async def _write_versions(self, segment: Segment) -> None:
        conn = self.conn
        versions = segment.versions
        if conn.dialect.name == "postgresql" and versions:
            versions = await self._unseen(versions, segment)
        if conn.dialect.name == "postgresql" and len(versions) >= pgcopy.MIN_ROWS:
            await pgcopy.copy_insert(conn, ObjectVersion.__tablename__, VERSION_COLUMNS, versions)
        elif versions:
            rows = [dict(zip(VERSION_COLUMNS, version, strict=True)) for version in versions]
            await conn.execute(_insert(conn, ObjectVersion).on_conflict_do_nothing(), rows)
        self.rows += len(versions)

    async def _unseen(self, versions: list[tuple[Any, ...]], segment: Segment) -> list[tuple]:
        """PostgreSQL: the versions not stored yet, each once. Its unique key holds the
        observation time (the partition key), so a version stored before under another
        observation time does not conflict; it is looked up by its whole identity (one probe
        of a partition's unique index, finding nothing for a new version) and left out here.
        Where to look: for a batch reconciling a LIST (a new watch re-announces every object,
        however long unchanged), every partition; otherwise a version stored already can only
        be a view the index re-emitted — a claim whose template it fills in when the claim's
        pod arrives (`ClusterIndex.replace_claim_view`, the model's one re-emission) — so only
        claims are looked up, in the last `RECENT` before the batch."""
        first: dict[tuple[str, str, str, bool], tuple[Any, ...]] = {}
        for version in versions:  # (cluster, kind, ns, name, uid, rv, observed, deleted, body)
            first.setdefault((version[0], version[4], version[5], version[7]), version)
        since = (segment.first_us or 0) - RECENT
        until = segment.last_us or 0  # what is stored was observed at the latest then
        anywhere = [key for key in first if key in segment.listed]
        recent = [key for key, version in first.items()
                  if key not in segment.listed and version[1] == RESOURCE_CLAIM]  # fmt: skip
        for keys, bound in ((anywhere, None), (recent, since)):
            for start in range(0, len(keys), CHUNK):
                for key in await self._stored(keys[start : start + CHUNK], bound, until):
                    first.pop(key, None)
        return list(first.values())

    async def _stored(
        self, keys: list[tuple[str, str, str, bool]], since: int | None, until: int
    ) -> list:
        # constants, not parameters: the planner leaves out the partitions outside them
        recent = f" AND v.observed_us <= {int(until)}"
        if since is not None:
            recent += f" AND v.observed_us >= {int(since)}"
        # one index probe per key (LATERAL … LIMIT 1 keeps the planner from turning it into
        # a scan of every recent version hashed against the keys)
        stored = await self.conn.execute(
            text(
                "SELECT k.c, k.u, k.r, k.d "
                "FROM unnest(CAST(:clusters AS text[]), CAST(:uids AS text[]), "
                "CAST(:versions AS text[]), CAST(:deleted AS boolean[])) AS k(c, u, r, d) "
                "CROSS JOIN LATERAL (SELECT 1 FROM object_versions AS v "
                "WHERE v.cluster = k.c AND v.uid = k.u AND v.resource_version = k.r "
                f"AND v.deleted = k.d{recent} LIMIT 1) AS found"
            ),
            {"clusters": [k[0] for k in keys], "uids": [k[1] for k in keys],
             "versions": [k[2] for k in keys], "deleted": [k[3] for k in keys]},
        )  # fmt: skip
        return [tuple(row) for row in stored]

    async def _open_intervals(self, transitions: list[Transition]) -> Opened:
        claim_uids = sorted({tr.claim_uid for tr in transitions if tr.claim_uid})
        devices = sorted({tr.device for tr in transitions if tr.type.startswith("device_")})
        opened: Opened = {table: {} for table in INTERVAL_TABLES}
        for table in INTERVAL_TABLES:
            keys = KEYS[table]
            column, values = (
                (table.device, devices)
                if issubclass(table, DeviceInterval)
                else (table.claim_uid, claim_uids)
            )
            for start in range(0, len(values), CHUNK):
                chunk = values[start : start + CHUNK]
                columns = [getattr(table, name) for name in keys]
                # PostgreSQL: one array parameter, so the statement text (and its prepared
                # plan) is the same for every batch; SQLite has no arrays: an IN list. The
                # array is a set to join (`IN (SELECT unnest(…))`), not `= ANY(…)`: with a
                # parameter PostgreSQL compares each row a scan finds with every element, and
                # during an initial sync (statistics of empty tables, every interval open) it
                # scanned every open interval for each batch — seconds a batch at 40,000
                # intervals
                wanted = (
                    column.in_(select(func.unnest(bindparam("wanted", chunk, type_=ARRAY(String)))))
                    if self.conn.dialect.name == "postgresql"
                    else column.in_(chunk)
                )
                # a device open since before a new index started: its data, to compare
                extra = (
                    (table.data, table.uuid, table.node)
                    if issubclass(table, DeviceInterval)
                    else ()
                )
                query = select(table.id, table.start_us, table.end_reason, *extra, *columns)
                skip = 3 + len(extra)
                for row in await self.conn.execute(query.where(table.end_us.is_(None), wanted)):
                    unconfirmed = row[2] == UNCONFIRMED
                    opened[table][tuple(row[skip:])] = OpenInterval(
                        start_us=row[1], row_id=row[0], unconfirmed=unconfirmed,
                        published=tuple(row[3:skip]) if extra and unconfirmed else None,
                    )  # fmt: skip
        return opened

    async def _write(self, plan: Plan) -> None:
        conn = self.conn
        if plan.waits_from is not None:
            await peaks.invalidate(conn, plan.waits_from, max(plan.marks.values()))
        bulk = conn.dialect.name == "postgresql"
        for table, rows in plan.confirms.items():
            if rows:
                stmt = update(table).where(table.id == bindparam("row_id")).values(end_reason=None)
                await conn.execute(stmt, rows)
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
                    .where(table.id == bindparam("row_id"), table.start_us == bindparam("start"))
                    .values(end_us=bindparam("end"), end_reason=bindparam("reason"))
                )
                await conn.execute(stmt, rows)
        if plan.identified:
            self.rows += await devices.fill_uuids(conn, plan.identified)
        if plan.device_classes:
            await devices.record_classes(
                conn, sorted(plan.device_classes), _insert(conn, DeviceClass)
            )
        if plan.data_updates:
            stmt = (
                update(DeviceInterval)
                .where(DeviceInterval.id == bindparam("row_id"))
                .values(data=bindparam("new_data"), uuid=bindparam("new_uuid"),
                        node=bindparam("new_node"))
            )  # fmt: skip
            await conn.execute(stmt, plan.data_updates)
        if plan.weight_updates:
            stmt = (
                update(AllocationInterval)
                .where(AllocationInterval.id == bindparam("row_id"))
                .values(equivalents=bindparam("new_equivalents"),
                        device_type=bindparam("new_type"), device_model=bindparam("new_model"))
            )  # fmt: skip
            await conn.execute(stmt, plan.weight_updates)
        for cluster, seen in plan.marks.items():
            mark = _insert(conn, ClusterMark).values(cluster=cluster, last_seen_us=seen)
            newest = (func.greatest if conn.dialect.name == "postgresql" else func.max)(
                ClusterMark.last_seen_us, mark.excluded.last_seen_us
            )
            await conn.execute(
                mark.on_conflict_do_update(
                    index_elements=["cluster"], set_={"last_seen_us": newest}
                )
            )
        self.rows += (
            sum(len(rows) for rows in plan.inserts.values())
            + sum(len(rows) for rows in plan.closes.values())
            + len(plan.data_updates)
            + len(plan.weight_updates)
            + sum(len(rows) for rows in plan.confirms.values())
        )

    # --- gaps --------------------------------------------------------------------------

    async def _gap(self, cluster: str, start: int, end: int) -> None:
        if end <= start:
            return
        stmt = _insert(self.conn, Gap).values(cluster=cluster, start_us=start, end_us=end)
        result = await self.conn.execute(stmt.on_conflict_do_nothing())
        self.rows += 1
        self.gaps += 1 if result.rowcount != 0 else 0  # a replayed entry adds no gap

    async def _watched(self, cluster: str, until: int) -> None:
        await self._write(Plan(marks={cluster: until}))

    async def _started(self, cluster: str, at: int) -> None:
        last_seen = await self.conn.scalar(
            select(ClusterMark.last_seen_us).where(ClusterMark.cluster == cluster)
        )
        if last_seen is None:
            return
        await self._gap(cluster, last_seen, at)
        for table in INTERVAL_TABLES:
            await self.conn.execute(
                update(table)
                .where(table.cluster == cluster, table.end_us.is_(None))
                .values(end_reason=UNCONFIRMED)
            )

    async def _settle_unconfirmed(self, cluster: str, groups: tuple[str, ...], at: int) -> None:
        """A new index listed `groups` complete at `at`: what it did not re-announce is gone."""
        for group in groups:
            for table in GROUP_TABLES.get(group, ()):
                if table is WaitInterval:
                    await peaks.invalidate(self.conn, at, at)
                result = await self.conn.execute(
                    update(table)
                    .where(table.cluster == cluster, table.end_us.is_(None))
                    .where(table.end_reason == UNCONFIRMED, table.start_us <= at)
                    .values(end_us=at, end_reason="unwatched")
                )
                self.rows += result.rowcount or 0
