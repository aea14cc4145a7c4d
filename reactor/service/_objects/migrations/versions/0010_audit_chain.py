"""The audit trail: the processing history and the object events, hash-chained.

Revision ID: 0010
Revises: 0009
Create Date: 2027-01-12
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

from reactor.service._objects.schema import Timestamp

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

CHAINED = ("processing_history", "object_events")


def upgrade() -> None:
    """Add ``hash`` to the chained tables, and ``audit_chains``: when each began.

    Rows written before this revision keep no hash: ``reactor audit verify`` reports
    them as written before the trail was chained, and checks the rows written since
    (a row written since without a hash had it removed).
    """
    for table in CHAINED:
        with op.batch_alter_table(table) as batch:
            batch.add_column(sa.Column("hash", sa.String(100)))
    chains = op.create_table(
        "audit_chains",
        sa.Column("table_name", sa.String(64), nullable=False),
        sa.Column("since", Timestamp(), nullable=False),
        sa.PrimaryKeyConstraint("table_name", name="pk_audit_chains"),
    )
    now = datetime.now(UTC)
    op.bulk_insert(chains, [{"table_name": table, "since": now} for table in CHAINED])


def downgrade() -> None:
    """Drop them (the hashes are lost)."""
    op.drop_table("audit_chains")
    for table in reversed(CHAINED):
        with op.batch_alter_table(table) as batch:
            batch.drop_column("hash")
