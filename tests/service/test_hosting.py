"""Agents by their rows, cron schedules and the service's runs, in process."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from hypothesis import given
from hypothesis import strategies as st

from reactor import AgentConfigError, RunNotFoundError, ScriptedProvider, agent
from reactor.service import (
    AgentNotFoundError,
    ObjectStore,
    ReactionService,
)
from reactor.service._objects.schema import agent_runs
from reactor.service._reactions.cron import cron_problem, cron_trigger
from reactor.service._reactions.definitions import AgentChanges, AgentDefinition
from tests.service.support import TYPES

SUNDAY = datetime(2026, 11, 22, tzinfo=UTC)


@given(st.integers(min_value=0, max_value=7))
def test_a_cron_weekday_counts_from_sunday(day: int) -> None:
    fire = cron_trigger(f"0 0 * * {day}").get_next_fire_time(None, SUNDAY - timedelta(seconds=1))
    assert fire is not None
    assert (fire - SUNDAY).days == day % 7


@pytest.mark.parametrize(
    ("expression", "days"),
    [
        pytest.param("0 0 * * 1-5", ["Mon", "Tue", "Wed", "Thu", "Fri"], id="weekdays"),
        pytest.param("0 0 * * 0-2", ["Sun", "Mon", "Tue"], id="from-sunday"),
        pytest.param("0 0 * * */2", ["Sun", "Tue", "Thu", "Sat"], id="every-other"),
        pytest.param("0 0 * * sat,sun", ["Sun", "Sat"], id="names"),
    ],
)
def test_cron_weekday_fields_mean_what_crontab_means(expression: str, days: list[str]) -> None:
    trigger, seen, now = cron_trigger(expression), [], SUNDAY - timedelta(seconds=1)
    for _ in range(7):
        now = trigger.get_next_fire_time(None, now + timedelta(seconds=1))
        if now >= SUNDAY + timedelta(days=7):
            break
        seen.append(now.strftime("%a"))
    assert seen == days


@pytest.mark.parametrize(
    ("expression", "problem"),
    [
        pytest.param(
            "* * *", "it has 3 fields, cron has 5 (minute hour day month weekday)", id="3"
        ),
        pytest.param(
            "0 0 * * 8", "the weekday 8 is not between 0 and 7 (0 and 7 are Sunday)", id="8"
        ),
        pytest.param("0 0 * * 5-1", "the weekday range '5-1' runs backwards", id="backwards"),
    ],
)
def test_a_bad_cron_expression_says_why(expression: str, problem: str) -> None:
    assert cron_problem(expression) == (
        f"cron_schedule {expression!r} is not a valid cron expression: {problem}; e.g. "
        "'*/5 * * * *' (every 5 minutes) or '0 9 * * 1-5' (weekdays at 09:00)"
    )


async def _runs(service: ReactionService) -> list[dict[str, Any]]:
    """The rows of ``agent_runs``, each with its run's status from the store's row."""
    async with service.db.read() as conn:
        rows = [dict(row._mapping) for row in await conn.execute(sa.select(agent_runs))]
    record = service.host.record
    assert record is not None
    for row in rows:
        assert "status" not in row  # kept in one place: the store's row of the run
        try:
            row["status"] = (await asyncio.to_thread(record.info, row["run_id"])).status
        except RunNotFoundError:
            row["status"] = None
    return rows


async def test_a_scheduled_run_is_recorded_in_agent_runs(url: str) -> None:
    calls: list[str] = []

    def helped(ctx: object) -> str:
        calls.append("ran")
        return "ok"

    helper = agent(run=helped)
    async with (
        ObjectStore(url, types=TYPES) as objects,
        ReactionService(objects=objects, agents={"helper": helper}) as service,
    ):
        changes = AgentChanges(trigger_type="cron", cron_schedule="0 0 1 1 *")
        record = await service.catalog.update("helper", changes)
        assert record.next_run_at == datetime(datetime.now(UTC).year + 1, 1, 1, tzinfo=UTC)
        assert service.cron.run_now("helper")
        for _ in range(200):
            rows = await _runs(service)
            if rows and rows[0]["status"] == "completed":
                break
            await asyncio.sleep(0.05)
    (row,) = rows
    assert (row["agent"], row["trigger"], row["status"]) == ("helper", "cron", "completed")
    assert calls == ["ran"]
    async with (
        ObjectStore(url, types=TYPES) as objects,
        ReactionService(objects=objects, agents={"helper": helper}) as service,
    ):  # the schedule an operator gave a code agent survives a restart
        again = await service.catalog.record("helper")
        assert (again.trigger_type, again.cron_schedule) == ("cron", "0 0 1 1 *")
        assert again.next_run_at == record.next_run_at


async def test_a_reaction_agent_made_by_its_row_reacts_to_changes_from_then_on(url: str) -> None:
    provider = ScriptedProvider(default=lambda request: {"reasoning": "noted", "operations": []})
    async with (
        ObjectStore(url, types=TYPES) as objects,
        ReactionService(objects=objects, provider=provider) as service,
    ):
        await objects.create("Person", {"name": "Before"})
        definition = AgentDefinition(
            name="noter",
            prompt="Note {{ object.data.name }}",
            trigger_type="reaction",
            reaction_config={"types": ["Person"], "events": ["created"]},
        )
        await service.catalog.create(definition)
        after = await objects.create("Person", {"name": "After"})
        await service.idle(timeout=60)
        log = await service.processing_log(agent="noter")
        assert [(e.object_id, e.status) for e in log] == [(after.id, "completed")]
        await service.catalog.update("noter", AgentChanges(enabled=False))
        await objects.create("Person", {"name": "Unseen"})
        await service.idle(timeout=60)
        assert len(await service.processing_log(agent="noter")) == 1
        await service.catalog.delete("noter")
        with pytest.raises(AgentNotFoundError, match=r"^No agent named 'noter'; list the agents"):
            await service.catalog.record("noter")


def test_a_row_with_a_bad_prompt_names_the_field() -> None:
    from reactor.service._reactions.definitions import build_agent

    with pytest.raises(AgentConfigError, match=r"^Agent 'x': prompt: "):
        build_agent("x", {"prompt": "{{ unclosed", "trigger_type": "manual"})
    with pytest.raises(AgentConfigError, match=r"^Agent 'x': output_schema: it must be the JSON"):
        build_agent("x", {"prompt": "hi", "output_schema": {"type": "string"}})
