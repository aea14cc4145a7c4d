"""Schedules in code: where an agent's schedule came from, and what the code said.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-26
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Add ``agents.schedule_source`` and ``agents.code_schedule``.

    Before this revision code could not give a schedule, so a code agent's row with a
    schedule got it over the API.
    """
    with op.batch_alter_table("agents") as batch:
        batch.add_column(sa.Column("schedule_source", sa.String(8)))
        batch.add_column(sa.Column("code_schedule", sa.String(200)))
    agents = sa.table(
        "agents",
        sa.column("defined_in", sa.String),
        sa.column("trigger_type", sa.String),
        sa.column("schedule_source", sa.String),
    )
    for source, scheduled in (("api", True), ("code", False)):
        op.execute(
            agents.update()
            .where(agents.c.defined_in == "code")
            .where((agents.c.trigger_type == "cron") == scheduled)
            .values(schedule_source=source)
        )


def downgrade() -> None:
    """Drop them."""
    with op.batch_alter_table("agents") as batch:
        batch.drop_column("code_schedule")
        batch.drop_column("schedule_source")
