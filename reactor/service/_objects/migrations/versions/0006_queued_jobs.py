"""The jobs queued on Redis, known to the database too: a job Redis loses is queued again.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-26
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Create ``queued_jobs``."""
    op.create_table(
        "queued_jobs",
        sa.Column("key", sa.String(80), nullable=False),
        sa.Column("job", sa.JSON().with_variant(postgresql.JSONB(), "postgresql"), nullable=False),
        sa.Column("queued_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("key", name="pk_queued_jobs"),
    )


def downgrade() -> None:
    """Drop it."""
    op.drop_table("queued_jobs")
