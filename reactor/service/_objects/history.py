"""The processing log's history: what people decided about agents' work, for audit.

The processing log says what became of each event an agent was given; its history says
what a person decided about what the agent proposed: ``suggestion:decided``, with its
provenance (the suggestion and the run that proposed it, the object and the version it
was based on, a digest of the changes decided on, the principal with its roles and
authenticator, the decision, its outcome and justification; see
:class:`~reactor._signals.payloads.SuggestionDecided`). A row is written in
the transaction that makes the decision true: a rejection's change of status, an
approval's changes of objects (when the service keeps its tables in the objects'
database, the default; otherwise right after them). So the history never shows an
approval whose changes were not applied (a stale one refused, say). Rows are never
changed or deleted.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pydantic
import sqlalchemy as sa

from reactor._signals.payloads import SuggestionDecided
from reactor.service._objects.db import Database
from reactor.service._objects.schema import processing_history

__all__ = ["History", "HistoryEntry", "history_row"]


class HistoryEntry(pydantic.BaseModel):
    """One decision in the processing log's history.

    Attributes:
        id: Its position in the history (increasing).
        name: What it records: ``suggestion:decided``.
        suggestion_id: The suggestion decided on.
        object_id: The object the suggestion was about, if any.
        payload: The decision with its provenance (``SuggestionDecided``).
        created_at: When (UTC).
    """

    model_config = pydantic.ConfigDict(frozen=True)

    id: int
    name: str
    suggestion_id: str | None
    object_id: str | None
    payload: dict[str, Any]
    created_at: datetime


def history_row(name: str, decided: SuggestionDecided) -> sa.Insert:
    """The statement that writes one decision (run it in the deciding transaction)."""
    return processing_history.insert().values(
        name=name,
        suggestion_id=decided["suggestion_id"],
        object_id=decided["object_id"],
        payload=dict(decided),
        created_at=datetime.now(UTC),
    )


class History:
    """The processing log's history in one database."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def add(self, name: str, decided: SuggestionDecided) -> None:
        """Write one decision in a transaction of its own."""
        async with self.db.write() as conn:
            await conn.execute(history_row(name, decided))

    async def list(
        self,
        *,
        suggestion_id: str | None = None,
        object_id: str | None = None,
        after: int | None = None,
        limit: int | None = 1000,
        newest_first: bool = False,
    ) -> list[HistoryEntry]:
        """Decisions, oldest first (about one suggestion or object, or all).

        Args:
            suggestion_id: Only those about this suggestion.
            object_id: Only those about this object.
            after: Only those after this ``id`` (the last one of the page before).
            limit: At most this many.
            newest_first: The newest first instead (the latest ``limit`` of them).
        """
        order = processing_history.c.id.desc() if newest_first else processing_history.c.id
        query = sa.select(processing_history).order_by(order).limit(limit)
        if suggestion_id is not None:
            query = query.where(processing_history.c.suggestion_id == suggestion_id)
        if object_id is not None:
            query = query.where(processing_history.c.object_id == object_id)
        if after is not None:
            query = query.where(processing_history.c.id > after)
        async with self.db.read() as conn:
            rows = (await conn.execute(query)).all()
        return [
            HistoryEntry(
                id=row.id,
                name=row.name,
                suggestion_id=row.suggestion_id,
                object_id=row.object_id,
                payload=row.payload,
                created_at=row.created_at,
            )
            for row in rows
        ]
