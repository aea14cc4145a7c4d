"""Scale-out: leases of runs to workers, and cron ticks claimed once.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-24
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Create ``run_leases`` and ``cron_ticks``."""
    op.create_table(
        "run_leases",
        sa.Column("run_id", sa.String(64), nullable=False),
        sa.Column("worker", sa.String(200), nullable=False),
        sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("run_id", name="pk_run_leases"),
    )
    op.create_table(
        "cron_ticks",
        sa.Column("agent", sa.String(200), nullable=False),
        sa.Column("tick_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("claimed_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("agent", "tick_at", name="pk_cron_ticks"),
    )


def downgrade() -> None:
    """Drop them."""
    op.drop_table("cron_ticks")
    op.drop_table("run_leases")
