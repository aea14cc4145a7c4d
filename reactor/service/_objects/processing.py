"""The processing log: which object events each agent was given, and what became of them.

Every transition is a conditional statement, so the database decides races between
processes: an entry is claimed (``pending`` -> ``processing``) by one process only,
and finished only from ``processing`` (an entry the stuck-job detector marked
``abandoned`` stays so). A duplicate (agent, object, version, event) is refused by the
partial unique index ``uq_processing_log_active`` while one is pending, processing or
completed, and logged as ``skipped``.

The log is read in keyset pages, the newest first (:meth:`ProcessingLog.page`: the
cursor is the last entry's id), each one indexed read by agent, status or object; how
far behind each agent is (:meth:`ProcessingLog.lag`) is one grouped query over the
index ``(agent, status, id)`` and a look-up of the oldest waiting entries by id.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection

from reactor._recording.info import new_run_id
from reactor._signals.door import check_text, storable_text
from reactor.exceptions import ServiceConfigError
from reactor.service._objects.changes import EntryStatus, Lag, ProcessingEntry
from reactor.service._objects.db import Database
from reactor.service._objects.owners import Cursors
from reactor.service._objects.rows import MAX_PAGE, Page, bad_cursor, entry_from_row
from reactor.service._objects.schema import (
    ACTIVE_PREDICATE,
    Timestamp,
    admission_buckets,
    agent_runs,
    object_events,
    processing_log,
)
from reactor.service._objects.schema import (
    agents as agents_table,
)
from reactor.service._objects.values import ObjectEvent

__all__ = [
    "PAGE",
    "Admitted",
    "Admitting",
    "Claim",
    "Decision",
    "Finished",
    "ProcessingLog",
    "Spent",
    "Taken",
    "Waiting",
]

_KEY = ("agent", "object_id", "object_version", "event_type")
_ACTIVE = sa.text(ACTIVE_PREDICATE)
"""The unique index's predicate, as literal SQL: PostgreSQL matches ``ON CONFLICT ... WHERE``
to the partial index only when it sees the values (a prepared statement's parameters
would hide them)."""
_IN_FLIGHT = processing_log.c.status.in_(("pending", "processing"))
_CHUNK = 500
"""Most ids in one ``IN (...)`` list."""
PAGE = 50
"""Entries a page holds unless asked for another number (at most ``MAX_PAGE``)."""
_LAST_ID = 2**63 - 1


@dataclass(frozen=True)
class Claim:
    """One event for one agent, to be logged.

    An ``exclusive`` agent (``concurrency="skip"``) also drops an event for an object
    version it has in flight under another event type.
    """

    agent: str
    event: ObjectEvent
    exclusive: bool = False
    refused: str | None = None  # why it is logged at once (a loop, its agent's guard)
    refused_as: EntryStatus = "skipped"  # ``failed``: the agent's guard raised


@dataclass(frozen=True)
class Taken:
    """An entry taken to be processed, with its run's id (``entry.run_id``: from its first take).

    ``earlier``: it had one already, so an attempt cut off by a crash (or retried by
    hand) may have recorded it: resume it, rather than leave it ``running``. ``batch``:
    the entries delivered with it (merged into it, and it last), in arrival order;
    empty when it goes alone.
    """

    entry: ProcessingEntry
    earlier: bool
    batch: tuple[int, ...] = ()


@dataclass(frozen=True)
class Waiting:
    """An entry of an agent with admission that is not done: what admission decides on.

    Attributes:
        id: The entry.
        object_id: Its object.
        object_type: The object's type (what ``keep=`` patterns name).
        event_id: Its object event.
        status: ``pending``, ``held``, or ``processing`` (its object's key is busy).
        created_at: When it was logged (UNIX seconds).
        data: The object's data in its event, when the admission's keys read it.
    """

    id: int
    object_id: str
    object_type: str
    event_id: int
    status: str
    created_at: float
    data: Mapping[str, Any] | None = None


@dataclass
class Decision:
    """What admission decided for one agent's waiting entries, all written in one transaction.

    Attributes:
        take: The entries to start now, oldest first, each with its batch (the entries
            merged into it and it, in arrival order; empty: it goes alone).
        superseded: Entries a newer one of the same key took the place of, and that one.
        merged: Entries delivered with another (in its batch), and that one.
        held: Entries held by a spend cap, and why.
        released: Held entries that may go again (``pending``).
        buckets: The throttles' buckets to write (their key, their next due time).
        wake_at: When to decide again (UNIX seconds) though nothing new comes, for
            entries that will go then: the end of a debounce, a batch's wait, a
            throttle's next token.
        release_at: When a spend cap's period rolls, releasing what it holds (held
            entries are not work in flight: the service is idle with them).
    """

    take: list[tuple[int, tuple[int, ...]]] = field(default_factory=list)
    superseded: dict[int, int] = field(default_factory=dict)
    merged: dict[int, int] = field(default_factory=dict)
    held: dict[int, str] = field(default_factory=dict)
    released: list[int] = field(default_factory=list)
    buckets: dict[str, float] = field(default_factory=dict)
    wake_at: float | None = None
    release_at: float | None = None


@dataclass(frozen=True)
class Admitted:
    """What an admission let start (:meth:`ProcessingLog.admit`), and when to ask again.

    Attributes:
        taken: The entries taken, oldest first, each with its batch.
        wake_at: When entries that wait now may go (UNIX seconds; ``None``: when
            something new comes).
        release_at: When a spend cap's period rolls (what it holds may go then).
    """

    taken: list[Taken]
    wake_at: float | None = None
    release_at: float | None = None


Spent = Callable[[str | None, float], float]
"""``spent(agent, since)``: what the model calls of an agent's entries (every agent's, for
``None``) that ended since ``since`` (UNIX seconds) cost, in US dollars."""


class Admitting(Protocol):
    """An agent's admission, as the processing log asks it (in its transaction)."""

    @property
    def reads_data(self) -> bool:
        """Whether :meth:`decide` reads the objects' data (``Waiting.data``)."""
        ...

    def decide(
        self,
        waiting: Sequence[Waiting],
        buckets: Mapping[str, float],
        spent: Spent,
        now: float,
        room: int,
        cap_usd: float | None = None,
    ) -> Decision:
        """Which of ``waiting`` start now (at most ``room``), and what becomes of the rest.

        ``cap_usd``: an admin's cap over the agent's own (``agents.spend_cap_usd``).
        """
        ...


