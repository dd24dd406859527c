"""Allocations carry the model of the device held, for chargeback.

`device_model` on `allocations`: the product name the device published when the hold began
(`productName`, `model` or `product`, as `service.model.physical.product_name` reads it); the
chargeback prices a hold by it (`service.history.prices`). Rows written before this revision
carry "": they are priced by their class, else at the default price. A constant default: a
catalogue change on PostgreSQL, no rewrite.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-04 13:20:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op


revision: str = '0008'
down_revision: str | None = '0007'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("allocations") as batch:
        batch.add_column(sa.Column("device_model", sa.String(length=253), server_default="",
                                   nullable=False))


def downgrade() -> None:
    with op.batch_alter_table("allocations") as batch:
        batch.drop_column("device_model")
