"""The processing log's history: what became of agents' suggestions, for audit.

The processing log says what became of each event an agent was given; its history says
what became of what the agent proposed. A person's decision is ``suggestion:decided``,
with its provenance (the suggestion and the run that proposed it, the object and the
version it was based on, a digest of the changes decided on, the principal with its
roles and authenticator, the decision, its outcome and justification; see
:class:`~reactor._signals.payloads.SuggestionDecided`); a pending suggestion that gave
way to a newer one of its agent for its object is ``suggestion:superseded`` (see
:class:`~reactor._signals.payloads.SuggestionSuperseded`). A row is written in the
transaction that makes it true: the newer suggestion's insert, a rejection's change of
status, an approval's changes of objects (when the service keeps its tables in the
objects' database, the default; otherwise right after them). So the history never
shows an approval whose changes were not applied (a stale one refused, say). Rows are
never changed or deleted.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pydantic
import sqlalchemy as sa

from reactor._signals.payloads import SuggestionDecided, SuggestionSuperseded
from reactor.service._objects.db import Database
from reactor.service._objects.schema import processing_history

__all__ = ["History", "HistoryEntry", "Line", "history_row", "history_values"]


class HistoryEntry(pydantic.BaseModel):
    """One decision in the processing log's history.

    Attributes:
        id: Its position in the history (increasing).
        name: What it records: ``suggestion:decided`` or ``suggestion:superseded``.
        suggestion_id: The suggestion decided on.
        object_id: The object the suggestion was about, if any.
        payload: The decision with its provenance (``SuggestionDecided``), or what
            superseded the suggestion (``SuggestionSuperseded``).
        created_at: When (UTC).
    """

    model_config = pydantic.ConfigDict(frozen=True)

    id: int
    name: str
    suggestion_id: str | None
    object_id: str | None
    payload: dict[str, Any]
    created_at: datetime


Line = SuggestionDecided | SuggestionSuperseded
"""What a line of the history says (its payload)."""


def history_values(name: str, line: Line) -> dict[str, Any]:
    """The values of one line's row (for an insert of many rows at once)."""
    return {
        "name": name,
        "suggestion_id": line["suggestion_id"],
        "object_id": line["object_id"],
        "payload": dict(line),
        "created_at": datetime.now(UTC),
    }


def history_row(name: str, line: Line) -> sa.Insert:
    """The statement that writes one line (run it in the transaction that makes it true)."""
    return processing_history.insert().values(**history_values(name, line))


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
