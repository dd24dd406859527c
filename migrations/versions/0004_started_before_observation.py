"""Waits and allocations that began before the mirror observed their cluster are flagged.

`started_before_observation` on `waits` and `allocations`: true when the interval was already
under way when the mirror first listed the cluster's claims and pods, so its `start_us` is when
the mirror first saw it, not when it began; the audits leave such intervals out of duration
percentiles. Rows written before this revision are false (their beginning was taken as
known). On PostgreSQL the column is added to the partitioned tables, and so to every
partition; a constant default makes it a catalogue change, not a rewrite.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-04 10:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op


revision: str = '0004'
down_revision: str | None = '0003'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLES = ("allocations", "waits")


def upgrade() -> None:
    for table in TABLES:
        with op.batch_alter_table(table) as batch:
            batch.add_column(sa.Column("started_before_observation", sa.Boolean(),
                                       server_default=sa.false(), nullable=False))


def downgrade() -> None:
    for table in TABLES:
        with op.batch_alter_table(table) as batch:
            batch.drop_column("started_before_observation")
