"""PostgreSQL: the growing history tables partitioned by month; every database: device_classes.

PostgreSQL only: `object_versions` (by observed_us) and `allocations`, `consumers`, `waits`,
`idle_holds` (by start_us) become RANGE-partitioned tables with one partition per calendar
month (UTC), named `<table>_yYYYYmMM`. Each table is rewritten: renamed aside, a partitioned
table created like it (same columns, defaults — the same id sequence, so ids continue — and
compression), a partition created for every month its rows hold and for the current month and
the next two, every row copied (ids kept), the indexes built again, the old table dropped. The
primary key becomes (id, key column) and object versions are unique with observed_us:
PostgreSQL wants the partition key in both. Interval tables gain an index on end_us (the
audits' lower partition bound). It all runs in the migration's one transaction, holding the
tables: stop the writers, and count a few minutes per ten million rows.

Every database: `device_classes` (cluster, device, class), filled from the allocations.
SQLite is not partitioned otherwise.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01 21:00:00
"""

import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import sqlalchemy as sa
from alembic import op


revision: str = '0003'
down_revision: str | None = '0002'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

AHEAD = 2  # months created after the current one

# table -> (partition key, indexes after the change: name -> (columns, unique))
TABLES = {
    "object_versions": ("observed_us", {
        "uq_object_versions_observed_version": (
            ["cluster", "uid", "resource_version", "deleted", "observed_us"], True),
        "ix_object_versions_object": (["cluster", "kind", "namespace", "name", "observed_us"], False),
        "ix_object_versions_observed": (["observed_us"], False),
    }),
    "allocations": ("start_us", {
        "uq_allocations_interval": (
            ["cluster", "claim_uid", "request", "driver", "pool", "device", "share_id", "start_us"], True),
        "ix_allocations_device": (["cluster", "driver", "pool", "device", "start_us"], False),
        "ix_allocations_uuid": (["uuid", "start_us"], False),
        "ix_allocations_claim": (["cluster", "namespace", "claim"], False),
        "ix_allocations_claim_uid": (["claim_uid"], False),
        "ix_allocations_start": (["start_us"], False),
        "ix_allocations_end": (["end_us"], False),
    }),
    "consumers": ("start_us", {
        "uq_consumers_interval": (["cluster", "claim_uid", "pod_uid", "start_us"], True),
        "ix_consumers_claim_uid": (["claim_uid"], False),
        "ix_consumers_claim": (["cluster", "namespace", "claim"], False),
        "ix_consumers_end": (["end_us"], False),
    }),
    "waits": ("start_us", {
        "uq_waits_interval": (["cluster", "claim_uid", "start_us"], True),
        "ix_waits_claim_uid": (["claim_uid"], False),
        "ix_waits_claim": (["cluster", "namespace", "claim"], False),
        "ix_waits_start": (["start_us"], False),
        "ix_waits_end": (["end_us"], False),
    }),
    "idle_holds": ("start_us", {
        "uq_idle_holds_interval": (["cluster", "claim_uid", "start_us"], True),
        "ix_idle_holds_claim_uid": (["claim_uid"], False),
        "ix_idle_holds_end": (["end_us"], False),
    }),
}  # fmt: skip
# what 0002 left: the unique index of object versions without the partition key
BEFORE = {"object_versions": {"uq_object_versions_version": (
    ["cluster", "uid", "resource_version", "deleted"], True)}}  # fmt: skip
PG_ONLY = {"uq_object_versions_observed_version", *(f"ix_{t}_end" for t in TABLES if t != "object_versions")}

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _us(moment: datetime) -> int:
    return (moment - EPOCH) // timedelta(microseconds=1)


