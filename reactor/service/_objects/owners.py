"""Who processes what: the heartbeats of serving processes, and retrying what the dead left.

And how far each agent was given the object store's events (its dispatch cursor, the
base of the processing log, with the write transactions both use).

Each process that takes processing-log entries (``reactor serve``, a worker) writes its
id on the entries it takes (``owner``) and a heartbeat in ``service_processes``. An
entry still ``processing`` whose owner is gone (its heartbeat is stale, or it ran on
this host and its process no longer exists) was cut off by a crash: it goes back to
``pending`` to be taken again, at once rather than after ``stuck_after``, and each
take counts an attempt; past ``max_attempts`` it is ``failed`` with the reason.
"""

from __future__ import annotations

import functools
import os
import re
import socket
import uuid
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from reactor.exceptions import EntryNotFoundError, RetryRefusedError
from reactor.service._objects.changes import ProcessingEntry
from reactor.service._objects.db import Database
from reactor.service._objects.rows import entry_from_row
from reactor.service._objects.schema import processing_log, reaction_cursors, service_processes

__all__ = ["BEAT_EVERY", "Cursors", "Owners", "process_id"]

T = TypeVar("T")

BEAT_EVERY = 5.0
"""Seconds between two heartbeats of a process."""
STALE_AFTER = timedelta(seconds=4 * BEAT_EVERY)
"""A heartbeat older than this is a process that is gone."""

_OWNER = re.compile(r"^(?P<host>.*)[-:](?P<pid>\d+)[-:][0-9a-f]+$")
_HOST = socket.gethostname()


def process_id() -> str:
    """A fresh id for this process: ``host:pid:random``."""
    return f"{_HOST}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def _dead_here(owner: str) -> bool:
    """Whether ``owner`` ran on this host in a process that no longer exists."""
    found = _OWNER.match(owner)
    if found is None or found["host"] != _HOST:
        return False
    pid = int(found["pid"])
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


class Owners:
    """The heartbeats of one database's processes (see the module's docstring).

    Args:
        db: The service's database.
        me: This process's id (the ``owner`` it writes on what it takes).
    """

    def __init__(self, db: Database, me: str) -> None:
        self.db, self.me = db, me

    async def beat(self) -> None:
        """Say this process is alive."""
        now = datetime.now(UTC)
        async with self.db.write() as conn:
            changed = await conn.execute(
                service_processes.update()
                .where(service_processes.c.id == self.me)
                .values(heartbeat_at=now)
            )
            if not changed.rowcount:
                await conn.execute(service_processes.insert().values(id=self.me, heartbeat_at=now))
            await conn.execute(
                service_processes.delete().where(
                    service_processes.c.heartbeat_at < now - 10 * STALE_AFTER
                )
            )

    async def leave(self) -> None:
        """This process stops: forget its heartbeat."""
        async with self.db.write() as conn:
            await conn.execute(service_processes.delete().where(service_processes.c.id == self.me))

    async def retry_orphans(self, max_attempts: int) -> list[ProcessingEntry]:
        """Put entries whose owner is gone back to ``pending`` (``failed`` past the limit).

        Returns the entries changed, as they are now.
        """
        now = datetime.now(UTC)
        async with self.db.read() as conn:
            rows = await conn.execute(
                sa.select(
                    processing_log.c.id, processing_log.c.owner, processing_log.c.attempts
                ).where(
                    processing_log.c.status == "processing",
                    processing_log.c.owner.is_not(None),
                    processing_log.c.owner != self.me,
                )
            )
            taken = rows.all()
            if not taken:
                return []
            alive = set(
                (
                    await conn.execute(
                        sa.select(service_processes.c.id).where(
                            service_processes.c.heartbeat_at >= now - STALE_AFTER
                        )
                    )
                ).scalars()
            )
        gone = [row for row in taken if row.owner not in alive or _dead_here(row.owner)]
        changed: list[ProcessingEntry] = []
        for row in gone:
            failed = row.attempts >= max_attempts
            error = (
                f"the process processing it ({row.owner}) stopped; gave up after "
                f"{row.attempts} attempts (max_attempts={max_attempts}); retry it with "
                "POST /api/processing-log/{id}/retry".replace("{id}", str(row.id))
                if failed
                else f"the process processing it ({row.owner}) stopped; taken again "
                f"(attempt {row.attempts + 1} of {max_attempts})"
            )
            async with self.db.write() as conn:
                found = (
                    await conn.execute(
                        processing_log.update()
                        .where(
                            processing_log.c.id == row.id,
                            processing_log.c.status == "processing",
                            processing_log.c.owner == row.owner,
                        )
                        .values(
                            status="failed" if failed else "pending",
                            owner=None,
                            error=error,
                            updated_at=datetime.now(UTC),
                        )
                        .returning(*processing_log.c)
                    )
                ).first()
            if found is not None:
                changed.append(entry_from_row(found))
        return changed

    async def retry(self, entry_id: int) -> ProcessingEntry:
        """Put a ``failed`` or ``abandoned`` entry back to ``pending``, its attempts anew.

        Raises:
            EntryNotFoundError: There is no such entry.
            RetryRefusedError: It is in another status, or the same event is pending,
                processing or completed for its agent in another entry already.
        """
        try:
            async with self.db.write() as conn:
                found = (
                    await conn.execute(
                        processing_log.update()
                        .where(
                            processing_log.c.id == entry_id,
                            processing_log.c.status.in_(("failed", "abandoned")),
                        )
                        .values(
                            status="pending",
                            owner=None,
                            attempts=0,
                            error=None,
                            updated_at=datetime.now(UTC),
                        )
                        .returning(*processing_log.c)
                    )
                ).first()
        except sa.exc.IntegrityError:
            raise RetryRefusedError(
                f"Entry {entry_id}'s event is pending, processing or completed for its agent "
                "in another entry already; nothing to retry.",
                entry_id=entry_id,
                status="duplicate",
            ) from None
        if found is not None:
            return entry_from_row(found)
        async with self.db.read() as conn:
            status = await conn.scalar(
                sa.select(processing_log.c.status).where(processing_log.c.id == entry_id)
            )
        if status is None:
            raise EntryNotFoundError(f"No processing-log entry {entry_id}.", entry_id=entry_id)
        raise RetryRefusedError(
            f"Entry {entry_id} is {status}: only a failed or abandoned entry is retried.",
            entry_id=entry_id,
            status=str(status),
        )


