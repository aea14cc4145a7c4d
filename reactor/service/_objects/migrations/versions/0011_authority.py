"""Authority: who decides on suggestions, their approvals, and the roles of web sessions.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-07
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_CHECK = "ck_suggestions_ck_suggestions_status"
"""The name revision 0001 gave the status check (the naming convention applied twice)."""
_OLD = "status IN ('pending', 'completed', 'rejected')"
_NEW = "status IN ('pending', 'completed', 'rejected', 'expired')"


def upgrade() -> None:
    """Add what authority keeps.

    ``agents.approval`` (NULL: ``Approval()``), ``suggestions.proposer_type`` and
    ``proposer_id`` (NULL for suggestions made before: no proposer is refused), the
    ``expired`` status, ``suggestion_approvals``, and ``web_sessions.roles`` and
    ``authenticator`` (a session opened before has none: it is signed out).
    """
    with op.batch_alter_table("agents") as batch:
        batch.add_column(
            sa.Column("approval", sa.JSON().with_variant(postgresql.JSONB(), "postgresql"))
        )
    with op.batch_alter_table("suggestions") as batch:
        batch.add_column(sa.Column("proposer_type", sa.String(16)))
        batch.add_column(sa.Column("proposer_id", sa.String(200)))
        batch.drop_constraint(op.f(_CHECK), type_="check")
        batch.create_check_constraint(op.f(_CHECK), _NEW)
    op.create_table(
        "suggestion_approvals",
        sa.Column("suggestion_id", sa.String(64), nullable=False),
        sa.Column("principal_id", sa.String(200), nullable=False),
        sa.Column("changes_sha256", sa.String(64), nullable=False),
        sa.Column("roles", sa.String(200), nullable=False),
        sa.Column("authenticator", sa.String(64), nullable=False),
        sa.Column("decided_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint(
            "suggestion_id", "principal_id", "changes_sha256", name="pk_suggestion_approvals"
        ),
    )
    with op.batch_alter_table("web_sessions") as batch:
        batch.add_column(sa.Column("roles", sa.String(200)))
        batch.add_column(sa.Column("authenticator", sa.String(64)))


def downgrade() -> None:
    """Drop them (expired suggestions become rejected: the old status had no word for it)."""
    with op.batch_alter_table("web_sessions") as batch:
        batch.drop_column("authenticator")
        batch.drop_column("roles")
    op.drop_table("suggestion_approvals")
    op.execute("UPDATE suggestions SET status = 'rejected' WHERE status = 'expired'")
    with op.batch_alter_table("suggestions") as batch:
        batch.drop_constraint(op.f(_CHECK), type_="check")
        batch.create_check_constraint(op.f(_CHECK), _OLD)
        batch.drop_column("proposer_id")
        batch.drop_column("proposer_type")
    with op.batch_alter_table("agents") as batch:
        batch.drop_column("approval")
