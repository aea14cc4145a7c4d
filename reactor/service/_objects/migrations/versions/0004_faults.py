"""What the service needs under faults: versions, attempts, causes, epochs, replies.

* ``suggestions.object_version``: the version of the object a suggestion was based on
  (approving it after the object changed is refused unless forced);
* ``processing_log.attempts`` and ``owner``: how often an entry was taken, and by
  which process (an entry whose owner died is taken again, up to a limit);
* ``object_events.cause``: the reaction that made a change (run, agent, depth, chain),
  so that loops of reactions are cut;
* ``run_leases.epoch``: the fencing token of a lease, grown when it is taken over;
* ``prompt_replies``: the first reply to each prompt, decided by the primary key;
* ``service_processes``: the heartbeats of serving processes (whose entries are whose).

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-03
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    """Add the columns and tables."""
    with op.batch_alter_table("suggestions") as batch:
        batch.add_column(sa.Column("object_version", sa.Integer(), nullable=True))
    with op.batch_alter_table("processing_log") as batch:
        batch.add_column(
            sa.Column("attempts", sa.Integer(), nullable=False, server_default=sa.text("0"))
        )
        batch.add_column(sa.Column("owner", sa.String(200), nullable=True))
    with op.batch_alter_table("object_events") as batch:
        batch.add_column(sa.Column("cause", _JSON, nullable=True))
    with op.batch_alter_table("run_leases") as batch:
        batch.add_column(
            sa.Column("epoch", sa.Integer(), nullable=False, server_default=sa.text("1"))
        )
    op.create_table(
        "prompt_replies",
        sa.Column("run_id", sa.String(64), nullable=False),
        sa.Column("prompt_id", sa.String(200), nullable=False),
        sa.Column("answer", _JSON, nullable=True),
        sa.Column("answered_by", sa.String(200), nullable=False),
        sa.Column("answered_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("message_id", sa.String(64), nullable=True),
        sa.PrimaryKeyConstraint("run_id", "prompt_id", name="pk_prompt_replies"),
    )
    op.create_table(
        "service_processes",
        sa.Column("id", sa.String(200), nullable=False),
        sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_service_processes"),
    )


def downgrade() -> None:
    """Drop them."""
    op.drop_table("service_processes")
    op.drop_table("prompt_replies")
    with op.batch_alter_table("run_leases") as batch:
        batch.drop_column("epoch")
    with op.batch_alter_table("object_events") as batch:
        batch.drop_column("cause")
    with op.batch_alter_table("processing_log") as batch:
        batch.drop_column("owner")
        batch.drop_column("attempts")
    with op.batch_alter_table("suggestions") as batch:
        batch.drop_column("object_version")