class Cursors:
    """The ``reaction_cursors`` table of one database."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def _transact(self, work: Callable[[sa.Connection], T]) -> T:
        """Run ``work(conn)`` in a write transaction: on SQLite, one hop to the writer thread.

        Elsewhere on an async connection (the object writes' ordering lock is not taken).
        """
        if self.db.dialect == "sqlite":
            return await self.db.run_write(work)
        async with self.db.write() as conn:
            return await conn.run_sync(work)

    async def cursors(self, agents: Iterable[str]) -> dict[str, int]:
        """Each agent's dispatch position; a new agent starts at 0 (every stored event)."""
        names = sorted(set(agents))
        if not names:
            return {}
        async with self.db.read() as conn:
            rows = await conn.execute(
                sa.select(reaction_cursors).where(reaction_cursors.c.agent.in_(names))
            )
            found = {row.agent: int(row.event_id) for row in rows}
        return {name: found.get(name, 0) for name in names}

    async def stored_cursor(self, agent: str) -> int | None:
        """The agent's stored dispatch position (``None`` for an agent never dispatched to)."""
        async with self.db.read() as conn:
            found = await conn.scalar(
                sa.select(reaction_cursors.c.event_id).where(reaction_cursors.c.agent == agent)
            )
        return None if found is None else int(found)

    async def set_cursor(self, agent: str, event_id: int) -> None:
        """Start an agent at ``event_id``: it is given the events after it (never earlier)."""
        await self._transact(
            functools.partial(self._advance, cursors={agent: event_id}, now=datetime.now(UTC))
        )

    async def forget_cursor(self, agent: str) -> None:
        """Forget an agent's position (it was deleted; one made again starts afresh)."""
        async with self.db.write() as conn:
            await conn.execute(reaction_cursors.delete().where(reaction_cursors.c.agent == agent))

    def _advance(self, conn: sa.Connection, cursors: Mapping[str, int], now: datetime) -> None:
        rows = [{"agent": a, "event_id": e, "updated_at": now} for a, e in sorted(cursors.items())]
        conn.execute(_advancing(self.db.dialect), rows)


@functools.cache
def _advancing(dialect: str) -> Any:
    """Moving agents' cursors forward (never back): one statement per dialect, made once.

    Dispatch moves them with every batch it logs, one event at a time when writes
    trickle in: the statement is built and compiled once, not per batch.
    """
    insert = (postgresql if dialect == "postgresql" else sqlite).insert(reaction_cursors)
    return insert.on_conflict_do_update(
        index_elements=["agent"],
        set_={"event_id": insert.excluded.event_id, "updated_at": insert.excluded.updated_at},
        where=reaction_cursors.c.event_id < insert.excluded.event_id,
    )
