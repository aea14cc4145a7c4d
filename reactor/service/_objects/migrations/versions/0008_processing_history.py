"""The processing log's history: who approved or rejected which suggestion, and how.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-18
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Create ``processing_history``.

    Decisions made before this revision are not in it; the ``suggestions`` rows still
    say who resolved each one and when.
    """
    op.create_table(
        "processing_history",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            nullable=False,
            autoincrement=True,
        ),
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("suggestion_id", sa.String(64)),
        sa.Column("object_id", sa.String(64)),
        sa.Column(
            "payload", sa.JSON().with_variant(postgresql.JSONB(), "postgresql"), nullable=False
        ),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_processing_history"),
    )
    op.create_index("ix_processing_history_suggestion_id", "processing_history", ["suggestion_id"])
    op.create_index("ix_processing_history_object_id", "processing_history", ["object_id"])


def downgrade() -> None:
    """Drop it."""
    op.drop_index("ix_processing_history_object_id", "processing_history")
    op.drop_index("ix_processing_history_suggestion_id", "processing_history")
    op.drop_table("processing_history")
