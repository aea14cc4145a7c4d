"""Claims in the database that make several processes safe: run leases and cron ticks.

A job queue delivers a job again when its worker goes silent, and it goes by idle time
alone: a run longer than the reclaim time, on a live worker, would be delivered again
too. So a worker executes a run only while it holds the run's lease (a row of
``run_leases`` it renews); a job whose run is leased by another live worker is put
back, never executed twice at once. Cron agents are claimed per tick (``cron_ticks``):
of several serving processes whose schedulers fire at the same minute, one runs it.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import sqlalchemy as sa

from reactor.service._objects.db import Database
from reactor.service._objects.schema import cron_ticks, run_leases

__all__ = ["Leases", "claim_tick"]

TICKS_KEPT = timedelta(days=1)


class Leases:
    """The leases of one worker: take, renew and give back runs.

    Args:
        db: The service's database.
        worker: This worker's id.
        ttl: Seconds after which a lease whose heartbeat stopped may be taken over.
    """

    def __init__(self, db: Database, worker: str, ttl: float) -> None:
        self.db, self.worker, self.ttl = db, worker, timedelta(seconds=ttl)

    async def take(self, run_id: str) -> bool:
        """Lease ``run_id`` to this worker; False if another live worker holds it."""
        now = datetime.now(UTC)
        async with self.db.write() as conn:
            taken = await conn.execute(
                run_leases.update()
                .where(
                    run_leases.c.run_id == run_id,
                    sa.or_(
                        run_leases.c.worker == self.worker,
                        run_leases.c.heartbeat_at < now - self.ttl,
                    ),
                )
                .values(worker=self.worker, heartbeat_at=now)
            )
            if taken.rowcount:
                return True
        try:
            async with self.db.write() as conn:
                await conn.execute(
                    run_leases.insert().values(run_id=run_id, worker=self.worker, heartbeat_at=now)
                )
        except sa.exc.IntegrityError:
            return False  # held, and its holder's heartbeat is fresh
        return True

    async def renew(self, run_ids: list[str]) -> None:
        """Renew the heartbeat of this worker's leases of ``run_ids``."""
        if not run_ids:
            return
        async with self.db.write() as conn:
            await conn.execute(
                run_leases.update()
                .where(run_leases.c.run_id.in_(run_ids), run_leases.c.worker == self.worker)
                .values(heartbeat_at=datetime.now(UTC))
            )

    async def give_back(self, run_id: str) -> None:
        """End this worker's lease of ``run_id``."""
        async with self.db.write() as conn:
            await conn.execute(
                run_leases.delete().where(
                    run_leases.c.run_id == run_id, run_leases.c.worker == self.worker
                )
            )

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
