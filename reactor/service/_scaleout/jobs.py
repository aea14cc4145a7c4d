"""The jobs on the queue, known to the database too: a job Redis loses is queued again.

Redis keeps the stream of jobs; a Redis restarted without its data (no persistence, or
a crash between two snapshots) forgets them, and a run queued there would stay queued
for ever. So each job also has a row of ``queued_jobs`` (its key: the run id, or
``reaction:<entry id>``) from the moment it is queued until a worker acknowledges it
(a run's row goes with its lease, once its log is durable and just before that),
and a marker in Redis (``reactor:job:<key>``) that lives and dies with the stream's data.
A row whose marker is gone is a job Redis lost: :meth:`QueuedJobs.lost` finds them, and
whoever sets the marker again first (``SET NX``: the serving process queueing it, or
one of the workers looking after a reconnect) queues the job again, once.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from redis.asyncio import Redis
from sqlalchemy.ext.asyncio import AsyncConnection

from reactor.service._objects.db import Database
from reactor.service._objects.schema import queued_jobs

__all__ = ["JOB_KEYS", "WAITING_KEYS", "QueuedJobs"]

JOB_KEYS = "reactor:job:"
"""Prefix of the markers of the jobs on the stream: ``reactor:job:<key>``."""
WAITING_KEYS = "reactor:waiting:"
"""Prefix of the keys of jobs waiting for a worker with their code (``reactor:waiting:
<key>``, :mod:`reactor.service._scaleout.waiting`): they go with the job's marker."""
PAGE = 500
"""Rows of ``queued_jobs`` looked at per round trip to Redis."""


class QueuedJobs:
    """The rows of ``queued_jobs`` and their markers in Redis (see the module's docstring).

    Args:
        db: The service's database.
        redis: Makes a client of the queue's Redis (its connection pool).
    """

    def __init__(self, db: Database, redis: Callable[[], Redis]) -> None:
        self.db, self._redis = db, redis

    async def add(self, key: str, job: dict[str, Any]) -> None:
        """Remember ``job`` (queued under ``key``) until :meth:`remove`."""
        try:
            async with self.db.write() as conn:
                await self._unsynced(conn)
                await conn.execute(
                    queued_jobs.insert().values(key=key, job=job, queued_at=datetime.now(UTC))
                )
        except sa.exc.IntegrityError:  # queued before (a resume of a queued run)
            async with self.db.write() as conn:
                await conn.execute(
                    queued_jobs.update().where(queued_jobs.c.key == key).values(job=job)
                )

    async def mark(self, key: str) -> bool:
        """Mark ``key``'s job as on the stream; False if it was already (do not queue it)."""
        async with self._redis() as redis:
            return bool(await redis.set(JOB_KEYS + key, "1", nx=True))

    async def remove(self, key: str) -> None:
        """The job was acknowledged (or never went out): forget its row, then its marker.

        In that order: a marker found missing while the row is still there means Redis
        lost the job, never that it was just done.
        """
        async with self.db.write() as conn:
            await self._unsynced(conn)
            await conn.execute(queued_jobs.delete().where(queued_jobs.c.key == key))
        async with self._redis() as redis:
            await redis.delete(JOB_KEYS + key, WAITING_KEYS + key)

    async def requeue_lost(
        self, kick: Callable[[str, dict[str, Any]], Awaitable[None]]
    ) -> list[str]:
        """Queue again (with ``kick``) each job whose row is here and marker is gone.

        Several processes may look at once: the one that sets a marker again queues that
        job. Returns the keys this process queued again.
        """
        requeued: list[str] = []
        after = ""
        while True:
            async with self.db.read() as conn:
                rows = (
                    await conn.execute(
                        sa.select(queued_jobs.c.key, queued_jobs.c.job)
                        .where(queued_jobs.c.key > after)
                        .order_by(queued_jobs.c.key)
                        .limit(PAGE)
                    )
                ).all()
            if not rows:
                return requeued
            after = rows[-1].key
            async with self._redis() as redis:
                present = await redis.mget([JOB_KEYS + row.key for row in rows])
            missing = [row for row, there in zip(rows, present, strict=True) if there is None]
            for row in missing:
                if not await self._still_queued(row.key):
                    continue  # acknowledged meanwhile: its marker went after its row
                if await self.mark(row.key):
                    await kick(row.key, dict(row.job))
                    requeued.append(row.key)

    async def _unsynced(self, conn: AsyncConnection) -> None:
        """Commit without waiting for the disk (PostgreSQL); it would cost each job one.

        A row lost with a database crash matters only if Redis loses its data then too.
        """
        if self.db.dialect == "postgresql":
            await conn.execute(sa.text("SET LOCAL synchronous_commit TO OFF"))

    async def _still_queued(self, key: str) -> bool:
        async with self.db.read() as conn:
            found = await conn.scalar(sa.select(queued_jobs.c.key).where(queued_jobs.c.key == key))
        return found is not None
