"""Utilisation in the history: five-minute buckets per device and the recorder's marks.

`utilization_buckets` holds, per device (cluster, driver, pool, device) and bucket start, the
mean busy percent, the busy samples Prometheus held, the energy (J) and the device's
GPU-equivalents (service.model.utilization_buckets); `utilization_marks` the end of the
buckets recorded per cluster (service.history.utilization_recorder). New tables only.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-04 13:20:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op


revision: str = '0006'
down_revision: str | None = '0005'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table('utilization_buckets',
    sa.Column('cluster', sa.String(length=253), nullable=False),
    sa.Column('driver', sa.String(length=253), nullable=False),
    sa.Column('pool', sa.String(length=253), nullable=False),
    sa.Column('device', sa.String(length=253), nullable=False),
    sa.Column('bucket_us', sa.BigInteger(), nullable=False),
    sa.Column('uuid', sa.String(length=128), nullable=True),
    sa.Column('gpu_instance', sa.String(length=16), nullable=True),
    sa.Column('busy', sa.Float(), nullable=False),
    sa.Column('samples', sa.Integer(), nullable=False),
    sa.Column('energy_j', sa.Float(), nullable=True),
    sa.Column('equivalents', sa.Float(), nullable=False),
    sa.PrimaryKeyConstraint('cluster', 'driver', 'pool', 'device', 'bucket_us',
                            name=op.f('pk_utilization_buckets'))
    )
    op.create_index('ix_utilization_buckets_bucket', 'utilization_buckets', ['bucket_us'],
                    unique=False)
    op.create_table('utilization_marks',
    sa.Column('cluster', sa.String(length=253), nullable=False),
    sa.Column('recorded_us', sa.BigInteger(), nullable=False),
    sa.PrimaryKeyConstraint('cluster', name=op.f('pk_utilization_marks'))
    )


def downgrade() -> None:
    op.drop_table('utilization_marks')
    op.drop_index('ix_utilization_buckets_bucket', table_name='utilization_buckets')
    op.drop_table('utilization_buckets')
