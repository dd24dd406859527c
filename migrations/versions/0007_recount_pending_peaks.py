"""Peak pending counts are recounted: the cached hours were counted before each instant's
events had all been applied (a wait ending at a bucket's start was still pending in it), so
the hourly cache (service/history/peaks.py) is emptied and refilled by the writer. Data only.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-04 14:05:00
"""

from collections.abc import Sequence

from alembic import op


revision: str = '0007'
down_revision: str | None = '0006'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute("DELETE FROM pending_peaks")
    op.execute("DELETE FROM pending_peak_hours")


def downgrade() -> None:
    pass  # an empty cache is refilled; nothing to restore
