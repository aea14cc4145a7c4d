"""The jobs on the queue, known to the database too: a job Redis loses is queued again.

Redis keeps the stream of jobs; a Redis restarted without its data (no persistence, or
a crash between two snapshots) forgets them, and a run queued there would stay queued
for ever. So each job also has a row of ``queued_jobs`` (its key: the run id, or
``reaction:<entry id>``) from the moment it is queued until a worker acknowledges it
(a run's row goes with its lease, once its log is durable and just before that),
and a marker in Redis (``<prefix>:job:<key>``) that lives and dies with the stream's data.
A row whose marker is gone is a job Redis lost: :meth:`QueuedJobs.lost` finds them, and
whoever sets the marker again first (``SET NX``: the serving process queueing it, or
one of the workers looking after a reconnect) queues the job again, once.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection

from reactor.service._objects.db import Database
from reactor.service._objects.schema import queued_jobs

if TYPE_CHECKING:  # redis is imported where a queue is configured, not by every service
    from reactor._signals.redisclient import Redis

__all__ = ["QueuedJobs", "RedisKeys", "one_statement", "unsynced"]

PAGE = 500
"""Rows of ``queued_jobs`` looked at per round trip to Redis."""


@dataclasses.dataclass(frozen=True)
class RedisKeys:
    """The names a service keeps in its Redis, each under its prefix.

    Two applications on one Redis (one database number) keep apart by their prefixes
    (``REACTOR_REDIS_PREFIX``, ``reactor`` by default): ``<prefix>:jobs`` is the stream
    of jobs, read by the consumer group ``<prefix>-workers``; ``<prefix>:job:<key>``
    marks a job on the stream, ``<prefix>:queued:<run>`` a run not started yet,
    ``<prefix>:waiting:<key>`` a job waiting for a worker with its code, and
    ``<prefix>:worker:<id>`` a worker's heartbeat.
    """

    prefix: str = "reactor"

    @property
    def stream(self) -> str:
        """The stream of jobs."""
        return f"{self.prefix}:jobs"

    @property
    def group(self) -> str:
        """The workers' consumer group."""
        return f"{self.prefix}-workers"

    @property
    def job(self) -> str:
        """Prefix of the markers of the jobs on the stream."""
        return f"{self.prefix}:job:"

    @property
    def queued(self) -> str:
        """Prefix of the markers of the runs queued and not started yet."""
        return f"{self.prefix}:queued:"

    @property
    def waiting(self) -> str:
        """Prefix of the keys of the jobs waiting for a worker with their code."""
        return f"{self.prefix}:waiting:"

    @property
    def worker(self) -> str:
        """Prefix of the workers' heartbeats."""
        return f"{self.prefix}:worker:"


class QueuedJobs:
    """The rows of ``queued_jobs`` and their markers in Redis (see the module's docstring).

    Args:
        db: The service's database.
        redis: Makes a client of the queue's Redis (its connection pool).
        keys: The names of the service's keys there (a job's marker, and the key of a
            job waiting for a worker with its code, which goes with it).
    """

    def __init__(self, db: Database, redis: Callable[[], Redis], keys: RedisKeys) -> None:
        self.db, self._redis, self.keys = db, redis, keys

    async def add(self, key: str, job: dict[str, Any]) -> None:
        """Remember ``job`` (queued under ``key``) until :meth:`remove`.

        One statement (a job queued again, the resume of a queued run, replaces it).
        """
        now = datetime.now(UTC)
        statement: postgresql.Insert | sqlite.Insert
        if self.db.dialect == "postgresql":
            row = sa.select(
                sa.literal(key, queued_jobs.c.key.type),
                sa.literal(job, queued_jobs.c.job.type),
                sa.literal(now, queued_jobs.c.queued_at.type),
            ).where(unsynced())
            statement = postgresql.insert(queued_jobs).from_select(["key", "job", "queued_at"], row)
            statement = statement.on_conflict_do_update(
                index_elements=[queued_jobs.c.key], set_={"job": statement.excluded.job}
            )
        else:
            statement = sqlite.insert(queued_jobs).values(key=key, job=job, queued_at=now)
            statement = statement.on_conflict_do_update(
                index_elements=[queued_jobs.c.key], set_={"job": statement.excluded.job}
            )
        async with one_statement(self.db) as conn:
            await conn.execute(statement)

    async def mark(self, key: str) -> bool:
        """Mark ``key``'s job as on the stream; False if it was already (do not queue it)."""
        async with self._redis() as redis:
            return bool(await redis.set(self.keys.job + key, "1", nx=True))

    async def remove(self, key: str) -> None:
        """The job was acknowledged (or never went out): forget its row, then its marker.

        In that order: a marker found missing while the row is still there means Redis
        lost the job, never that it was just done.
        """
        async with one_statement(self.db) as conn:
            await conn.execute(
                queued_jobs.delete().where(queued_jobs.c.key == key, *self._unsynced())
            )
        async with self._redis() as redis:
            await redis.delete(self.keys.job + key, self.keys.waiting + key)

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
                present = await redis.mget([self.keys.job + row.key for row in rows])
            missing = [row for row, there in zip(rows, present, strict=True) if there is None]
            for row in missing:
                if not await self._still_queued(row.key):
                    continue  # acknowledged meanwhile: its marker went after its row
                if await self.mark(row.key):
                    await kick(row.key, dict(row.job))
                    requeued.append(row.key)

    async def find(self, key: str) -> tuple[dict[str, Any], datetime] | None:
        """``key``'s job and when it was queued, while it is not acknowledged (else None)."""
        async with self.db.read() as conn:
            row = (
                await conn.execute(
                    sa.select(queued_jobs.c.job, queued_jobs.c.queued_at).where(
                        queued_jobs.c.key == key
                    )
                )
            ).first()
        return None if row is None else (dict(row.job), row.queued_at)

    def _unsynced(self) -> list[sa.ColumnElement[bool]]:
        """What commits a statement of ``queued_jobs`` without waiting for the disk.

        (:func:`unsynced`; a no-op on SQLite.)
        """
        return [unsynced()] if self.db.dialect == "postgresql" else []

    async def _still_queued(self, key: str) -> bool:
        async with self.db.read() as conn:
            found = await conn.scalar(sa.select(queued_jobs.c.key).where(queued_jobs.c.key == key))
        return found is not None


@contextlib.asynccontextmanager
async def one_statement(db: Database) -> AsyncIterator[AsyncConnection]:
    """A connection for one write statement, committed as it ends (PostgreSQL).

    Its own transaction, without a ``BEGIN`` and a ``COMMIT`` of its own: two round
    trips fewer than :meth:`Database.write`. On SQLite, :meth:`Database.write` (behind
    the lock of this process's writers).
    """
    if db.dialect != "postgresql":
        async with db.write() as conn:
            yield conn
        return
    async with db.engine.connect() as conn:
        yield await conn.execution_options(isolation_level="AUTOCOMMIT")


def unsynced() -> sa.ColumnElement[bool]:
    """A condition (always true) that has its statement commit without waiting for the disk.

    PostgreSQL's ``synchronous_commit`` off for the statement's transaction: a row of
    ``queued_jobs`` (or a lease) lost with a database crash matters only if Redis loses
    its data then too (or the worker dies then too: its lease runs out). A waited-for
    commit would cost each job one flush of the database's log.
    """
    return sa.func.set_config("synchronous_commit", "off", True).is_not(None)
