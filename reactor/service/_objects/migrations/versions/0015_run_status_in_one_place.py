"""A run's status in one place: ``agent_runs`` refers to the store's run row.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-07
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Drop ``agent_runs.status``, ``finished_at`` and ``error``: copies of the run's row.

    The signal store's row of each run says how it ended, when and why (``reactor
    runs``, ``GET /api/runs/{id}``); ``agent_runs`` keeps which agent made the run, what
    started it and when.
    """
    with op.batch_alter_table("agent_runs") as batch:
        batch.drop_column("error")
        batch.drop_column("finished_at")
        batch.drop_column("status")


def downgrade() -> None:
    """Put the columns back; rows made since say ``unknown`` (the store's row says how)."""
    with op.batch_alter_table("agent_runs") as batch:
        batch.add_column(
            sa.Column("status", sa.String(16), nullable=False, server_default="unknown")
        )
        batch.add_column(sa.Column("finished_at", sa.DateTime(timezone=True)))
        batch.add_column(sa.Column("error", sa.Text))
