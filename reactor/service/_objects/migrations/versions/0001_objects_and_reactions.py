"""Objects, their change events, agents and their runs, the processing log, suggestions.

Revision ID: 0001
Revises:
Create Date: 2026-11-23
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
BIG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
ACTIVE = "status IN ('pending', 'processing', 'completed')"


def _time(name: str, *, nullable: bool = False) -> sa.Column[datetime]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def _actor(prefix: str, *, nullable: bool = False) -> list[sa.Column[str]]:
    return [
        sa.Column(f"{prefix}_type", sa.String(16), nullable=nullable),
        sa.Column(f"{prefix}_id", sa.String(200), nullable=nullable),
    ]


def upgrade() -> None:
    """Create the tables of objects and reactions."""
    op.create_table(
        "objects",
        sa.Column("id", sa.String(64), nullable=False),
        sa.Column("type", sa.String(200), nullable=False),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("data", JSON, nullable=False),
        *_actor("actor"),
        _time("created_at"),
        _time("updated_at"),
        sa.PrimaryKeyConstraint("id", name="pk_objects"),
    )
    op.create_index("ix_objects_type", "objects", ["type"])
    op.create_table(
        "object_events",
        sa.Column("event_id", BIG_ID, nullable=False, autoincrement=True),
        sa.Column("object_id", sa.String(64), nullable=False),
        sa.Column("object_type", sa.String(200), nullable=False),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("event", sa.String(16), nullable=False),
        sa.Column("data", JSON, nullable=False),
        sa.Column("changes", JSON, nullable=False),
        *_actor("actor"),
        *_actor("approved_by", nullable=True),
        _time("object_created_at"),
        _time("created_at"),
        sa.PrimaryKeyConstraint("event_id", name="pk_object_events"),
        sa.CheckConstraint(
            "event IN ('created', 'updated', 'deleted')", name="ck_object_events_event"
        ),
    )
    op.create_index("ix_object_events_object_id_version", "object_events", ["object_id", "version"])
    op.create_table(
        "agents",
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("prompt", sa.Text),
        sa.Column("role", sa.Text),
        sa.Column("trigger_type", sa.String(16), nullable=False),
        sa.Column("cron_schedule", sa.String(200)),
        sa.Column("reaction_config", JSON),
        sa.Column("execution_mode", sa.String(16), nullable=False),
        sa.Column("capabilities", JSON, nullable=False),
        sa.Column("output_schema", JSON),
        sa.Column("enabled", sa.Boolean, nullable=False, server_default=sa.true()),
        sa.Column("defined_in", sa.String(16), nullable=False),
        _time("created_at"),
        _time("updated_at"),
        sa.PrimaryKeyConstraint("name", name="pk_agents"),
        sa.CheckConstraint(
            "trigger_type IN ('manual', 'cron', 'reaction')", name="ck_agents_trigger_type"
        ),
        sa.CheckConstraint(
            "execution_mode IN ('execute', 'suggest', 'hybrid')", name="ck_agents_execution_mode"
        ),
        sa.CheckConstraint("defined_in IN ('code', 'database')", name="ck_agents_defined_in"),
    )
    op.create_table(
        "agent_runs",
        sa.Column("id", BIG_ID, nullable=False, autoincrement=True),
        sa.Column("agent", sa.String(200), nullable=False),
        sa.Column("run_id", sa.String(64), nullable=False),
        sa.Column("trigger", sa.String(16), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        _time("started_at"),
        _time("finished_at", nullable=True),
        sa.Column("error", sa.Text),
        sa.PrimaryKeyConstraint("id", name="pk_agent_runs"),
        sa.UniqueConstraint("run_id", name="uq_agent_runs_run_id"),
    )
    op.create_index("ix_agent_runs_agent_started_at", "agent_runs", ["agent", "started_at"])
    op.create_table(
        "processing_log",
        sa.Column("id", BIG_ID, nullable=False, autoincrement=True),
        sa.Column("agent", sa.String(200), nullable=False),
        sa.Column("object_id", sa.String(64), nullable=False),
        sa.Column("object_version", sa.Integer, nullable=False),
        sa.Column("event_type", sa.String(16), nullable=False),
        sa.Column("event_id", sa.BigInteger, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("error", sa.Text),
        sa.Column("run_id", sa.String(64)),
        _time("created_at"),
        _time("updated_at"),
        sa.PrimaryKeyConstraint("id", name="pk_processing_log"),
        sa.CheckConstraint(
            "status IN ('pending', 'processing', 'completed', 'failed', 'skipped', 'abandoned')",
            name="ck_processing_log_status",
        ),
    )
    op.create_index(
        "uq_processing_log_active",
        "processing_log",
        ["agent", "object_id", "object_version", "event_type"],
        unique=True,
        sqlite_where=sa.text(ACTIVE),
        postgresql_where=sa.text(ACTIVE),
    )
    op.create_index("ix_processing_log_status_id", "processing_log", ["status", "id"])
    op.create_index(
        "ix_processing_log_status_updated_at", "processing_log", ["status", "updated_at"]
    )
    op.create_index("ix_processing_log_object_id", "processing_log", ["object_id"])
    op.create_table(
        "suggestions",
        sa.Column("id", sa.String(64), nullable=False),
        sa.Column("agent", sa.String(200), nullable=False),
        sa.Column("object_id", sa.String(64)),
        sa.Column("changes", JSON, nullable=False),
        sa.Column("reasoning", sa.Text, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("run_id", sa.String(64)),
        _time("created_at"),
        _time("resolved_at", nullable=True),
        *_actor("resolved_by", nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_suggestions"),
        sa.CheckConstraint(
            "status IN ('pending', 'completed', 'rejected')", name="ck_suggestions_status"
        ),
    )
    op.create_index("ix_suggestions_status_created_at", "suggestions", ["status", "created_at"])
    op.create_table(
        "reaction_cursors",
        sa.Column("agent", sa.String(200), nullable=False),
        sa.Column("event_id", sa.BigInteger, nullable=False),
        _time("updated_at"),
        sa.PrimaryKeyConstraint("agent", name="pk_reaction_cursors"),
    )


def downgrade() -> None:
    """Drop the tables of objects and reactions."""
    for table in (
        "reaction_cursors",
        "suggestions",
        "processing_log",
        "agent_runs",
        "agents",
        "object_events",
        "objects",
    ):
        op.drop_table(table)
