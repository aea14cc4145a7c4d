"""Pages of objects (the most recently changed first), and what each change caused.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-28
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Index the objects by when they changed, and the processing log by event.

    ``objects`` by ``(type, updated_at, id)`` and ``(updated_at, id)``:
    ``ObjectStore.page`` and the web UI's ``/objects`` read each page of objects through
    them (a keyset page: one indexed read of a page, whatever the table holds).
    ``processing_log`` by ``event_id``: an object's page finds the reactions each of
    its changes caused.
    """
    op.create_index("ix_objects_type_updated_at_id", "objects", ["type", "updated_at", "id"])
    op.create_index("ix_objects_updated_at_id", "objects", ["updated_at", "id"])
    op.create_index("ix_processing_log_event_id", "processing_log", ["event_id"])


def downgrade() -> None:
    """Drop them."""
    op.drop_index("ix_processing_log_event_id", "processing_log")
    op.drop_index("ix_objects_updated_at_id", "objects")
    op.drop_index("ix_objects_type_updated_at_id", "objects")
