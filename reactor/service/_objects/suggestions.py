"""The ``suggestions`` table: changes proposed by agents, waiting for a person.

A suggestion is resolved once: the move from ``pending`` is a conditional update, so
of two people approving at once (in any processes) exactly one succeeds. What is
decided goes into the processing log's :attr:`Suggestions.history` too.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import UTC, datetime

import sqlalchemy as sa

from reactor._signals.door import check_payload
from reactor._signals.payloads import SuggestionDecided
from reactor.exceptions import SuggestionNotFoundError, SuggestionResolvedError
from reactor.service._objects.changes import Operation, Suggestion, SuggestionStatus
from reactor.service._objects.db import Database
from reactor.service._objects.history import History, history_row
from reactor.service._objects.rows import operations_adapter, suggestion_from_row
from reactor.service._objects.schema import suggestions
from reactor.service._objects.values import AgentActor, User

__all__ = ["Suggestions"]


class Suggestions:
    """The suggestions of one database, and the decisions about them (:attr:`history`)."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.history = History(db)

    async def add(
        self,
        *,
        agent: str,
        object_id: str | None,
        operations: Sequence[Operation],
        reasoning: str,
        run_id: str | None,
        object_version: int | None = None,
    ) -> Suggestion:
        """Store a pending suggestion and return it.

        Raises:
            PayloadError: The database cannot keep its operations or reasoning (a NUL
                character, a lone surrogate); nothing was stored.
        """
        suggestion = Suggestion(
            id=f"sug_{uuid.uuid4().hex}",
            agent=agent,
            object_id=object_id,
            object_version=object_version,
            operations=tuple(operations),
            reasoning=reasoning,
            run_id=run_id,
            created_at=datetime.now(UTC),
        )
        changes = operations_adapter.dump_python(suggestion.operations, mode="json")
        check_payload(changes, "operations", nul=True)  # jsonb on PostgreSQL has no NUL
        check_payload(reasoning, "reasoning", nul=True)
        async with self.db.write() as conn:
            await conn.execute(
                suggestions.insert().values(
                    id=suggestion.id,
                    agent=agent,
                    object_id=object_id,
                    object_version=object_version,
                    changes=changes,
                    reasoning=reasoning,
                    status="pending",
                    run_id=run_id,
                    created_at=suggestion.created_at,
                )
            )
        return suggestion

    async def get(self, suggestion_id: str) -> Suggestion:
        """One suggestion.

        Raises:
            SuggestionNotFoundError: No suggestion has that id.
        """
        async with self.db.read() as conn:
            row = (
                await conn.execute(sa.select(suggestions).where(suggestions.c.id == suggestion_id))
            ).first()
        if row is None:
            raise SuggestionNotFoundError(
                f"No suggestion {suggestion_id!r}; list them with service.suggestions()."
            )
        return suggestion_from_row(row)

    async def list(self, status: str | None = None) -> list[Suggestion]:
        """Suggestions, newest first (of one status, or all)."""
        query = sa.select(suggestions).order_by(
            suggestions.c.created_at.desc(), suggestions.c.id.desc()
        )
        if status is not None:
            query = query.where(suggestions.c.status == status)
        async with self.db.read() as conn:
            return [suggestion_from_row(row) for row in await conn.execute(query)]

    async def resolve(
        self,
        suggestion_id: str,
        status: SuggestionStatus,
        actor: User | AgentActor,
        *,
        only_from: SuggestionStatus = "pending",
        decided: tuple[str, SuggestionDecided] | None = None,
    ) -> Suggestion:
        """Move a suggestion from ``only_from`` to ``status``, recording who did it.

        Args:
            suggestion_id: The suggestion.
            status: Its new status.
            actor: Who moves it.
            only_from: The status it must be in.
            decided: A decision for the :attr:`history` (its name and payload), written
                in the same transaction when the move happens.

        Raises:
            SuggestionNotFoundError: No suggestion has that id.
            SuggestionResolvedError: It is no longer ``only_from`` (resolved already).
        """
        now = datetime.now(UTC)
        resolved = status != "pending"
        async with self.db.write() as conn:
            row = (
                await conn.execute(
                    suggestions.update()
                    .where(suggestions.c.id == suggestion_id, suggestions.c.status == only_from)
                    .values(
                        status=status,
                        resolved_at=now if resolved else None,
                        resolved_by_type=actor.type if resolved else None,
                        resolved_by_id=actor.id if resolved else None,
                    )
                    .returning(*suggestions.c)
                )
            ).first()
            if row is not None and decided is not None:
                await conn.run_sync(history_row(*decided))
        if row is not None:
            return suggestion_from_row(row)
        current = await self.get(suggestion_id)
        verb = {"completed": "approved", "rejected": "rejected"}.get(current.status, current.status)
        when = f" at {current.resolved_at:%Y-%m-%d %H:%M:%S} UTC" if current.resolved_at else ""
        raise SuggestionResolvedError(
            f"Suggestion {suggestion_id!r} was already {verb} by {current.resolved_by}{when}; "
            "a suggestion is resolved once."
        )
