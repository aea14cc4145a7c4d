"""Retention of the service's tables: where each hash chain's kept rows are anchored.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-07
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """``audit_chains.pruned_through`` and ``pruned_hash``: the anchor of a pruned chain."""
    with op.batch_alter_table("audit_chains") as batch:
        batch.add_column(sa.Column("pruned_through", sa.BigInteger))
        batch.add_column(sa.Column("pruned_hash", sa.String(200)))


def downgrade() -> None:
    """Drop the anchors (a chain pruned since then no longer verifies from its start)."""
    with op.batch_alter_table("audit_chains") as batch:
        batch.drop_column("pruned_hash")
        batch.drop_column("pruned_through")
