"""Cron agents on APScheduler: one job per enabled agent, replaced the moment it changes.

Schedules are standard 5-field cron expressions (``minute hour day month weekday``, in
UTC). APScheduler 3 counts weekdays from Monday (``0`` is Monday), where cron counts
from Sunday (``0`` and ``7`` are Sunday): :func:`cron_trigger` translates the weekday
field, so ``0 9 * * 1-5`` means weekdays at 09:00, as in any crontab.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

from apscheduler.job import Job
from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.interval import IntervalTrigger

__all__ = ["CronJobs", "cron_problem", "cron_trigger"]

_DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat", "sun")
_NUMBER = re.compile(r"^\d+$")
_EXAMPLE = "e.g. '*/5 * * * *' (every 5 minutes) or '0 9 * * 1-5' (weekdays at 09:00)"


def _number(text: str) -> int:
    """A weekday of a crontab (0-7, or a name) as cron counts: 0 (and 7) is Sunday."""
    if _NUMBER.match(text):
        number = int(text)
        if number > 7:
            raise ValueError(f"the weekday {number} is not between 0 and 7 (0 and 7 are Sunday)")
        return number
    if text.lower() not in _DAYS:
        raise ValueError(f"{text!r} is not a weekday (0-7 or sun, mon, ..., sat)")
    return _DAYS.index(text.lower())


def _weekday_item(item: str) -> list[str]:
    """One comma-separated item of the weekday field, as APScheduler's day names."""
    span, slash, step = item.partition("/")
    if span == "*" and not slash:
        return ["*"]
    low, dash, high = ("0", "-", "6") if span == "*" else span.partition("-")
    first = _number(low)
    last = _number(high) if dash else (6 if slash else first)
    every = int(step) if slash and _NUMBER.match(step) else 1
    if slash and (every < 1 or not _NUMBER.match(step)):
        raise ValueError(f"the step of {item!r} is not a whole number of at least 1")
    if last < first:
        raise ValueError(f"the weekday range {item!r} runs backwards")
    return sorted({_DAYS[day] for day in range(first, last + 1, every)}, key=_DAYS.index)


def cron_trigger(expression: str) -> CronTrigger:
    """The trigger of a standard 5-field cron expression, in UTC.

    Raises:
        ValueError: The expression is not a valid 5-field cron expression.
    """
    fields = expression.split()
    if len(fields) != 5:
        raise ValueError(f"it has {len(fields)} fields, cron has 5 (minute hour day month weekday)")
    minute, hour, day, month, weekday = fields
    weekdays = ",".join(part for item in weekday.split(",") for part in _weekday_item(item))
    return CronTrigger(
        minute=minute, hour=hour, day=day, month=month, day_of_week=weekdays, timezone=UTC
    )


def cron_problem(expression: object) -> str | None:
    """Why ``expression`` cannot be a schedule (``None`` when it can)."""
    if not isinstance(expression, str) or not expression.strip():
        return f"cron_schedule must be a 5-field cron expression, {_EXAMPLE}; got {expression!r}"
    try:
        cron_trigger(expression)
    except ValueError as exc:
        return f"cron_schedule {expression!r} is not a valid cron expression: {exc}; {_EXAMPLE}"
    return None


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
