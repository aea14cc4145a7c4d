"""Schedules in code: ``agent(schedule=...)`` makes a cron agent of the service.

The code's schedule is the row's unless it was changed over the API; the API's is
then kept across restarts until the code's schedule changes; the service logs which
one it uses and why.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from fastapi.testclient import TestClient
from structlog.testing import capture_logs

from reactor import RunNotFoundError, agent, reactive
from reactor.service import ObjectStore, ReactionService, create_app
from reactor.service._objects.schema import agent_runs
from reactor.service._reactions.definitions import AgentChanges
from tests.service.server import serving
from tests.service.support import TYPES

NEW_YEAR = "0 0 1 1 *"
SECOND_OF_JANUARY = "0 0 2 1 *"
LOCAL = "http://localhost"


def _helper(schedule: str | None, calls: list[str] | None = None) -> Any:
    def helped(ctx: object) -> str:
        if calls is not None:
            calls.append("ran")
        return "ok"

    return agent(run=helped, schedule=schedule)


def _schedule_lines(logs: list[MutableMapping[str, Any]]) -> list[MutableMapping[str, Any]]:
    return [line for line in logs if str(line["event"]).startswith("agent schedule")]


async def test_the_code_schedule_makes_a_cron_agent_and_a_tick_runs_it(url: str) -> None:
    calls: list[str] = []
    with capture_logs() as logs:
        async with (
            ObjectStore(url, types=TYPES) as objects,
            ReactionService(objects=objects, agents={"helper": _helper(NEW_YEAR, calls)}) as s,
        ):
            record = await s.catalog.record("helper")
            assert (record.trigger_type, record.cron_schedule) == ("cron", NEW_YEAR)
            assert (record.schedule_source, record.code_schedule) == ("code", NEW_YEAR)
            assert record.next_run_at is not None
            assert (record.next_run_at.month, record.next_run_at.day) == (1, 1)
            assert s.cron.scheduled() == {"helper": NEW_YEAR}
            assert s.cron.run_now("helper")  # the tick comes due now
            rows: list[dict[str, Any]] = []
            status = None
            for _ in range(200):
                async with s.db.read() as conn:
                    rows = [dict(r._mapping) for r in await conn.execute(sa.select(agent_runs))]
                if rows and s.host.record is not None:
                    with contextlib.suppress(RunNotFoundError):
                        status = s.host.record.info(rows[0]["run_id"]).status
                if status == "completed":
                    break
                await asyncio.sleep(0.05)
    (row,) = rows
    assert (row["agent"], row["trigger"], status) == ("helper", "cron", "completed")
    assert calls == ["ran"]
    (line,) = _schedule_lines(logs)
    assert line["event"] == "agent schedule from code"
    assert line["log_level"] == "info"
    assert (line["agent"], line["schedule"]) == ("helper", NEW_YEAR)
    assert "not changed over the API" in line["reason"]


async def test_a_schedule_changed_over_the_api_survives_restarts(url: str) -> None:
    async with (
        ObjectStore(url, types=TYPES) as objects,
        ReactionService(objects=objects, agents={"helper": _helper(NEW_YEAR)}) as service,
    ):
        changed = await service.catalog.update(
            "helper", AgentChanges(cron_schedule=SECOND_OF_JANUARY)
        )
        assert (changed.cron_schedule, changed.schedule_source) == (SECOND_OF_JANUARY, "api")
        assert service.cron.scheduled() == {"helper": SECOND_OF_JANUARY}
    for _ in range(2):  # restarts with the same code keep the API's schedule
        with capture_logs() as logs:
            async with (
                ObjectStore(url, types=TYPES) as objects,
                ReactionService(objects=objects, agents={"helper": _helper(NEW_YEAR)}) as again,
            ):
                record = await again.catalog.record("helper")
                assert again.cron.scheduled() == {"helper": SECOND_OF_JANUARY}
        assert (record.trigger_type, record.cron_schedule) == ("cron", SECOND_OF_JANUARY)
        assert (record.schedule_source, record.code_schedule) == ("api", NEW_YEAR)
        (line,) = _schedule_lines(logs)
        assert line["event"] == "agent schedule from the API"
        assert (line["schedule"], line["code_schedule"]) == (SECOND_OF_JANUARY, NEW_YEAR)
        assert "changed over the API" in line["reason"]
    every_hour = "0 * * * *"
    with capture_logs() as logs:  # a new schedule in code is the newer word: it wins
        async with (
            ObjectStore(url, types=TYPES) as objects,
            ReactionService(objects=objects, agents={"helper": _helper(every_hour)}) as again,
        ):
            record = await again.catalog.record("helper")
            assert again.cron.scheduled() == {"helper": every_hour}
    assert (record.cron_schedule, record.schedule_source) == (every_hour, "code")
    (line,) = _schedule_lines(logs)
    assert line["event"] == "agent schedule from code"
    assert line["reason"] == "the code's schedule changed since the API changed it"


async def test_turning_a_code_schedule_off_over_the_api_holds_and_back_is_code(url: str) -> None:
    async with (
        ObjectStore(url, types=TYPES) as objects,
        ReactionService(objects=objects, agents={"helper": _helper(NEW_YEAR)}) as service,
    ):
        off = AgentChanges(trigger_type="manual", cron_schedule=None)
        record = await service.catalog.update("helper", off)
        assert (record.trigger_type, record.schedule_source) == ("manual", "api")
    async with (
        ObjectStore(url, types=TYPES) as objects,
        ReactionService(objects=objects, agents={"helper": _helper(NEW_YEAR)}) as service,
    ):
        record = await service.catalog.record("helper")
        assert (record.trigger_type, record.next_run_at) == ("manual", None)
        back = AgentChanges(trigger_type="cron", cron_schedule=NEW_YEAR)
        record = await service.catalog.update("helper", back)
        assert record.schedule_source == "code"  # the code's schedule again


async def test_a_code_agent_without_a_schedule_is_manual(url: str) -> None:
    async with (
        ObjectStore(url, types=TYPES) as objects,
        ReactionService(objects=objects, agents={"helper": _helper(None)}) as service,
    ):
        record = await service.catalog.record("helper")
    assert (record.trigger_type, record.cron_schedule, record.next_run_at) == (
        "manual",
        None,
        None,
    )
    assert (record.schedule_source, record.code_schedule) == ("code", None)


def test_a_scheduled_agent_inside_a_graph_is_named_in_a_warning(tmp_path: Any) -> None:
    graph = reactive({"digest": _helper(NEW_YEAR)}, name="daily")
    with capture_logs() as logs:
        ReactionService(objects=ObjectStore(f"sqlite:///{tmp_path}/app.db"), graphs={"d": graph})
    (line,) = [line for line in logs if line["event"] == "schedule of a graph's agent not run"]
    assert (line["log_level"], line["graph"], line["agent"]) == ("warning", "d", "digest")
    assert "agents=" in line["fix"]


def make_service(url: str) -> ReactionService:
    """The app ``reactor serve --app tests.service.test_code_schedules:make_service`` serves."""
    return ReactionService(
        objects=ObjectStore(url, types=TYPES), agents={"helper": _helper(NEW_YEAR)}
    )


def test_a_patch_over_the_api_survives_a_restart_and_the_page_says_so(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'app.db'}"
    auth, tokens = {"Authorization": "Bearer s3cret"}, {"s3cret": ("alice", "admin")}
    with TestClient(create_app(make_service(url), tokens=tokens), base_url=LOCAL) as client:
        assert client.get("/api/agents/helper", headers=auth).json()["cron_schedule"] == NEW_YEAR
        changed = client.patch(
            "/api/agents/helper", json={"cron_schedule": SECOND_OF_JANUARY}, headers=auth
        )
        assert changed.status_code == 200, changed.text
        assert changed.json()["schedule_source"] == "api"
    with TestClient(create_app(make_service(url), tokens=tokens), base_url=LOCAL) as client:
        again = client.get("/api/agents/helper", headers=auth).json()
        assert (again["cron_schedule"], again["schedule_source"]) == (SECOND_OF_JANUARY, "api")
        assert again["code_schedule"] == NEW_YEAR
        form = client.get("/")
        csrf = re.search(r'name="csrf" value="([^"]*)"', form.text)
        assert csrf is not None
        client.post("/", data={"token": "s3cret", "csrf": csrf.group(1)})
        page = client.get("/agents").text
    assert "schedule changed here (the code says <code>0 0 1 1 *</code>)" in page


def test_reactor_serve_logs_which_schedule_it_uses(tmp_path: Path) -> None:
    app = "tests.service.test_code_schedules:make_service"
    db = f"sqlite:///{tmp_path / 'app.db'}"
    with serving(db, tmp_path / "log", app=app) as server:
        assert server.stop() == 0
    lines = [json.loads(line) for line in server.output().splitlines()]  # JSON: not a TTY
    said = [line for line in lines if "agent schedule" in line["event"]]
    assert len(said) == 1, server.output()
    assert said[0]["level"] == "info"
    assert said[0]["event"] == "agent schedule from code"
    assert (said[0]["agent"], said[0]["schedule"]) == ("helper", NEW_YEAR)


def test_the_migration_marks_schedules_given_over_the_api_before_it(tmp_path: Path) -> None:
    """Before 0007 code gave no schedules: a code agent's cron schedule came from the API."""
    from alembic import command
    from alembic.config import Config

    from reactor.service._objects.db import MIGRATIONS, VERSION_TABLE

    engine = sa.create_engine(f"sqlite:///{tmp_path / 'old.db'}")
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["version_table"] = VERSION_TABLE
    with engine.begin() as conn:
        config.attributes["connection"] = conn
        command.upgrade(config, "0005")
        conn.execute(
            sa.text(
                "INSERT INTO agents (name, trigger_type, cron_schedule, execution_mode, "
                "capabilities, enabled, defined_in, created_at, updated_at) VALUES "
                "('kept', 'cron', '0 0 1 1 *', 'suggest', '{}', 1, 'code', :t, :t), "
                "('plain', 'manual', NULL, 'suggest', '{}', 1, 'code', :t, :t), "
                "('row', 'cron', '0 0 1 1 *', 'suggest', '{}', 1, 'database', :t, :t)"
            ),
            {"t": "2026-01-01 00:00:00"},
        )
        command.upgrade(config, "head")
        found = conn.execute(sa.text("SELECT name, schedule_source FROM agents ORDER BY name"))
        sources = {row[0]: row[1] for row in found}
    engine.dispose()
    assert sources == {"kept": "api", "plain": "code", "row": None}


async def test_changing_the_trigger_drops_the_schedule_or_reaction_it_no_longer_uses(
    url: str,
) -> None:
    from reactor.service._reactions.definitions import AgentDefinition

    async with (
        ObjectStore(url, types=TYPES) as objects,
        ReactionService(objects=objects) as service,
    ):
        clock = AgentDefinition(
            name="clock", prompt="Tick", trigger_type="cron", cron_schedule=NEW_YEAR
        )
        await service.catalog.create(clock)
        manual = await service.catalog.update("clock", AgentChanges(trigger_type="manual"))
        assert (manual.trigger_type, manual.cron_schedule, manual.next_run_at) == (
            "manual",
            None,
            None,
        )
        assert service.cron.scheduled() == {}
        watcher = AgentDefinition(
            name="watcher",
            prompt="Look at {{ object.id }}",
            trigger_type="reaction",
            reaction_config={"types": ["Person"]},
        )
        await service.catalog.create(watcher)
        plain = await service.catalog.update("watcher", AgentChanges(trigger_type="manual"))
        assert (plain.trigger_type, plain.reaction_config) == ("manual", None)
