"""Allocations and the device inventory carry GPU-equivalents and the physical device's type.

`equivalents` and `device_type` on `allocations` (what the hold takes: a whole device 1, a MIG
partition its share of the GPU's memory slices, a share its consumed capacity over the
device's) and on `device_inventory` (1 for the device that counts its physical device, 0 for
its partitions), as the model derived them (service.model.physical). The audits sum them into
GPU-equivalent-hours per type. Rows written before this revision carry 0 and "": they count no
GPU-equivalents. Constant defaults: a catalogue change on PostgreSQL, no rewrite.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-04 10:45:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op


revision: str = '0005'
down_revision: str | None = '0004'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLES = ("allocations", "device_inventory")


def upgrade() -> None:
    for table in TABLES:
        with op.batch_alter_table(table) as batch:
            batch.add_column(sa.Column("equivalents", sa.Float(), server_default=sa.text("0"),
                                       nullable=False))
            batch.add_column(sa.Column("device_type", sa.String(length=253), server_default="",
                                       nullable=False))


def downgrade() -> None:
    for table in TABLES:
        with op.batch_alter_table(table) as batch:
            batch.drop_column("device_type")
            batch.drop_column("equivalents")