@dataclass(frozen=True)
class Finished:
    """How one reaction ended: its entry's outcome, and the run it went on as (if any).

    How that run ended is its row's in the signal store, in one place: ``agent_runs``
    only refers to it (which agent, what started it, when).
    """

    entry_id: int
    agent: str
    status: EntryStatus
    error: str | None
    run_id: str | None
    started_at: datetime
    cost_usd: float | None = None


class ProcessingLog(Cursors):
    """The ``processing_log`` table of one database, and the agents' dispatch cursors."""

    def __init__(self, db: Database) -> None:
        super().__init__(db)
        self.owner: str | None = None  # the process taking entries: see ``Owners``

    async def claim(
        self, claims: Sequence[Claim], cursors: Mapping[str, int] | None = None
    ) -> list[ProcessingEntry]:
        """Log each claim as ``pending``, or ``skipped`` when it is taken; one transaction.

        Args:
            claims: The (agent, event) pairs, in dispatch order.
            cursors: Agents' new dispatch positions, written in the same transaction.

        Returns:
            The new entries, in the order of ``claims``.
        """
        return await self._transact(functools.partial(self._claim, claims=claims, cursors=cursors))

    def _claim(
        self, conn: sa.Connection, *, claims: Sequence[Claim], cursors: Mapping[str, int] | None
    ) -> list[ProcessingEntry]:
        now = datetime.now(UTC)
        busy = self._in_flight(conn, [c for c in claims if c.exclusive])
        fresh: list[tuple[int, dict[str, Any]]] = []
        skipped: list[tuple[int, dict[str, Any]]] = []
        for index, claim in enumerate(claims):
            event = claim.event
            row = {
                "agent": claim.agent,
                "object_id": event.id,
                "object_version": event.version,
                "event_type": event.event,
                "event_id": event.event_id,
                "status": "pending",
                "error": None,
                "created_at": now,
                "updated_at": now,
            }
            triple = (claim.agent, event.id, event.version)
            kinds = busy.setdefault(triple, set()) if claim.exclusive else set()
            if claim.refused is not None:
                refused = {**row, "status": claim.refused_as, "error": claim.refused}
                skipped.append((index, refused))
            elif kinds and event.event not in kinds:  # the same event is a duplicate instead
                skipped.append((index, {**row, "status": "skipped", "error": _BUSY}))
            else:
                kinds.add(event.event)
                fresh.append((index, row))
        placed: dict[int, ProcessingEntry] = {}
        if fresh:
            inserted = conn.execute(_claiming(self.db.dialect), [row for _, row in fresh])
            ids = {tuple(found[1:]): found[0] for found in inserted}
            for index, row in fresh:
                entry_id = ids.pop(_key(row), None)
                if entry_id is None:  # taken already (or earlier in this batch)
                    skipped.append((index, {**row, "status": "skipped", "error": _DUPLICATE}))
                else:  # as it was written: the row given, its id, the columns' defaults
                    placed[index] = ProcessingEntry.model_validate({"id": entry_id, **row})
        if skipped:
            skipped.sort(key=lambda item: item[0])
            inserted = conn.execute(
                processing_log.insert().returning(*processing_log.c),
                [row for _, row in skipped],
            )
            entries = sorted(map(entry_from_row, inserted), key=lambda entry: entry.id)
            placed.update(zip((index for index, _ in skipped), entries, strict=True))
        if cursors:
            self._advance(conn, cursors, now)
        return [placed[index] for index in sorted(placed)]

    @staticmethod
    def _in_flight(
        conn: sa.Connection, claims: Sequence[Claim]
    ) -> dict[tuple[str, str, int], set[str]]:
        """The event types in flight per (agent, object, version) of exclusive claims."""
        busy: dict[tuple[str, str, int], set[str]] = {}
        if not claims:
            return busy
        object_ids = sorted({c.event.id for c in claims})
        for start in range(0, len(object_ids), _CHUNK):
            rows = conn.execute(
                sa.select(
                    processing_log.c.agent,
                    processing_log.c.object_id,
                    processing_log.c.object_version,
                    processing_log.c.event_type,
                ).where(
                    _IN_FLIGHT, processing_log.c.object_id.in_(object_ids[start : start + _CHUNK])
                )
            )
            for row in rows:
                busy.setdefault((row.agent, row.object_id, row.object_version), set()).add(
                    row.event_type
                )
        return busy

    async def take(self, agents: Iterable[str], limit: int) -> list[Taken]:
        """Start the oldest ``pending`` entries of ``agents`` (at most ``limit``).

        They move to ``processing`` in one statement, so that of several processes
        taking work at once each entry goes to one (on PostgreSQL the others skip the
        rows being taken instead of waiting for them); those without a run get their
        run's id in the same transaction. Returns them, oldest first.
        """
        names = sorted(agents)
        if not names or limit < 1:
            return []
        given = {"agents": names, "most": limit, **self._taker()}
        return await self._transact(functools.partial(_named, taking=_TAKING, given=given))

    async def admit(self, agent: str, admitting: Admitting, room: int) -> Admitted:
        """Start what ``agent``'s admission lets start now (at most ``room``), in one transaction.

        Its waiting entries (pending, held, and processing: their keys are busy), its
        throttles' buckets and its spend are read, :meth:`Admitting.decide` decides, and
        every decision is written in the same transaction: the superseded and the
        merged (linked to the entry that took them), the held and the released, the
        buckets, and the entries taken. On PostgreSQL an advisory lock per agent makes
        the processes that take work decide one at a time (SQLite's writes are one at a
        time already). Returns the entries taken (each with its batch) and when to
        decide again.
        """
        work = functools.partial(self._admit, agent=agent, admitting=admitting, room=room)
        return await self._transact(work)

    def _admit(
        self, conn: sa.Connection, *, agent: str, admitting: Admitting, room: int
    ) -> Admitted:
        if self.db.dialect == "postgresql":
            conn.execute(sa.text("SELECT pg_advisory_xact_lock(hashtext(:key))"), {"key": agent})
        now = datetime.now(UTC)
        waiting = _waiting(conn, agent, with_data=admitting.reads_data)
        buckets = {
            row.key: row.due
            for row in conn.execute(
                sa.select(admission_buckets.c.key, admission_buckets.c.due).where(
                    admission_buckets.c.agent == agent
                )
            )
        }
        cap = conn.scalar(
            sa.select(agents_table.c.spend_cap_usd).where(agents_table.c.name == agent)
        )
        decision = admitting.decide(
            waiting, buckets, functools.partial(_spent, conn), now.timestamp(), room, cap
        )
        _apply(conn, agent, decision, now)
        if not decision.take:
            return Admitted([], decision.wake_at, decision.release_at)
        given = {"ids": [entry_id for entry_id, _ in decision.take], **self._taker()}
        batches = dict(decision.take)
        taken = [
            Taken(found.entry, found.earlier, batches.get(found.entry.id, ()))
            for found in _named(conn, taking=_TAKING_THESE, given=given)
        ]
        return Admitted(taken, decision.wake_at, decision.release_at)

    async def set_run(self, entry_id: int, run_id: str) -> None:
        """The entry's reaction runs as ``run_id`` from now on (its earlier run had ended)."""
        async with self.db.write() as conn:
            await conn.execute(
                processing_log.update().where(processing_log.c.id == entry_id).values(run_id=run_id)
            )

    async def take_one(self, entry_id: int, *, in_order: bool) -> Taken | None:
        """Start one entry (a queued job's): ``pending``, or ``processing`` by a dead worker.

        The caller holds the entry's lease, so an entry still ``processing`` was left by
        a worker that died: it is taken again (at least once for what was in flight).
        With ``in_order`` (a ``queue`` agent) it is taken only once no earlier entry of
        its agent and object is pending or processing. Returns it, or None when it
        cannot be taken (now or ever: see its status).
        """
        earlier = processing_log.alias("earlier")
        query = processing_log.update().where(processing_log.c.id == entry_id, _IN_FLIGHT)
        if in_order:
            query = query.where(
                ~sa.exists().where(
                    earlier.c.agent == processing_log.c.agent,
                    earlier.c.object_id == processing_log.c.object_id,
                    earlier.c.id < processing_log.c.id,
                    earlier.c.status.in_(("pending", "processing")),
                )
            )
        taking = query.values(**_TAKEN).returning(*processing_log.c)
        found = await self._transact(functools.partial(_named, taking=taking, given=self._taker()))
        return found[0] if found else None

    def _taker(self) -> dict[str, Any]:
        """The parameters of :data:`_TAKEN`: this process takes entries, now."""
        return {"taker": self.owner, "taken_at": datetime.now(UTC)}

    async def finish(self, outcomes: Sequence[Finished]) -> set[int]:
        """Record how reactions ended, and their agent runs, in one transaction.

        Only entries still ``processing`` change (one the stuck-job detector marked
        ``abandoned`` stays so); returns the ids of those that did.
        """
        return await self._transact(
            functools.partial(self._finish, outcomes=outcomes, now=datetime.now(UTC))
        )

    @staticmethod
    def _finish(conn: sa.Connection, *, outcomes: Sequence[Finished], now: datetime) -> set[int]:
        ids = sorted(o.entry_id for o in outcomes)
        live: set[int] = set()
        for start in range(0, len(ids), _CHUNK):
            rows = conn.execute(
                sa.select(processing_log.c.id)
                .where(processing_log.c.id.in_(ids[start : start + _CHUNK]))
                .where(processing_log.c.status == "processing")
                .with_for_update()
            )
            live.update(rows.scalars())
        done = [o for o in outcomes if o.entry_id in live]
        if done:
            conn.execute(
                processing_log.update()
                .where(processing_log.c.id == sa.bindparam("entry"))
                .values(
                    status=sa.bindparam("new_status"),
                    error=sa.bindparam("new_error"),
                    run_id=sa.bindparam("new_run_id"),
                    cost_usd=sa.bindparam("new_cost"),
                    updated_at=now,
                ),
                [
                    {
                        "entry": o.entry_id,
                        "new_status": o.status,
                        "new_error": None if o.error is None else storable_text(o.error),
                        "new_run_id": o.run_id,
                        "new_cost": o.cost_usd,
                    }
                    for o in done
                ],
            )
        runs = [
            {
                "agent": o.agent,
                "run_id": o.run_id,
                "trigger": "reaction",
                "started_at": o.started_at,
            }
            for o in outcomes
            if o.run_id is not None
        ]
        if runs:  # a resumed run has its row (the attempt that began it wrote it)
            sql = postgresql if conn.dialect.name == "postgresql" else sqlite
            conn.execute(sql.insert(agent_runs).on_conflict_do_nothing(), runs)
        return live

    async def release(self, entry_ids: Iterable[int]) -> None:
        """Put entries this process was processing back to ``pending`` (for a later start)."""
        ids = sorted(entry_ids)
        if not ids:
            return
        async with self.db.write() as conn:
            for start in range(0, len(ids), _CHUNK):
                await conn.execute(
                    processing_log.update()
                    .where(processing_log.c.id.in_(ids[start : start + _CHUNK]))
                    .where(processing_log.c.status == "processing")
                    .values(status="pending", updated_at=datetime.now(UTC))
                )

    async def abandon_stuck(self, older_than: timedelta) -> list[ProcessingEntry]:
        """Mark entries ``processing`` for longer than ``older_than`` as ``abandoned``."""
        now = datetime.now(UTC)
        limit = now - older_than
        message = (
            f"processing for more than {older_than.total_seconds():g} s (stuck_after): the "
            "process may have died; dispatch the event again to retry"
        )
        async with self.db.write() as conn:
            rows = await conn.execute(
                processing_log.update()
                .where(processing_log.c.status == "processing")
                .where(processing_log.c.updated_at < limit)
                .values(status="abandoned", error=message, updated_at=now)
                .returning(*processing_log.c)
            )
            return sorted((entry_from_row(row) for row in rows), key=lambda e: e.id)

    async def entries(
        self,
        *,
        agent: str | None = None,
        object_id: str | None = None,
        status: str | None = None,
        ids: Iterable[int] | None = None,
        agents: Iterable[str] | None = None,
        events: Iterable[int] | None = None,
    ) -> list[ProcessingEntry]:
        """Entries, oldest first, filtered by any of agent(s), object, status, ids and events."""
        query = sa.select(processing_log).order_by(processing_log.c.id)
        if agent is not None:
            query = query.where(processing_log.c.agent == agent)
        if object_id is not None:
            query = query.where(processing_log.c.object_id == object_id)
        if status is not None:
            query = query.where(processing_log.c.status == status)
        for column, listed in (("id", ids), ("agent", agents), ("event_id", events)):
            if listed is not None:
                query = query.where(processing_log.c[column].in_(sorted(listed)))
        async with self.db.read() as conn:
            return [entry_from_row(row) for row in await conn.execute(query)]

    async def page(
        self,
        *,
        agent: str | None = None,
        object_id: str | None = None,
        status: str | None = None,
        after: str | None = None,
        limit: int = PAGE,
    ) -> Page[ProcessingEntry]:
        """One page of entries, the newest first, filtered by agent, object and status.

        Pass a page's ``next`` as ``after`` for the next one (the cursor is the last
        entry's id). Each page is one indexed read (by ``(agent, status, id)``,
        ``(agent, id)``, ``(status, id)``, ``(object_id, id)`` or the id).

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
        c = processing_log.c
        query = sa.select(processing_log).order_by(c.id.desc()).limit(limit + 1)
        for column, value in (("agent", agent), ("object_id", object_id), ("status", status)):
            if value is not None:
                query = query.where(c[column] == value)
        if after is not None:
            query = query.where(c.id < _entry_cursor(after))
        async with self.db.read() as conn:
            rows = (await conn.execute(query)).all()
        found = [entry_from_row(row) for row in rows[:limit]]
        return Page(found, str(found[-1].id) if len(rows) > limit else None)

    async def lag(
        self, agents: Iterable[str] | None = None, periods: Mapping[str, float] | None = None
    ) -> dict[str, Lag]:
        """How far behind each agent is (of ``agents``, or every agent with entries).

        One grouped query counts the entries of each agent by status (an index-only
        read of ``(agent, status, id)``, also giving the id of each agent's oldest
        ``pending`` entry); the waiting ages come from those entries, read by id. What
        each agent spent is summed over the entries that ended this period (its
        ``periods`` entry in seconds, an hour by default, aligned to the clock), read
        from ``(status, updated_at)``. Agents named in ``agents`` with no entries have
        an empty lag.
        """
        c = processing_log.c
        query = sa.select(c.agent, c.status, sa.func.count(), sa.func.min(c.id)).group_by(
            c.agent, c.status
        )
        names = None if agents is None else sorted(set(agents))
        if names is not None:
            query = query.where(c.agent.in_(names))
        counts: dict[str, dict[str, int]] = {name: {} for name in names or ()}
        oldest: dict[int, str] = {}
        async with self.db.read() as conn:
            for agent, status, count, first in await conn.execute(query):
                counts.setdefault(agent, {})[status] = int(count)
                if status == "pending":
                    oldest[int(first)] = agent
            since: dict[str, datetime] = {}
            if oldest:
                waited = sa.select(c.id, c.created_at).where(c.id.in_(sorted(oldest)))
                since = {oldest[entry]: at for entry, at in await conn.execute(waited)}
            every = {agent: (periods or {}).get(agent, _HOUR) for agent in counts}
            spent = await _spent_by_agent(conn, every)
        now = datetime.now(UTC)
        return {
            agent: Lag.of(
                agent,
                statuses,
                None if agent not in since else max(0.0, (now - since[agent]).total_seconds()),
                spent.get(agent, 0.0),
                every[agent],
            )
            for agent, statuses in sorted(counts.items())
        }

    async def in_flight(self, agents: Iterable[str]) -> int:
        """How many entries of ``agents`` are pending or processing."""
        async with self.db.read() as conn:
            found = await conn.scalar(
                sa.select(sa.func.count())
                .select_from(processing_log)
                .where(_IN_FLIGHT, processing_log.c.agent.in_(sorted(agents)))
            )
        return int(found or 0)


_HOUR = 3600.0
"""The period of what an agent spent, when it has no spend cap of its own."""


async def _spent_by_agent(conn: AsyncConnection, periods: Mapping[str, float]) -> dict[str, float]:
    """What each agent's entries that ended this period (its own) cost, one query a period."""
    spent: dict[str, float] = {}
    now = datetime.now(UTC).timestamp()
    for period in sorted(set(periods.values())):
        agents = sorted(agent for agent, every in periods.items() if every == period)
        start = datetime.fromtimestamp(math.floor(now / period) * period, UTC)
        query = (
            sa.select(processing_log.c.agent, sa.func.sum(processing_log.c.cost_usd))
            .where(
                processing_log.c.status.in_(("completed", "failed")),
                processing_log.c.updated_at >= start,
                processing_log.c.agent.in_(agents),
            )
            .group_by(processing_log.c.agent)
        )
        for agent, cost in await conn.execute(query):
            spent[agent] = float(cost or 0.0)
    return spent


