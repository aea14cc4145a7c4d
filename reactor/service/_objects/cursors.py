"""The agents' dispatch cursors: how far in the object store's events each agent was given.

The base of :class:`~reactor.service._objects.processing.ProcessingLog`, with the
write transactions both use: on an SQLite file each is one hop to the database's
writer thread (a synchronous body), not several per statement.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from typing import TypeVar

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from reactor.service._objects.db import Database
from reactor.service._objects.schema import reaction_cursors

__all__ = ["Cursors"]

T = TypeVar("T")


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
        dialect = postgresql if self.db.dialect == "postgresql" else sqlite
        rows = [{"agent": a, "event_id": e, "updated_at": now} for a, e in sorted(cursors.items())]
        insert = dialect.insert(reaction_cursors).values(rows)
        conn.execute(
            insert.on_conflict_do_update(
                index_elements=["agent"],
                set_={"event_id": insert.excluded.event_id, "updated_at": now},
                where=reaction_cursors.c.event_id < insert.excluded.event_id,
            )
        )
