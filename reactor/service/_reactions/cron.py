"""Cron agents on APScheduler: one job per enabled agent, replaced the moment it changes.

Schedules are standard 5-field cron expressions (``minute hour day month weekday``, in
UTC), read by :mod:`reactor._agents.schedule`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

from apscheduler.job import Job
from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.triggers.interval import IntervalTrigger

from reactor._agents.schedule import cron_problem, cron_trigger

__all__ = ["CronJobs", "cron_problem", "cron_trigger"]


class CronJobs:
    """The jobs of the cron agents: ``set(name, expression)`` adds, replaces or removes one.

    A job that comes due calls ``fire(name)`` on the event loop (a run is started
    there). Missed times are run once, within a minute (coalesced), and a job never
    overlaps itself.

    Args:
        fire: Starts the agent's run.
    """

    def __init__(self, fire: Callable[[str], Awaitable[None]]) -> None:
        self._fire = fire
        self._scheduler = AsyncIOScheduler(timezone=UTC)
        self._expressions: dict[str, str] = {}

    @property
    def running(self) -> bool:
        """Whether jobs come due (between :meth:`start` and :meth:`stop`)."""
        return bool(self._scheduler.running) and not self._paused

    _paused = False

    def start(self) -> None:
        """Start the scheduler (in the running event loop)."""
        if not self._scheduler.running:
            self._scheduler.start()
        self._paused = False

    def pause(self) -> None:
        """Let no job come due any more (a stopping service takes no new work)."""
        if self._scheduler.running:
            self._scheduler.pause()
        self._paused = True

    def stop(self) -> None:
        """Stop the scheduler; the jobs are forgotten."""
        if self._scheduler.running:
            self._scheduler.shutdown(wait=False)
        self._expressions.clear()

    def set(self, name: str, expression: str | None) -> None:
        """Schedule ``name`` on ``expression`` (replacing its job), or unschedule it (None).

        Raises:
            ValueError: The expression is not a valid cron expression.
        """
        job = self._job(name)
        if expression is None:
            if job is not None:
                job.remove()
            self._expressions.pop(name, None)
            return
        trigger = cron_trigger(expression)
        self._scheduler.add_job(
            self._due,
            trigger,
            args=[name],
            id=name,
            name=f"agent {name}",
            replace_existing=True,
            coalesce=True,
            max_instances=1,
            misfire_grace_time=60,
        )
        self._expressions[name] = expression

    def daily(self, job: str, fire: Callable[[], Awaitable[object]]) -> None:
        """Run ``fire()`` now and then every day (housekeeping, not an agent's schedule)."""

        async def due() -> None:  # a coroutine function: APScheduler awaits it in the loop
            await fire()

        self._scheduler.add_job(
            due,
            IntervalTrigger(days=1, timezone=UTC),
            id=job,
            name=job,
            replace_existing=True,
            coalesce=True,
            max_instances=1,
            next_run_time=datetime.now(UTC),
        )

    async def _due(self, name: str) -> None:
        """The job of every agent (a coroutine function: APScheduler awaits it in the loop)."""
        await self._fire(name)

    def run_now(self, name: str) -> bool:
        """Make ``name``'s job come due now (its schedule goes on); return whether it has one."""
        job = self._job(name)
        if job is None:
            return False
        job.modify(next_run_time=datetime.now(UTC))
        return True

    def next_run_at(self, name: str) -> datetime | None:
        """When ``name`` runs next (UTC), or ``None`` when it is not scheduled."""
        job = self._job(name)
        if job is None or self._paused:
            return None
        when = getattr(job, "next_run_time", None)
        if not isinstance(when, datetime):
            when = job.trigger.get_next_fire_time(None, datetime.now(UTC))
        return when.astimezone(UTC) if isinstance(when, datetime) else None

    def scheduled(self) -> dict[str, str]:
        """The scheduled agents and their expressions."""
        return dict(self._expressions)

    def _job(self, name: str) -> Job | None:
        job = self._scheduler.get_job(name)
        return job if isinstance(job, Job) else None
