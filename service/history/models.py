"""The history tables: append-only object versions and the intervals audits read.

Every table carries `cluster`. Instants are BIGINT microseconds since the epoch (`*_us`, see
`service.history.times`); an interval with `end_us` NULL is still open. Interval tables are
idempotent on (identity, start): replaying an outbox entry can only hit a unique key and do
nothing. Constraint names follow `NAMING` so Alembic can diff and drop them by name on both
SQLite and PostgreSQL; `migrations/` is the only thing that creates these tables.

* `object_versions` — every record version seen, body as msgspec JSON text (no JSON parsing on
  insert; PostgreSQL compresses it with lz4, set by the migration). Unique on
  (cluster, uid, resourceVersion, deleted). Pruned after N days; intervals are kept.
* `allocations` — a device (key + uuid) or a share of it held by one claim request.
* `consumers` — a pod in a claim's `status.reservedFor`.
* `waits` — a claim pending: created (or deallocated) → allocated, deleted, or unwatched.
* `idle_holds` — a claim allocated with no consumer pod Running.
* `device_inventory` — a device as published: appears, changes (a new row), disappears.
* `gaps` — a cluster not watched: audits say where data is missing.
* `cluster_marks` — the newest observation time written per cluster (to derive gaps on start).
* `outbox_positions` — the last outbox entry written per stream, committed with its batch.
* `pending_peaks`, `pending_peak_hours`, `cache_epochs` — a cache of hourly peak pending
  counts for `contention` (`service.history.peaks`), invalidated by the writer.
* `utilization_buckets` — a device's mean busy, samples and energy per five-minute bucket
  (`service.history.utilization_recorder`); `utilization_marks` — per cluster, the end of
  the buckets recorded (what the recorder asks Prometheus for next).
* `device_classes` — every class a device (uuid, else driver/pool/device) was allocated for:
  what `contention` by CLASS counts as available, without reading every allocation.

On PostgreSQL the tables that grow with time — `object_versions` (by `observed_us`) and the
claim intervals `allocations`, `consumers`, `waits`, `idle_holds` (by `start_us`) — are
partitioned by month (`PARTITIONED`; `service.history.partitions` creates and drops the
partitions). PostgreSQL wants the partition key in every unique index and primary key, so
there the primary key is (id, key column) and object versions are unique with their
observation time (the writer skips a version already stored, see `recording`); the id still
comes from one sequence per table. Indexes only one dialect has carry `info={"dialect": …}`
(`migrations/env.py` compares each database with its own). SQLite is not partitioned.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Float,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    false,
    text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

NAMING = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

# SQLite only auto-increments an INTEGER PRIMARY KEY; PostgreSQL gets a BIGINT identity.
RowId = BigInteger().with_variant(Integer(), "sqlite")

NAME = 253  # the longest Kubernetes object name (DNS subdomain)


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)


# PostgreSQL: table -> the column it is partitioned by (monthly ranges of microseconds)
PARTITIONED = {
    "object_versions": "observed_us",
    "allocations": "start_us",
    "consumers": "start_us",
    "waits": "start_us",
    "idle_holds": "start_us",
}
POSTGRES_ONLY = {"dialect": "postgresql"}
SQLITE_ONLY = {"dialect": "sqlite"}


def _partitioned(table: str) -> dict[str, str]:
    return {"postgresql_partition_by": f"RANGE ({PARTITIONED[table]})"}


def _ends(table: str) -> Index:
    """Where intervals end (NULL: still open), for the audits' lower partition bound
    (`service.history.pruning`): PostgreSQL only, SQLite reads no partitions."""
    return Index(f"ix_{table}_end", "end_us", info=POSTGRES_ONLY)


class ObjectVersion(Base):
    __tablename__ = "object_versions"
    __table_args__ = (
        Index("uq_object_versions_version", "cluster", "uid", "resource_version", "deleted",
              unique=True, info=SQLITE_ONLY),
        # PostgreSQL: unique with the partition key; the writer looks versions up by its prefix
        Index("uq_object_versions_observed_version", "cluster", "uid", "resource_version",
              "deleted", "observed_us", unique=True, info=POSTGRES_ONLY),
        Index("ix_object_versions_object", "cluster", "kind", "namespace", "name", "observed_us"),
        Index("ix_object_versions_observed", "observed_us"),
        _partitioned("object_versions"),
    )  # fmt: skip

    id: Mapped[int] = mapped_column(RowId, primary_key=True, autoincrement=True)
    cluster: Mapped[str] = mapped_column(String(NAME))
    kind: Mapped[str] = mapped_column(String(64))
    namespace: Mapped[str] = mapped_column(String(NAME))
    name: Mapped[str] = mapped_column(String(NAME))
    uid: Mapped[str] = mapped_column(String(64))
    resource_version: Mapped[str] = mapped_column(String(64))
    observed_us: Mapped[int] = mapped_column(BigInteger)
    deleted: Mapped[bool] = mapped_column(Boolean)
    body: Mapped[str] = mapped_column(Text)  # msgspec JSON of the record


class AllocationInterval(Base):
    __tablename__ = "allocations"
    __table_args__ = (
        Index("uq_allocations_interval", "cluster", "claim_uid", "request", "driver", "pool",
              "device", "share_id", "start_us", unique=True),
        Index("ix_allocations_device", "cluster", "driver", "pool", "device", "start_us"),
        Index("ix_allocations_uuid", "uuid", "start_us"),
        Index("ix_allocations_claim", "cluster", "namespace", "claim"),
        Index("ix_allocations_claim_uid", "claim_uid"),
        Index("ix_allocations_start", "start_us"),
        _ends("allocations"),
        _partitioned("allocations"),
    )  # fmt: skip

    id: Mapped[int] = mapped_column(RowId, primary_key=True, autoincrement=True)
    cluster: Mapped[str] = mapped_column(String(NAME))
    driver: Mapped[str] = mapped_column(String(NAME))
    pool: Mapped[str] = mapped_column(String(NAME))
    device: Mapped[str] = mapped_column(String(NAME))
    uuid: Mapped[str | None] = mapped_column(String(128))
    node: Mapped[str | None] = mapped_column(String(NAME))
    namespace: Mapped[str] = mapped_column(String(NAME))
    claim: Mapped[str] = mapped_column(String(NAME))
    claim_uid: Mapped[str] = mapped_column(String(64))
    request: Mapped[str] = mapped_column(String(NAME))
    share_id: Mapped[str] = mapped_column(String(64))  # "" when the device is not shared
    consumed_capacity: Mapped[str] = mapped_column(Text)  # JSON map, "{}" when none
    class_name: Mapped[str] = mapped_column(String(NAME))  # "" when the model did not say
    start_us: Mapped[int] = mapped_column(BigInteger)
    end_us: Mapped[int | None] = mapped_column(BigInteger)
    end_reason: Mapped[str | None] = mapped_column(String(32))  # released | deleted | unwatched
    # held before the mirror observed the cluster: start_us is when it was first seen
    started_before_observation: Mapped[bool] = mapped_column(Boolean, server_default=false())
    # GPU-equivalents the hold takes (a partition its share, a share its consumed capacity),
    # of `device_type` (gpu, nic, or the driver): service.model.physical. 0 before rev. 0005
    equivalents: Mapped[float] = mapped_column(Float, server_default=text("0"))
    device_type: Mapped[str] = mapped_column(String(NAME), server_default="")
    # the model the device published when the hold began (`productName`...; prices are set
    # per model: service.history.prices); "" when none, and before revision 0008
    device_model: Mapped[str] = mapped_column(String(NAME), server_default="")


class ConsumerInterval(Base):
    __tablename__ = "consumers"
    __table_args__ = (
        Index("uq_consumers_interval", "cluster", "claim_uid", "pod_uid", "start_us", unique=True),
        Index("ix_consumers_claim_uid", "claim_uid"),
        Index("ix_consumers_claim", "cluster", "namespace", "claim"),
        _ends("consumers"),
        _partitioned("consumers"),
    )

    id: Mapped[int] = mapped_column(RowId, primary_key=True, autoincrement=True)
    cluster: Mapped[str] = mapped_column(String(NAME))
    namespace: Mapped[str] = mapped_column(String(NAME))
    claim: Mapped[str] = mapped_column(String(NAME))
    claim_uid: Mapped[str] = mapped_column(String(64))
    pod: Mapped[str] = mapped_column(String(NAME))
    pod_uid: Mapped[str] = mapped_column(String(64))
    start_us: Mapped[int] = mapped_column(BigInteger)
    end_us: Mapped[int | None] = mapped_column(BigInteger)
    end_reason: Mapped[str | None] = mapped_column(String(32))


class WaitInterval(Base):
    __tablename__ = "waits"
    __table_args__ = (
        Index("uq_waits_interval", "cluster", "claim_uid", "start_us", unique=True),
        Index("ix_waits_claim_uid", "claim_uid"),
        Index("ix_waits_claim", "cluster", "namespace", "claim"),
        Index("ix_waits_start", "start_us"),
        _ends("waits"),
        _partitioned("waits"),
    )

    id: Mapped[int] = mapped_column(RowId, primary_key=True, autoincrement=True)
    cluster: Mapped[str] = mapped_column(String(NAME))
    namespace: Mapped[str] = mapped_column(String(NAME))
    claim: Mapped[str] = mapped_column(String(NAME))
    claim_uid: Mapped[str] = mapped_column(String(64))
    class_name: Mapped[str] = mapped_column(String(NAME))  # first class requested, "" if none
    class_names: Mapped[str] = mapped_column(Text)  # every class requested, comma-separated
    start_us: Mapped[int] = mapped_column(BigInteger)
    end_us: Mapped[int | None] = mapped_column(BigInteger)
    # allocated (served) | deleted, unreferenced (abandoned) | unwatched
    end_reason: Mapped[str | None] = mapped_column(String(32))
    # waiting before the mirror observed the cluster: start_us is when it was first seen
    started_before_observation: Mapped[bool] = mapped_column(Boolean, server_default=false())


class IdleInterval(Base):
    __tablename__ = "idle_holds"
    __table_args__ = (
        Index("uq_idle_holds_interval", "cluster", "claim_uid", "start_us", unique=True),
        Index("ix_idle_holds_claim_uid", "claim_uid"),
        _ends("idle_holds"),
        _partitioned("idle_holds"),
    )

    id: Mapped[int] = mapped_column(RowId, primary_key=True, autoincrement=True)
    cluster: Mapped[str] = mapped_column(String(NAME))
    namespace: Mapped[str] = mapped_column(String(NAME))
    claim: Mapped[str] = mapped_column(String(NAME))
    claim_uid: Mapped[str] = mapped_column(String(64))
    start_us: Mapped[int] = mapped_column(BigInteger)
    end_us: Mapped[int | None] = mapped_column(BigInteger)
    end_reason: Mapped[str | None] = mapped_column(String(32))


class DeviceInterval(Base):
    __tablename__ = "device_inventory"
    __table_args__ = (
        Index("uq_device_inventory_interval", "cluster", "driver", "pool", "device", "start_us",
              unique=True),
        Index("ix_device_inventory_uuid", "uuid"),
        Index("ix_device_inventory_node", "cluster", "node", "device"),
        Index("ix_device_inventory_name", "device"),
    )  # fmt: skip

    id: Mapped[int] = mapped_column(RowId, primary_key=True, autoincrement=True)
    cluster: Mapped[str] = mapped_column(String(NAME))
    driver: Mapped[str] = mapped_column(String(NAME))
    pool: Mapped[str] = mapped_column(String(NAME))
    device: Mapped[str] = mapped_column(String(NAME))
    uuid: Mapped[str | None] = mapped_column(String(128))
    node: Mapped[str | None] = mapped_column(String(NAME))
    data: Mapped[str] = mapped_column(Text)  # attributes/capacity as JSON
    start_us: Mapped[int] = mapped_column(BigInteger)
    end_us: Mapped[int | None] = mapped_column(BigInteger)
    end_reason: Mapped[str | None] = mapped_column(String(32))  # changed | disappeared | unwatched
    # the physical devices it counts in inventory: 1 for the device standing for its GPU (the
    # whole device), 0 for its partitions; of `device_type`. 0 before revision 0005
    equivalents: Mapped[float] = mapped_column(Float, server_default=text("0"))
    device_type: Mapped[str] = mapped_column(String(NAME), server_default="")


class Gap(Base):
    __tablename__ = "gaps"
    __table_args__ = (Index("uq_gaps_interval", "cluster", "start_us", unique=True),)

    id: Mapped[int] = mapped_column(RowId, primary_key=True, autoincrement=True)
    cluster: Mapped[str] = mapped_column(String(NAME))
    start_us: Mapped[int] = mapped_column(BigInteger)
    end_us: Mapped[int] = mapped_column(BigInteger)


class ClusterMark(Base):
    __tablename__ = "cluster_marks"

    cluster: Mapped[str] = mapped_column(String(NAME), primary_key=True)
    last_seen_us: Mapped[int] = mapped_column(BigInteger)


class OutboxPosition(Base):
    __tablename__ = "outbox_positions"

    stream: Mapped[str] = mapped_column(String(NAME), primary_key=True)
    position: Mapped[str] = mapped_column(String(64))  # "<ms>-<seq>", as Redis stream ids
    updated_us: Mapped[int] = mapped_column(BigInteger)


IntervalTable = (
    type[AllocationInterval]
    | type[ConsumerInterval]
    | type[WaitInterval]
    | type[IdleInterval]
    | type[DeviceInterval]
)
INTERVAL_TABLES: tuple[IntervalTable, ...] = (
    AllocationInterval, ConsumerInterval, WaitInterval, IdleInterval, DeviceInterval,
)  # fmt: skip


class PendingPeak(Base):
    """Cache: the most claims waiting at once in one complete hour, per group (see
    `service.history.peaks`). Rows are deleted when waits touching their hour are written."""

    __tablename__ = "pending_peaks"

    group_by: Mapped[str] = mapped_column(String(16), primary_key=True)
    hour_us: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    cluster: Mapped[str] = mapped_column(String(NAME), primary_key=True)
    grp: Mapped[str] = mapped_column(String(NAME), primary_key=True)
    peak: Mapped[int] = mapped_column(Integer)


class PendingPeakHour(Base):
    """Cache: the hours `pending_peaks` holds (an hour with no waits has no peak rows)."""

    __tablename__ = "pending_peak_hours"

    group_by: Mapped[str] = mapped_column(String(16), primary_key=True)
    hour_us: Mapped[int] = mapped_column(BigInteger, primary_key=True)


class CacheEpoch(Base):
    """A counter the writer bumps (first thing in its transaction) whenever it invalidates a
    cache; a reader stores what it computed only if the counter did not move meanwhile."""

    __tablename__ = "cache_epochs"

    name: Mapped[str] = mapped_column(String(32), primary_key=True)
    epoch: Mapped[int] = mapped_column(BigInteger)


class DeviceClass(Base):
    """Every class a device was allocated for (`contention` by CLASS: available hours).
    `device` is the uuid where the driver publishes one, else "driver/pool/device"."""

    __tablename__ = "device_classes"

    cluster: Mapped[str] = mapped_column(String(NAME), primary_key=True)
    device: Mapped[str] = mapped_column(String(3 * NAME + 2), primary_key=True)
    class_name: Mapped[str] = mapped_column(String(NAME), primary_key=True)


class UtilizationBucket(Base):
    """One device over one five-minute bucket (`service.model.utilization_buckets`): absent
    where its utilisation is unknown."""

    __tablename__ = "utilization_buckets"
    __table_args__ = (Index("ix_utilization_buckets_bucket", "bucket_us"),)

    cluster: Mapped[str] = mapped_column(String(NAME), primary_key=True)
    driver: Mapped[str] = mapped_column(String(NAME), primary_key=True)
    pool: Mapped[str] = mapped_column(String(NAME), primary_key=True)
    device: Mapped[str] = mapped_column(String(NAME), primary_key=True)
    bucket_us: Mapped[int] = mapped_column(BigInteger, primary_key=True)  # the bucket's start
    uuid: Mapped[str | None] = mapped_column(String(128))
    gpu_instance: Mapped[str | None] = mapped_column(String(16))  # a MIG device's GPU_I_ID
    busy: Mapped[float] = mapped_column(Float)  # percent, the bucket's mean
    samples: Mapped[int] = mapped_column(Integer)
    energy_j: Mapped[float | None] = mapped_column(Float)  # None: no energy counter read
    equivalents: Mapped[float] = mapped_column(Float)  # the device's GPU-equivalents


class UtilizationMark(Base):
    """Per cluster: the end of the buckets recorded (microseconds)."""

    __tablename__ = "utilization_marks"

    cluster: Mapped[str] = mapped_column(String(NAME), primary_key=True)
    recorded_us: Mapped[int] = mapped_column(BigInteger)
