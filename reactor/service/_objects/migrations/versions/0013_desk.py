"""The desk: suggestions that supersede, staleness on what they depend on, pages, lag.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-14
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_CHECK = "ck_suggestions_ck_suggestions_status"
"""The name revision 0001 gave the status check (the naming convention applied twice)."""
_OLD = "status IN ('pending', 'completed', 'rejected', 'expired')"
_NEW = "status IN ('pending', 'completed', 'rejected', 'expired', 'superseded')"

_SUGGESTION_INDEXES = {
    "ix_suggestions_created_at_id": ["created_at", "id"],
    "ix_suggestions_status_created_at_id": ["status", "created_at", "id"],
    "ix_suggestions_agent_status_created_at_id": ["agent", "status", "created_at", "id"],
    "ix_suggestions_object_id_agent_status": ["object_id", "agent", "status"],
}
_LOG_INDEXES = {
    "ix_processing_log_agent_id": ["agent", "id"],
    "ix_processing_log_object_id_id": ["object_id", "id"],
}


def upgrade() -> None:
    """Add what the desk keeps, and the indexes its pages and its lag read.

    ``suggestions.superseded_by`` (the newer suggestion that took a pending one's
    place, status ``superseded``) and ``suggestions.basis`` (the values of the fields a
    suggestion depends on, as its agent saw them; NULL for those made before: their
    object's version decides whether they are stale, as it did). Suggestions are read
    newest first in keyset pages, all of them, by status, or by agent and status; an
    agent's pending suggestion for an object is found by ``(object_id, agent,
    status)``. The processing log is read newest first by agent or object, and each
    agent's entries are counted by status from ``(agent, status, id)`` (revision 0012
    made it, for admission).
    """
    json = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
    with op.batch_alter_table("suggestions") as batch:
        batch.add_column(sa.Column("superseded_by", sa.String(64)))
        batch.add_column(sa.Column("basis", json))
        batch.drop_constraint(op.f(_CHECK), type_="check")
        batch.create_check_constraint(op.f(_CHECK), _NEW)
    op.drop_index("ix_suggestions_status_created_at", "suggestions")
    for name, columns in _SUGGESTION_INDEXES.items():
        op.create_index(name, "suggestions", columns)
    for name, columns in _LOG_INDEXES.items():
        op.create_index(name, "processing_log", columns)


def downgrade() -> None:
    """Drop them (superseded suggestions become rejected: the old status had no word for it)."""
    for name in _LOG_INDEXES:
        op.drop_index(name, "processing_log")
    for name in _SUGGESTION_INDEXES:
        op.drop_index(name, "suggestions")
    op.create_index("ix_suggestions_status_created_at", "suggestions", ["status", "created_at"])
    op.execute("UPDATE suggestions SET status = 'rejected' WHERE status = 'superseded'")
    with op.batch_alter_table("suggestions") as batch:
        batch.drop_constraint(op.f(_CHECK), type_="check")
        batch.create_check_constraint(op.f(_CHECK), _OLD)
        batch.drop_column("basis")
        batch.drop_column("superseded_by")