_TAKEN: dict[str, Any] = {
    "status": "processing",
    "updated_at": sa.bindparam("taken_at"),
    "owner": sa.bindparam("taker"),
    "attempts": processing_log.c.attempts + 1,
}
"""What taking an entry writes: ``processing``, by ``taker`` at ``taken_at``, one attempt
more (:meth:`ProcessingLog._taker` gives the parameters)."""

_TAKING = (
    processing_log.update()
    .where(
        processing_log.c.id.in_(
            sa.select(processing_log.c.id)
            .where(
                processing_log.c.status == "pending",
                processing_log.c.agent.in_(sa.bindparam("agents", expanding=True)),
            )
            .order_by(processing_log.c.id)
            .limit(sa.bindparam("most", type_=sa.Integer))
            .with_for_update(skip_locked=True)
        ),
        processing_log.c.status == "pending",
    )
    .values(**_TAKEN)
    .returning(*processing_log.c)
)
"""Taking the oldest ``pending`` entries of some agents (``agents``, at most ``most``), as
``taker`` at ``taken_at``: built once (a process takes work whenever a slot frees)."""

_TAKING_THESE = (
    processing_log.update()
    .where(
        processing_log.c.id.in_(sa.bindparam("ids", expanding=True)),
        processing_log.c.status == "pending",
    )
    .values(**_TAKEN)
    .returning(*processing_log.c)
)
"""Taking the entries ``ids`` that are still ``pending`` (what admission let start)."""