def _month_bounds(year: int, month: int) -> tuple[int, int]:
    nxt = (year + month // 12, month % 12 + 1)
    return _us(datetime(year, month, 1, tzinfo=UTC)), _us(datetime(*nxt, 1, tzinfo=UTC))


def _like() -> str:
    """What CREATE TABLE … (LIKE old …) copies: defaults (the id sequence), storage, and the
    columns' compression (lz4, set by 0001) where the server has it (PostgreSQL 14)."""
    version = int(op.get_bind().execute(sa.text("SHOW server_version_num")).scalar_one())
    return "INCLUDING DEFAULTS INCLUDING STORAGE" + (" INCLUDING COMPRESSION" if version >= 140000 else "")


def _upgrade_postgres() -> None:
    bind = op.get_bind()
    like = _like()
    now = datetime.fromtimestamp(time.time(), UTC)
    for table, (key, indexes) in TABLES.items():
        old = f"{table}_unpartitioned"
        op.execute(f"ALTER TABLE {table} RENAME TO {old}")
        op.execute(f"ALTER TABLE {old} DROP CONSTRAINT pk_{table}")
        for name in {**indexes, **BEFORE.get(table, {})}:
            op.execute(f"DROP INDEX IF EXISTS {name}")
        op.execute(f"CREATE TABLE {table} (LIKE {old} {like}) PARTITION BY RANGE ({key})")
        months = {
            (int(y), int(m)) for y, m in bind.execute(sa.text(
                f"SELECT DISTINCT extract(year FROM t), extract(month FROM t) FROM ("
                f"SELECT to_timestamp({key} / 1000000.0) AT TIME ZONE 'UTC' AS t FROM {old}) AS s"
            ))
        }  # fmt: skip
        index = now.year * 12 + now.month - 1
        months |= {((index + i) // 12, (index + i) % 12 + 1) for i in range(AHEAD + 1)}
        for year, month in sorted(months):
            low, high = _month_bounds(year, month)
            op.execute(f"CREATE TABLE {table}_y{year:04d}m{month:02d} PARTITION OF {table} "
                       f"FOR VALUES FROM ({low}) TO ({high})")  # fmt: skip
        op.execute(f"INSERT INTO {table} SELECT * FROM {old}")
        op.execute(f"ALTER SEQUENCE {table}_id_seq OWNED BY {table}.id")
        op.execute(f"DROP TABLE {old}")
        op.execute(f"ALTER TABLE {table} ADD CONSTRAINT pk_{table} PRIMARY KEY (id, {key})")
        for name, (columns, unique) in indexes.items():
            op.create_index(name, table, columns, unique=unique)
        op.execute(f"ANALYZE {table}")


def _downgrade_postgres() -> None:
    like = _like()
    for table, (key, indexes) in TABLES.items():
        old = f"{table}_partitioned"
        op.execute(f"ALTER TABLE {table} RENAME TO {old}")
        op.execute(f"ALTER TABLE {old} DROP CONSTRAINT pk_{table}")
        for name in indexes:
            op.execute(f"DROP INDEX IF EXISTS {name}")
        op.execute(f"CREATE TABLE {table} (LIKE {old} {like})")
        if table == "object_versions":  # unique again without observed_us: the first of each
            op.execute(f"INSERT INTO {table} SELECT DISTINCT ON (cluster, uid, resource_version, "
                       f"deleted) * FROM {old} ORDER BY cluster, uid, resource_version, deleted, id")  # fmt: skip
        else:
            op.execute(f"INSERT INTO {table} SELECT * FROM {old}")
        op.execute(f"ALTER SEQUENCE {table}_id_seq OWNED BY {table}.id")
        op.execute(f"DROP TABLE {old}")  # and its partitions
        op.execute(f"ALTER TABLE {table} ADD CONSTRAINT pk_{table} PRIMARY KEY (id)")
        for name, (columns, unique) in {**indexes, **BEFORE.get(table, {})}.items():
            if name not in PG_ONLY:
                op.create_index(name, table, columns, unique=unique)


def upgrade() -> None:
    op.create_table('device_classes',
    sa.Column('cluster', sa.String(length=253), nullable=False),
    sa.Column('device', sa.String(length=761), nullable=False),
    sa.Column('class_name', sa.String(length=253), nullable=False),
    sa.PrimaryKeyConstraint('cluster', 'device', 'class_name', name=op.f('pk_device_classes'))
    )
    op.execute(
        "INSERT INTO device_classes (cluster, device, class_name) "
        "SELECT DISTINCT cluster, COALESCE(uuid, driver || '/' || pool || '/' || device), "
        "class_name FROM allocations WHERE class_name <> ''"
    )
    if op.get_bind().dialect.name == "postgresql":
        _upgrade_postgres()


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        _downgrade_postgres()
    op.drop_table('device_classes')
