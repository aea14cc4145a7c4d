"""Schedules: standard 5-field cron expressions, as agents and the service take them.

``agent(schedule="0 9 * * 1-5")`` and an ``agents`` row's ``cron_schedule`` are
``minute hour day month weekday`` in UTC. APScheduler 3 counts weekdays from Monday
(``0`` is Monday), where cron counts from Sunday (``0`` and ``7`` are Sunday):
:func:`cron_trigger` translates the weekday field, so ``0 9 * * 1-5`` means weekdays
at 09:00, as in any crontab. APScheduler (the ``service`` extra) is imported only when a
schedule is read.
"""

from __future__ import annotations

import re
from datetime import UTC
from typing import TYPE_CHECKING

from reactor.exceptions._extras import importing

if TYPE_CHECKING:
    from apscheduler.triggers.cron import CronTrigger

__all__ = ["check_schedule", "cron_problem", "cron_trigger"]

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
    with importing("service", what="A schedule (agent(schedule=...), cron_schedule)"):
        from apscheduler.triggers.cron import CronTrigger

    return CronTrigger(
        minute=minute, hour=hour, day=day, month=month, day_of_week=weekdays, timezone=UTC
    )


def cron_problem(expression: object, field: str = "cron_schedule") -> str | None:
    """Why ``expression`` cannot be a schedule (``None`` when it can); ``field`` names it."""
    if not isinstance(expression, str) or not expression.strip():
        return f"{field} must be a 5-field cron expression, {_EXAMPLE}; got {expression!r}"
    try:
        cron_trigger(expression)
    except ValueError as exc:
        return f"{field} {expression!r} is not a valid cron expression: {exc}; {_EXAMPLE}"
    return None


def check_schedule(schedule: object, reaction: object) -> None:
    """Check an agent's ``schedule``.

    Raises:
        ValueError: It is not a cron expression, or the agent is a reaction agent too.
    """
    problem = cron_problem(schedule, "schedule")
    if problem is not None:
        raise ValueError(problem + ".")
    if reaction is not None:
        raise ValueError(
            "an agent runs on a schedule or on object events, not both: drop schedule= or "
            "reaction=."
        )