_NAMING = (
    processing_log.update()
    .where(processing_log.c.id == sa.bindparam("entry"))
    .values(run_id=sa.bindparam("new_run_id"))
)
"""Giving a taken entry the id of its run."""


@functools.cache
def _linking(dialect: str) -> tuple[sa.TextClause, sa.TextClause]:
    """Linking entries to the entries that took them, given as a JSON array: made once.

    The first statement moves what the linked entries had taken to the entries taking
    them; the second sets each linked entry's status and link.
    """
    if dialect == "postgresql":
        links = (
            "jsonb_to_recordset(CAST(:links AS jsonb)) "
            "AS links(entry bigint, target bigint, new_status text)"
        )
    else:
        links = (
            "(SELECT json_extract(value, '$.entry') AS entry, "
            "json_extract(value, '$.target') AS target, "
            "json_extract(value, '$.new_status') AS new_status FROM json_each(:links)) AS links"
        )
    relinking = sa.text(
        f"UPDATE processing_log SET superseded_by = links.target FROM {links} "
        "WHERE processing_log.superseded_by = links.entry"
    )
    linking = sa.text(
        "UPDATE processing_log SET status = links.new_status, superseded_by = links.target, "
        f"updated_at = :at FROM {links} WHERE processing_log.id = links.entry"
    ).bindparams(sa.bindparam("at", type_=Timestamp))
    return relinking, linking


