"""Admission: superseded, merged and held entries, their cost, and throttles' buckets.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-07
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_CHECK = "ck_processing_log_ck_processing_log_status"
"""The name revision 0001 gave the status check (the naming convention applied twice)."""
_OLD = "status IN ('pending', 'processing', 'completed', 'failed', 'skipped', 'abandoned')"
_ACTIVE_OLD = "status IN ('pending', 'processing', 'completed')"
_ACTIVE_NEW = "status IN ('pending', 'processing', 'completed', 'held')"
_ACTIVE_COLUMNS = ["agent", "object_id", "object_version", "event_type"]
_NEW = (
    "status IN ('pending', 'processing', 'completed', 'failed', 'skipped', 'abandoned', "
    "'superseded', 'merged', 'held')"
)


def upgrade() -> None:
    """Add what admission keeps.

    ``processing_log.superseded_by`` and ``cost_usd``, the statuses ``superseded``,
    ``merged`` and ``held``, an index of each agent's entries by status,
    ``agents.spend_cap_usd`` (an admin's cap), and ``admission_buckets``; a held entry
    holds its place in the unique index of active entries, as a pending one does; an
    object's entries are indexed by status too (those in flight, among a long history).
    """
    with op.batch_alter_table("processing_log") as batch:
        batch.add_column(sa.Column("superseded_by", sa.BigInteger))
        batch.add_column(sa.Column("cost_usd", sa.Float))
        batch.drop_constraint(op.f(_CHECK), type_="check")
        batch.create_check_constraint(op.f(_CHECK), _NEW)
        batch.create_index(
            "ix_processing_log_agent_status_id", ["agent", "status", "id"], unique=False
        )
        batch.create_index("ix_processing_log_superseded_by", ["superseded_by"], unique=False)
        batch.drop_index("ix_processing_log_object_id")
        batch.create_index(
            "ix_processing_log_object_id_status", ["object_id", "status"], unique=False
        )
    _active(_ACTIVE_NEW)
    with op.batch_alter_table("agents") as batch:
        batch.add_column(sa.Column("spend_cap_usd", sa.Float))
    op.create_table(
        "admission_buckets",
        sa.Column("agent", sa.String(200), nullable=False),
        sa.Column("key", sa.String(200), nullable=False),
        sa.Column("due", sa.Float, nullable=False),
        sa.PrimaryKeyConstraint("agent", "key", name="pk_admission_buckets"),
    )


def downgrade() -> None:
    """Drop them (a held entry is pending again; superseded and merged ones are skipped)."""
    op.drop_table("admission_buckets")
    with op.batch_alter_table("agents") as batch:
        batch.drop_column("spend_cap_usd")
    op.execute("UPDATE processing_log SET status = 'pending' WHERE status = 'held'")
    op.execute(
        "UPDATE processing_log SET status = 'skipped' WHERE status IN ('superseded', 'merged')"
    )
    _active(_ACTIVE_OLD)
    with op.batch_alter_table("processing_log") as batch:
        batch.drop_index("ix_processing_log_object_id_status")
        batch.create_index("ix_processing_log_object_id", ["object_id"], unique=False)
        batch.drop_index("ix_processing_log_superseded_by")
        batch.drop_index("ix_processing_log_agent_status_id")
        batch.drop_constraint(op.f(_CHECK), type_="check")
        batch.create_check_constraint(op.f(_CHECK), _OLD)
        batch.drop_column("cost_usd")
        batch.drop_column("superseded_by")


def _active(predicate: str) -> None:
    """Make the unique index of active entries cover the statuses of ``predicate``."""
    op.drop_index("uq_processing_log_active", table_name="processing_log")
    op.create_index(
        "uq_processing_log_active",
        "processing_log",
        _ACTIVE_COLUMNS,
        unique=True,
        sqlite_where=sa.text(predicate),
        postgresql_where=sa.text(predicate),
    )
