"""The ``suggestions`` table: changes proposed by agents, waiting for a person.

A suggestion is resolved once: the move from ``pending`` is a conditional update, so
of two people approving at once (in any processes) exactly one succeeds. What is
decided goes into the processing log's :attr:`Suggestions.history` too.

An agent may need several approvals (``Approval(count=2)``): each is a row of
``suggestion_approvals``, written by :meth:`Suggestions.approve` in a transaction that
holds the suggestion's row (``SELECT ... FOR UPDATE`` on PostgreSQL; SQLite writes one
transaction at a time), so that approvals made at once are counted one after the other
and exactly one of them completes the suggestion. A principal approves given changes
once (the table's primary key says so too); an edit of the changes (a ``modify``)
starts the count anew, since only approvals of the current changes count.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from reactor._signals.door import check_payload
from reactor._signals.payloads import SuggestionDecided
from reactor.exceptions import SuggestionNotFoundError, SuggestionResolvedError
from reactor.service._objects.changes import Approved, Operation, Suggestion, SuggestionStatus
from reactor.service._objects.db import Database
from reactor.service._objects.history import History, history_row
from reactor.service._objects.rows import operations_adapter, suggestion_from_row
from reactor.service._objects.schema import suggestion_approvals, suggestions
from reactor.service._objects.values import AgentActor, User

__all__ = ["Counted", "Suggestions", "resolved_error"]

_IN_CHUNK = 500
"""Suggestion ids asked about in one ``IN (...)``."""

Decision = tuple[str, SuggestionDecided]
"""A line of the history: its name and payload."""


@dataclasses.dataclass(frozen=True)
class Counted:
    """An approval counted: the suggestion after it, and whether it completes it.

    ``approvals``: how many approvals its current changes have; ``completes``: this one
    made the count (the caller then applies the changes).
    """

    suggestion: Suggestion
    approvals: int
    completes: bool


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
        proposer: User | AgentActor | None = None,
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
            proposer=proposer,
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
                    proposer_type=None if proposer is None else proposer.type,
                    proposer_id=None if proposer is None else proposer.id,
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
                raise _not_found(suggestion_id)
            approved = await _approvals(conn, [suggestion_id])
        return _with(suggestion_from_row(row), approved)

    async def list(self, status: str | None = None) -> list[Suggestion]:
        """Suggestions, newest first (of one status, or all)."""
        query = sa.select(suggestions).order_by(
            suggestions.c.created_at.desc(), suggestions.c.id.desc()
        )
        if status is not None:
            query = query.where(suggestions.c.status == status)
        async with self.db.read() as conn:
            found = [suggestion_from_row(row) for row in await conn.execute(query)]
            approved = await _approvals(conn, [suggestion.id for suggestion in found])
        return [_with(suggestion, approved) for suggestion in found]

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
        raise resolved_error(await self.get(suggestion_id))

    async def approve(
        self,
        suggestion_id: str,
        approval: Approved,
        needed: int,
        decided: Callable[[Suggestion, int, bool], Decision],
        *,
        operations: Sequence[Operation] | None = None,
    ) -> Counted:
        """Count one approval; complete the suggestion when it makes ``needed``.

        In one transaction holding the suggestion's row: the approval is written (with
        ``operations`` first, when the approver edited the changes), the approvals of
        the current changes are counted, and either the suggestion moves to
        ``completed`` (the caller applies its changes, and calls :meth:`reopen` if
        they cannot be) or, still pending, the decision (``decided(suggestion, count,
        completes)``) is written to the history.

        Raises:
            SuggestionNotFoundError: No suggestion has that id.
            SuggestionResolvedError: It is no longer pending, or this principal has
                approved these changes already.
        """
        async with self.db.write() as conn:
            row = (
                await conn.execute(
                    sa.select(suggestions)
                    .where(suggestions.c.id == suggestion_id)
                    .with_for_update()
                )
            ).first()
            if row is None:
                raise _not_found(suggestion_id)
            current = suggestion_from_row(row)
            if current.status != "pending":
                raise resolved_error(current)
            if operations is not None:
                changes = operations_adapter.dump_python(tuple(operations), mode="json")
                await conn.execute(
                    suggestions.update()
                    .where(suggestions.c.id == suggestion_id)
                    .values(changes=changes)
                )
                current = current.model_copy(update={"operations": tuple(operations)})
            approvals = await _counted(conn, suggestion_id, approval)
            completes = approvals >= needed
            if completes:
                now, who = datetime.now(UTC), User(approval.principal)
                await conn.execute(
                    suggestions.update()
                    .where(suggestions.c.id == suggestion_id)
                    .values(status="completed", resolved_at=now, resolved_by_type=who.type,
                            resolved_by_id=who.id)
                )  # fmt: skip
                current = current.model_copy(
                    update={"status": "completed", "resolved_at": now, "resolved_by": who}
                )
            else:
                await conn.run_sync(history_row(*decided(current, approvals, completes)))
            approved = await _approvals(conn, [suggestion_id])
        return Counted(_with(current, approved), approvals, completes)

    async def reopen(
        self,
        suggestion_id: str,
        approval: Approved,
        operations: Sequence[Operation] | None = None,
    ) -> None:
        """Undo an approval that completed a suggestion whose changes could not be applied.

        The suggestion is ``pending`` again, without that approval, with ``operations``
        (the changes before an edit that was not applied) when given.
        """
        values: dict[str, object] = {"status": "pending", "resolved_at": None,
                                     "resolved_by_type": None, "resolved_by_id": None}  # fmt: skip
        if operations is not None:
            values["changes"] = operations_adapter.dump_python(tuple(operations), mode="json")
        async with self.db.write() as conn:
            await conn.execute(
                suggestion_approvals.delete().where(
                    suggestion_approvals.c.suggestion_id == suggestion_id,
                    suggestion_approvals.c.principal_id == approval.principal,
                    suggestion_approvals.c.changes_sha256 == approval.changes_sha256,
                )
            )
            await conn.execute(
                suggestions.update()
                .where(suggestions.c.id == suggestion_id, suggestions.c.status == "completed")
                .values(**values)
            )

    async def expire(self, suggestion_id: str, actor: User | AgentActor) -> Suggestion:
        """Mark a pending suggestion ``expired`` (someone tried to approve it too late).

        Raises:
            SuggestionNotFoundError: No suggestion has that id.
            SuggestionResolvedError: It was resolved already.
        """
        return await self.resolve(suggestion_id, "expired", actor)


def _not_found(suggestion_id: str) -> SuggestionNotFoundError:
    return SuggestionNotFoundError(
        f"No suggestion {suggestion_id!r}; list them with service.suggestions()."
    )


def resolved_error(current: Suggestion) -> SuggestionResolvedError:
    """The error of a decision on a suggestion that is no longer pending (expired too)."""
    if current.status == "expired":
        return SuggestionResolvedError(
            f"Suggestion {current.id!r} expired: it is older than its agent's "
            f"Approval(expires_after=...) allows, and can no longer be approved; the agent "
            "proposes again when its object changes."
        )
    verb = {"completed": "approved", "rejected": "rejected"}.get(current.status, current.status)
    when = f" at {current.resolved_at:%Y-%m-%d %H:%M:%S} UTC" if current.resolved_at else ""
    return SuggestionResolvedError(
        f"Suggestion {current.id!r} was already {verb} by {current.resolved_by}{when}; "
        "a suggestion is resolved once."
    )


async def _counted(conn: AsyncConnection, suggestion_id: str, approval: Approved) -> int:
    """Write ``approval``, then count the approvals of its changes.

    Refused when its principal approved these changes already.
    """
    of_these = (
        suggestion_approvals.c.suggestion_id == suggestion_id,
        suggestion_approvals.c.changes_sha256 == approval.changes_sha256,
    )
    before = await conn.scalar(
        sa.select(suggestion_approvals.c.decided_at).where(
            *of_these, suggestion_approvals.c.principal_id == approval.principal
        )
    )
    if before is not None:
        raise SuggestionResolvedError(
            f"user:{approval.principal} approved suggestion {suggestion_id!r} already "
            f"(at {before:%Y-%m-%d %H:%M:%S} UTC); each approval must come from another "
            "principal."
        )
    await conn.execute(
        suggestion_approvals.insert().values(
            suggestion_id=suggestion_id, principal_id=approval.principal,
            changes_sha256=approval.changes_sha256, roles="+".join(approval.roles),
            authenticator=approval.authenticator, decided_at=approval.decided_at,
        )
    )  # fmt: skip
    count = await conn.scalar(sa.select(sa.func.count()).where(*of_these))
    return int(count or 0)


async def _approvals(conn: AsyncConnection, ids: Iterable[str]) -> dict[str, list[Approved]]:
    """The approvals of these suggestions, oldest first (asked in chunks of ids)."""
    wanted, found = list(ids), dict[str, list[Approved]]()
    for start in range(0, len(wanted), _IN_CHUNK):
        chunk = wanted[start : start + _IN_CHUNK]
        rows = await conn.execute(
            sa.select(suggestion_approvals)
            .where(suggestion_approvals.c.suggestion_id.in_(chunk))
            .order_by(suggestion_approvals.c.decided_at)
        )
        for row in rows:
            found.setdefault(row.suggestion_id, []).append(
                Approved(
                    principal=row.principal_id,
                    roles=tuple(filter(None, row.roles.split("+"))),
                    authenticator=row.authenticator,
                    changes_sha256=row.changes_sha256,
                    decided_at=row.decided_at,
                )
            )
    return found


def _with(suggestion: Suggestion, approved: dict[str, list[Approved]]) -> Suggestion:
    given = approved.get(suggestion.id)
    return suggestion.model_copy(update={"approvals": tuple(given)}) if given else suggestion