def _named(conn: sa.Connection, *, taking: sa.Executable, given: Mapping[str, Any]) -> list[Taken]:
    """Take entries (``taking`` returns their rows) and give each without a run its run's id.

    ``given``: the parameters of ``taking``. Returns them oldest first, each with whether
    it had a run already.
    """
    rows = conn.execute(taking, dict(given))
    taken = sorted(map(entry_from_row, rows), key=lambda entry: entry.id)
    fresh = {entry.id: new_run_id() for entry in taken if entry.run_id is None}
    if fresh:
        conn.execute(
            _NAMING, [{"entry": entry, "new_run_id": run_id} for entry, run_id in fresh.items()]
        )
    return [
        Taken(entry.model_copy(update={"run_id": fresh[entry.id]}), False)
        if entry.id in fresh
        else Taken(entry, True)
        for entry in taken
    ]


def _entry_cursor(text: str) -> int:
    """The id a cursor of the processing log holds.

    Raises:
        ServiceConfigError: It is not one (a whole number from 1 to 2^63 - 1).
    """
    if (
        not (text.isascii() and text.isdigit() and len(text) <= 19)
        or not 1 <= int(text) <= _LAST_ID
    ):
        raise bad_cursor(text, "the processing log")
    return int(text)


def _key(row: Mapping[str, Any]) -> tuple[Any, ...]:
    """A row's key in the processing log (agent, object, version, event type)."""
    return tuple(row[k] for k in _KEY)


