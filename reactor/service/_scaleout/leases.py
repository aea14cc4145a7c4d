"""Claims in the database that make several processes safe: run leases and cron ticks.

A job queue delivers a job again when its worker goes silent, and it goes by idle time
alone: a run longer than the reclaim time, on a live worker, would be delivered again
too. So a worker executes a run only while it holds the run's lease (a row of
``run_leases`` it renews); a job whose run is leased by another live worker is put
back, never executed twice at once. Cron agents are claimed per tick (``cron_ticks``):
of several serving processes whose schedulers fire at the same minute, one runs it.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from reactor._recording.inbox import Wakeup
from reactor.service._objects.db import Database
from reactor.service._objects.schema import cron_ticks, queued_jobs, run_leases
from reactor.service._scaleout.jobs import one_statement

__all__ = ["Leases", "claim_tick", "claim_wakeup"]

TICKS_KEPT = timedelta(days=1)


class Leases:
    """The leases of one worker: take, renew and give back runs, fenced by epochs.

    Each lease has an epoch (a fencing token) that grows when another worker takes it
    over. The worker remembers the epoch it took and when it last proved the lease
    its own (:meth:`owns`): a lease not renewed within ``ttl`` may have been taken over
    meanwhile (a stalled process: GC, SIGSTOP, a slow disk), so what would be written
    under it is refused until a renewal shows it was not, and a renewal that finds it
    taken names the run so that the worker stops it at once.

    Args:
        db: The service's database.
        worker: This worker's id.
        ttl: Seconds after which a lease whose heartbeat stopped may be taken over.
    """

    def __init__(self, db: Database, worker: str, ttl: float) -> None:
        self.db, self.worker, self.ttl = db, worker, timedelta(seconds=ttl)
        self.epochs: dict[str, int] = {}  # run id -> the epoch this worker holds
        self._proved: dict[str, float] = {}  # run id -> when it was last proved (monotonic)

    def owns(self, run_id: str) -> bool:
        """Whether this worker may still write for ``run_id`` (see the class docstring)."""
        proved = self._proved.get(run_id)
        return proved is not None and time.monotonic() - proved < self.ttl.total_seconds()

    async def take(self, run_id: str) -> bool:
        """Lease ``run_id`` to this worker; False if another live worker holds it.

        One statement: a new lease, or one held by this worker or gone silent, taken over
        (a new epoch when it was another's).
        """
        return (await self.take_all([run_id]))[0]

    async def take_all(self, run_ids: Sequence[str]) -> list[bool]:
        """:meth:`take` for each of ``run_ids`` (in order), in one statement for all."""
        now, began = datetime.now(UTC), time.monotonic()
        mine = run_leases.c.worker == self.worker
        insert = (postgresql.insert if self.db.dialect == "postgresql" else sqlite.insert)(
            run_leases
        )
        unique = list(dict.fromkeys(run_ids))  # one row each: an upsert touches a row once
        statement = (
            insert.values(
                [
                    {"run_id": run_id, "worker": self.worker, "heartbeat_at": now, "epoch": 1}
                    for run_id in unique
                ]
            )
            .on_conflict_do_update(
                index_elements=[run_leases.c.run_id],
                set_={
                    "worker": self.worker,
                    "heartbeat_at": now,
                    "epoch": sa.case((mine, run_leases.c.epoch), else_=run_leases.c.epoch + 1),
                },
                where=sa.or_(mine, run_leases.c.heartbeat_at < now - self.ttl),
            )
            .returning(run_leases.c.run_id, run_leases.c.epoch)
        )
        async with one_statement(self.db) as conn:
            rows = (await conn.execute(statement)).all()
        for row in rows:  # the others are held, and their holders' heartbeats are fresh
            self.epochs[row.run_id], self._proved[row.run_id] = int(row.epoch), began
        taken = {row.run_id for row in rows}
        return [run_id in taken for run_id in run_ids]

    async def renew(self, run_ids: list[str]) -> list[str]:
        """Renew this worker's leases of ``run_ids``; the ones it no longer holds."""
        if not run_ids:
            return []
        began = time.monotonic()
        async with self.db.write() as conn:
            rows = await conn.execute(
                run_leases.update()
                .where(run_leases.c.run_id.in_(run_ids), run_leases.c.worker == self.worker)
                .values(heartbeat_at=datetime.now(UTC))
                .returning(run_leases.c.run_id, run_leases.c.epoch)
            )
            held = {row.run_id: int(row.epoch) for row in rows}
        lost = []
        for run_id in run_ids:
            if run_id in held and held[run_id] == self.epochs.get(run_id, held[run_id]):
                self._proved[run_id] = began
            else:
                lost.append(run_id)
                self._proved.pop(run_id, None)
        return lost

    async def give_back(self, run_id: str) -> None:
        """End this worker's lease of ``run_id`` (if it still holds it)."""
        self._proved.pop(run_id, None)
        self.epochs.pop(run_id, None)
        async with self.db.write() as conn:
            await conn.execute(
                run_leases.delete().where(
                    run_leases.c.run_id == run_id, run_leases.c.worker == self.worker
                )
            )

    async def give_back_all(self, run_ids: list[str], forget: list[str]) -> None:
        """End this worker's leases of ``run_ids``; forget the jobs' rows ``forget`` names.

        One transaction for all (the rows of ``queued_jobs`` of the jobs done).
        """
        for run_id in run_ids:
            self._proved.pop(run_id, None)
            self.epochs.pop(run_id, None)
        async with self.db.write() as conn:
            await conn.execute(
                run_leases.delete().where(
                    run_leases.c.run_id.in_(run_ids), run_leases.c.worker == self.worker
                )
            )
            if forget:
                await conn.execute(queued_jobs.delete().where(queued_jobs.c.key.in_(forget)))

    async def holder(self, run_id: str) -> str | None:
        """The worker leasing ``run_id``, if any."""
        async with self.db.read() as conn:
            worker: str | None = await conn.scalar(
                sa.select(run_leases.c.worker).where(run_leases.c.run_id == run_id)
            )
            return worker


async def claim_tick(db: Database, agent: str, now: datetime | None = None) -> bool:
    """Claim the cron tick of ``agent`` at ``now`` (to the minute); False if taken."""
    now = now or datetime.now(UTC)
    tick = now.replace(second=0, microsecond=0)
    try:
        async with db.write() as conn:
            await conn.execute(
                cron_ticks.insert().values(agent=agent, tick_at=tick, claimed_at=now)
            )
            await conn.execute(cron_ticks.delete().where(cron_ticks.c.tick_at < tick - TICKS_KEPT))
    except sa.exc.IntegrityError:
        return False
    return True


async def claim_wakeup(db: Database, wakeup: Wakeup) -> bool:
    """Claim the resumption of a suspended run at its due time; False if taken.

    A claim per run and due time (a row of ``cron_ticks`` named ``wake:<run id>``): of
    several processes that find the run due, one resumes it.
    """
    now = datetime.now(UTC)
    try:
        async with db.write() as conn:
            await conn.execute(
                cron_ticks.insert().values(
                    agent=f"wake:{wakeup.run_id}", tick_at=wakeup.due_at, claimed_at=now
                )
            )
            await conn.execute(cron_ticks.delete().where(cron_ticks.c.tick_at < now - TICKS_KEPT))
    except sa.exc.IntegrityError:
        return False
    return True
