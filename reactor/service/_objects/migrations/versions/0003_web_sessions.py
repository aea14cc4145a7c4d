"""The web UI's sessions, in the database: shared by serving processes, kept over restarts.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-26
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Create ``web_sessions``."""
    op.create_table(
        "web_sessions",
        sa.Column("id_hash", sa.String(64), nullable=False),
        sa.Column("user_id", sa.String(200), nullable=False),
        sa.Column("csrf", sa.String(64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("used_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id_hash", name="pk_web_sessions"),
    )
    op.create_index("ix_web_sessions_used_at", "web_sessions", ["used_at"])


def downgrade() -> None:
    """Drop it."""
    op.drop_index("ix_web_sessions_used_at", table_name="web_sessions")
    op.drop_table("web_sessions")