_DUPLICATE = "the same event for this object version is pending, processing or completed"
_BUSY = "the agent is processing this object version (concurrency='skip')"


_WAITING_MOST = 10_000
"""Entries of one agent admission looks at in one decision, oldest first."""


def _waiting(conn: sa.Connection, agent: str, *, with_data: bool) -> list[Waiting]:
    """An agent's entries not done (pending, held, processing), oldest first."""
    data = object_events.c.data if with_data else sa.null()
    rows = conn.execute(
        sa.select(
            processing_log.c.id,
            processing_log.c.object_id,
            object_events.c.object_type,
            processing_log.c.event_id,
            processing_log.c.status,
            processing_log.c.created_at,
            data.label("data"),
        )
        .join(object_events, object_events.c.event_id == processing_log.c.event_id)
        .where(
            processing_log.c.agent == agent,
            processing_log.c.status.in_(("pending", "held", "processing")),
        )
        .order_by(processing_log.c.id)
        .limit(_WAITING_MOST)
    )
    return [
        Waiting(
            row.id,
            row.object_id,
            row.object_type,
            row.event_id,
            row.status,
            row.created_at.timestamp(),
            row.data,
        )
        for row in rows
    ]


def _spent(conn: sa.Connection, agent: str | None, since: float) -> float:
    """What the runs of entries that ended since ``since`` cost (an agent's, or all)."""
    query = sa.select(sa.func.coalesce(sa.func.sum(processing_log.c.cost_usd), 0.0)).where(
        processing_log.c.status.in_(("completed", "failed")),
        processing_log.c.updated_at >= datetime.fromtimestamp(since, UTC),
    )
    if agent is not None:
        query = query.where(processing_log.c.agent == agent)
    return float(conn.scalar(query) or 0.0)


