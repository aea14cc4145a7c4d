"""The ``suggestions`` table: changes proposed by agents, waiting for a person.

A suggestion is resolved once: the move from ``pending`` is a conditional update, so
of two people approving at once (in any processes) exactly one succeeds. What is
decided goes into the processing log's :attr:`Suggestions.history` too.

An agent has at most one pending suggestion per object: :meth:`Suggestions.add`
supersedes the pending ones of the same agent for the same object (status
``superseded``, ``superseded_by`` the new one, a ``suggestion:superseded`` line of the
history each) in the transaction that inserts the new one. On PostgreSQL that
transaction first takes an advisory lock of the (agent, object) pair, so that two
suggestions made at once in two processes are stored one after the other and the
second supersedes the first; SQLite writes one transaction at a time. A decision
racing the new suggestion is decided by the row: the one that moves it from
``pending`` first wins, and the other finds it resolved.

Listings are keyset pages, the newest first (:meth:`Suggestions.page`): the cursor is
the last suggestion's ``created_at`` and id, so each page is one indexed read of at
most a page, whatever the table holds.

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
import functools
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from reactor._recording.info import sortable_id
from reactor._signals.door import check_payload, check_text
from reactor._signals.names import SUGGESTION_SUPERSEDED
from reactor._signals.payloads import SuggestionDecided, SuggestionSuperseded
from reactor.exceptions import ServiceConfigError, SuggestionNotFoundError, SuggestionResolvedError
from reactor.service._objects.changes import (
    Approved,
    Create,
    Operation,
    Suggestion,
    SuggestionStatus,
)
from reactor.service._objects.db import Database
from reactor.service._objects.history import History, history_row, history_rows
from reactor.service._objects.rows import (
    MAX_PAGE,
    Page,
    cursor_of,
    keyset_cursor,
    object_from_row,
    operations_adapter,
    suggestion_from_row,
)
from reactor.service._objects.schema import (
    objects,
    suggestion_approvals,
    suggestions,
)
from reactor.service._objects.values import AgentActor, StoredObject, User

__all__ = ["PAGE", "Counted", "Proposed", "SuggestionPage", "Suggestions", "resolved_error"]

_IN_CHUNK = 500
"""Suggestion ids asked about in one ``IN (...)``."""

PAGE = 50
"""Suggestions a page holds unless asked for another number (at most ``MAX_PAGE``)."""

_SUPERSEDING = 0x53554747
"""The class of the PostgreSQL advisory locks of (agent, object) pairs ("SUGG"): the
second key is a hash of the pair."""

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


NOW = "now_"
"""The prefix of the columns of a suggestion's object, joined to a page's rows."""


@dataclasses.dataclass(frozen=True)
class SuggestionPage(Page[Suggestion]):
    """A page of suggestions; with its ``objects``, when asked for.

    Attributes:
        objects: The objects its suggestions are about or change, as they are now, by
            id (a deleted one is missing); empty unless asked for.
    """

    objects: dict[str, StoredObject] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class Proposed:
    """A new suggestion, and the pending ones it superseded (each with its history line)."""

    suggestion: Suggestion
    superseded: tuple[Suggestion, ...] = ()
    lines: tuple[SuggestionSuperseded, ...] = ()


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
        basis: dict[str, object] | None = None,
    ) -> Proposed:
        """Store a pending suggestion; it supersedes its agent's pending ones for its object.

        In one transaction (see the module): the pending suggestions of ``agent`` for
        ``object_id`` become ``superseded`` (linked to the new one, a line of the
        history each), and the new one is stored.

        Args:
            agent: The agent that proposes it.
            object_id: The object whose change the agent reacted to.
            operations: The changes it proposes.
            reasoning: Why.
            run_id: The run that proposed it.
            object_version: The object's version the agent saw.
            proposer: Who made the change the agent reacted to.
            basis: The fields it depends on, with their values as the agent saw them
                (``None``: its object's version decides whether it is stale).

        Raises:
            PayloadError: The database cannot keep its operations, reasoning or basis
                (a NUL character, a lone surrogate); nothing was stored.
        """
        suggestion = Suggestion(
            id=sortable_id("sug_", 20),
            agent=agent,
            object_id=object_id,
            object_version=object_version,
            operations=tuple(operations),
            reasoning=reasoning,
            run_id=run_id,
            created_at=datetime.now(UTC),
            proposer=proposer,
            basis=basis,
        )
        changes = operations_adapter.dump_python(suggestion.operations, mode="json")
        check_payload(changes, "operations", nul=True)  # jsonb on PostgreSQL has no NUL
        check_payload(reasoning, "reasoning", nul=True)
        check_payload(basis, "basis", nul=True)
        async with self.db.write() as conn:
            superseded = await _supersede(conn, suggestion) if object_id is not None else []
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
                    basis=basis,
                )
            )
            lines = [_superseded_line(old, suggestion) for old in superseded]
            if lines:
                await conn.run_sync(history_rows([(SUGGESTION_SUPERSEDED, line) for line in lines]))
        return Proposed(suggestion, tuple(superseded), tuple(lines))

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

    async def get_many(self, ids: Iterable[str]) -> dict[str, Suggestion]:
        """The suggestions of these ids that exist, by id (asked in chunks of ids)."""
        wanted, found = sorted(set(ids)), dict[str, Suggestion]()
        async with self.db.read() as conn:
            for start in range(0, len(wanted), _IN_CHUNK):
                chunk = wanted[start : start + _IN_CHUNK]
                rows = await conn.execute(sa.select(suggestions).where(suggestions.c.id.in_(chunk)))
                found.update((row.id, suggestion_from_row(row)) for row in rows)
            approved = await _approvals(conn, found)
        return {key: _with(suggestion, approved) for key, suggestion in found.items()}

    async def page(
        self,
        *,
        status: str | None = None,
        agent: str | None = None,
        object_id: str | None = None,
        after: str | None = None,
        limit: int = PAGE,
        with_objects: bool = False,
    ) -> SuggestionPage:
        """One page of suggestions, the newest first, filtered by status, agent and object.

        Pass a page's ``next`` as ``after`` for the next one. Each page is one indexed
        read (by ``(status, created_at, id)``, ``(agent, status, created_at, id)``,
        ``(object_id, agent, status)`` or ``(created_at, id)``) that also says which of
        its suggestions have approvals; those are read then.

        Args:
            status: Only those of this status.
            agent: Only this agent's.
            object_id: Only those about this object.
            after: The cursor of the page before (its ``next``).
            limit: Suggestions a page holds at most (1 to 500).
            with_objects: Read the objects the suggestions are about or change too, as
                they are now, in the same transaction (the objects must be in this
                database): the page's :attr:`SuggestionPage.objects`.

        Raises:
            ServiceConfigError: ``after`` is not a cursor a page gave, or ``limit`` is
                not 1 to 500.
            PayloadError: A filter or the cursor holds a NUL character.
        """
        given = {"status": status, "agent": agent, "object_id": object_id, "after": after}
        for name, text in given.items():
            if text is not None:
                check_text(text, name)
        if not 1 <= limit <= MAX_PAGE:
            raise ServiceConfigError(f"limit must be 1 to {MAX_PAGE}, got {limit}.")
        query = _page_query(given, limit, with_objects)
        read = functools.partial(_read_page, query=query, limit=limit, with_objects=with_objects)
        found, more, now = await self.db.run_read(read)
        return SuggestionPage(
            found, cursor_of(found[-1].created_at, found[-1].id) if more else None, now
        )

    async def reject_many(
        self, decided: Sequence[tuple[str, Decision]], actor: User | AgentActor
    ) -> list[Suggestion]:
        """Reject many pending suggestions in one transaction, each with its history line.

        ``decided``: each suggestion's id and its decision's line. Only those still
        pending move (a conditional update, as :meth:`resolve`), and only their lines
        are written, in the order given. Returns them, as they are now, in that order.
        """
        lines = dict(decided)
        ids, done = sorted(lines), list[Suggestion]()
        now = datetime.now(UTC)
        async with self.db.write() as conn:
            for start in range(0, len(ids), _IN_CHUNK):
                rows = await conn.execute(
                    suggestions.update()
                    .where(
                        suggestions.c.id.in_(ids[start : start + _IN_CHUNK]),
                        suggestions.c.status == "pending",
                    )
                    .values(
                        status="rejected",
                        resolved_at=now,
                        resolved_by_type=actor.type,
                        resolved_by_id=actor.id,
                    )
                    .returning(*suggestions.c)
                )
                done += map(suggestion_from_row, rows)
            moved = {suggestion.id: suggestion for suggestion in done}
            if moved:
                await conn.run_sync(history_rows([line for id, line in decided if id in moved]))
        return [moved[id] for id, _ in decided if id in moved]

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
                    .values(
                        status="completed",
                        resolved_at=now,
                        resolved_by_type=who.type,
                        resolved_by_id=who.id,
                    )
                )
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
        values: dict[str, object] = {
            "status": "pending",
            "resolved_at": None,
            "resolved_by_type": None,
            "resolved_by_id": None,
        }
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
    if current.status == "superseded":
        return SuggestionResolvedError(
            f"Suggestion {current.id!r} was superseded by suggestion {current.superseded_by!r}, "
            f"a newer one of agent {current.agent!r} for object {current.object_id!r}: decide "
            "on that one instead."
        )
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
            suggestion_id=suggestion_id,
            principal_id=approval.principal,
            changes_sha256=approval.changes_sha256,
            roles="+".join(approval.roles),
            authenticator=approval.authenticator,
            decided_at=approval.decided_at,
        )
    )
    count = await conn.scalar(sa.select(sa.func.count()).where(*of_these))
    return int(count or 0)


async def _approvals(conn: AsyncConnection, ids: Iterable[str]) -> dict[str, list[Approved]]:
    """The approvals of these suggestions, oldest first (asked in chunks of ids)."""
    return await conn.run_sync(_approvals_of, list(ids))


def _approvals_of(conn: sa.Connection, ids: Iterable[str]) -> dict[str, list[Approved]]:
    """:func:`_approvals`, on a synchronous connection."""
    wanted, found = list(ids), dict[str, list[Approved]]()
    for start in range(0, len(wanted), _IN_CHUNK):
        chunk = wanted[start : start + _IN_CHUNK]
        rows = conn.execute(
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


async def _supersede(conn: AsyncConnection, new: Suggestion) -> list[Suggestion]:
    """Mark the pending suggestions of ``new``'s agent for its object ``superseded`` by it.

    On PostgreSQL, first wait for the advisory lock of the (agent, object) pair (held
    until the transaction ends), so that a suggestion made at once elsewhere is
    committed before this one looks, and is superseded by it.
    """
    if conn.dialect.name == "postgresql":
        pair = sa.func.hashtext(f"{new.agent}/{new.object_id}")
        await conn.execute(sa.select(sa.func.pg_advisory_xact_lock(_SUPERSEDING, pair)))
    rows = await conn.execute(
        suggestions.update()
        .where(
            suggestions.c.object_id == new.object_id,
            suggestions.c.agent == new.agent,
            suggestions.c.status == "pending",
        )
        .values(
            status="superseded",
            superseded_by=new.id,
            resolved_at=new.created_at,
            resolved_by_type="agent",
            resolved_by_id=new.agent,
        )
        .returning(*suggestions.c)
    )
    return sorted(map(suggestion_from_row, rows), key=lambda old: (old.created_at, old.id))


def _page_query(given: dict[str, str | None], limit: int, with_objects: bool) -> sa.Select[Any]:
    """The query of a page (see :meth:`Suggestions.page`): ``limit`` + 1 rows.

    Each row says whether its suggestion has ``approved`` rows; ``with_objects``: and
    holds its object as it is now (``now_*`` columns; ``NULL`` once deleted).
    """
    c = suggestions.c
    approved = sa.exists().where(suggestion_approvals.c.suggestion_id == c.id)
    query = (
        sa.select(suggestions, approved.label("approved"))
        .order_by(c.created_at.desc(), c.id.desc())
        .limit(limit + 1)
    )
    for column in ("status", "agent", "object_id"):
        if given[column] is not None:
            query = query.where(c[column] == given[column])
    if given["after"] is not None:
        moment, last = keyset_cursor(given["after"], "suggestions")
        query = query.where(
            sa.or_(c.created_at < moment, sa.and_(c.created_at == moment, c.id < last))
        )
    if with_objects:
        query = query.outerjoin(objects, objects.c.id == c.object_id).add_columns(
            *(column.label(f"{NOW}{column.name}") for column in objects.c)
        )
    return query


def _read_page(
    conn: sa.Connection, *, query: sa.Select[Any], limit: int, with_objects: bool
) -> tuple[list[Suggestion], bool, dict[str, StoredObject]]:
    """A page's suggestions (with their approvals), whether more follow, and its objects."""
    rows = conn.execute(query).all()
    found = [suggestion_from_row(row) for row in rows[:limit]]
    some = [row.id for row in rows[:limit] if row.approved]  # most have none to read
    if some:
        gathered = _approvals_of(conn, some)
        found = [_with(suggestion, gathered) for suggestion in found]
    now = _objects_now(conn, rows[:limit], found) if with_objects else {}
    return found, len(rows) > limit, now


def _objects_now(
    conn: sa.Connection, rows: Sequence[sa.Row[Any]], found: Sequence[Suggestion]
) -> dict[str, StoredObject]:
    """The objects a page's suggestions are about (joined to its rows) or change (read)."""
    now = {row.now_id: object_from_row(row, NOW) for row in rows if row.now_id is not None}
    others = {
        op.id
        for suggestion in found
        for op in suggestion.operations
        if not isinstance(op, Create) and op.id not in now
    } - {suggestion.object_id for suggestion in found}
    if others:
        read = conn.execute(sa.select(objects).where(objects.c.id.in_(sorted(others))))
        now.update((row.id, object_from_row(row)) for row in read)
    return now


def _superseded_line(old: Suggestion, new: Suggestion) -> SuggestionSuperseded:
    """The history's line of ``old`` giving way to ``new``."""
    return {
        "suggestion_id": old.id,
        "proposed_by_run": {"run_id": old.run_id, "agent": old.agent},
        "object_id": old.object_id,
        "object_version": old.object_version,
        "superseded_by": new.id,
        "superseded_by_run": new.run_id,
        "superseded_at": new.created_at.isoformat(),
        "actor": AgentActor(new.agent).payload(),
    }
