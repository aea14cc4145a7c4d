"""The ``blocked_runs`` table: unfinished runs the service does not resume by itself.

A run whose graph changed what its log says was done (a deploy changed an agent that
had already acted) is not resumed when the service starts: it is *blocked*, with the
reason, until someone resumes it anyway (``POST /api/runs/{id}/resume?force=true``) or
code that can resume it is deployed. The table is shared by every serving process
and worker, so each shows the same runs blocked.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from reactor.service._objects.db import Database
from reactor.service._objects.schema import blocked_runs

__all__ = ["BlockedRuns"]


class BlockedRuns:
    """The blocked runs of one database."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def block(self, run_id: str, reason: str) -> None:
        """Block ``run_id`` (again, with the latest reason)."""
        dialect = postgresql if self.db.dialect == "postgresql" else sqlite
        row = {"run_id": run_id, "reason": reason, "blocked_at": datetime.now(UTC)}
        async with self.db.write() as conn:
            await conn.execute(
                dialect.insert(blocked_runs)
                .values(**row)
                .on_conflict_do_update(
                    index_elements=["run_id"],
                    set_={"reason": row["reason"], "blocked_at": row["blocked_at"]},
                )
            )

    async def unblock(self, run_id: str) -> None:
        """The run is resumed (or gone): it is not blocked any more."""
        async with self.db.write() as conn:
            await conn.execute(blocked_runs.delete().where(blocked_runs.c.run_id == run_id))

    async def reasons(self, run_ids: Iterable[str] | None = None) -> dict[str, str]:
        """Why each blocked run (of ``run_ids``, or all) is blocked."""
        query = sa.select(blocked_runs.c.run_id, blocked_runs.c.reason)
        if run_ids is not None:
            query = query.where(blocked_runs.c.run_id.in_(list(run_ids)))
        async with self.db.read() as conn:
            rows = (await conn.execute(query)).all()
        return {str(run_id): str(reason) for run_id, reason in rows}