def _apply(conn: sa.Connection, agent: str, decision: Decision, now: datetime) -> None:
    """Write what admission decided but the entries taken (see :meth:`ProcessingLog.admit`).

    The superseded and the merged are written by two statements given them all as one
    JSON array, not two statements a row: a feed's burst makes thousands, and each
    statement is a round trip of a thread that may wait for the loop's to give it the
    interpreter back.
    """
    links = [
        {"entry": entry, "target": by, "new_status": status}
        for status, taken in (("superseded", decision.superseded), ("merged", decision.merged))
        for entry, by in taken.items()
    ]
    if links:
        relinking, linking = _linking(conn.dialect.name)
        given = json.dumps(links)
        # what they had taken goes to what takes them: links end at an entry that ran
        conn.execute(relinking, {"links": given})
        conn.execute(linking, {"links": given, "at": now})
    if decision.held:
        conn.execute(
            processing_log.update()
            .where(processing_log.c.id == sa.bindparam("entry"))
            .values(status="held", error=sa.bindparam("why"), updated_at=now),
            [{"entry": entry, "why": why} for entry, why in decision.held.items()],
        )
    if decision.released:
        conn.execute(
            processing_log.update()
            .where(processing_log.c.id.in_(decision.released), processing_log.c.status == "held")
            .values(status="pending", error=None, updated_at=now)
        )
    if decision.buckets:
        conn.execute(
            _bucketing(conn.dialect.name),
            [{"agent": agent, "key": key, "due": due} for key, due in decision.buckets.items()],
        )


@functools.cache
def _claiming(dialect: str) -> Any:
    """Logging fresh entries, each unless its key is taken: made once per dialect."""
    insert = (postgresql if dialect == "postgresql" else sqlite).insert(processing_log)
    return insert.on_conflict_do_nothing(index_elements=list(_KEY), index_where=_ACTIVE).returning(
        processing_log.c.id, *(processing_log.c[name] for name in _KEY)
    )


@functools.cache
def _bucketing(dialect: str) -> Any:
    """Keeping a throttle's bucket (when its next token is due): made once per dialect."""
    insert = (postgresql if dialect == "postgresql" else sqlite).insert(admission_buckets)
    return insert.on_conflict_do_update(
        index_elements=[admission_buckets.c.agent, admission_buckets.c.key],
        set_={"due": insert.excluded.due},
    )
