"""The schema: made by the shipped migrations, on SQLite and PostgreSQL, and ``reactor db``."""

from __future__ import annotations

import re
from typing import Any

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.migration import MigrationContext
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from reactor._cli import main
from reactor._cli._service import DEFAULT_SERVICE_URL
from reactor.service import (
    DatabaseError,
    ObjectStore,
    ServiceConfigError,
    upgrade_database,
)
from reactor.service._objects.db import DEFAULT_URL, MIGRATIONS, VERSION_TABLE, Database
from reactor.service._objects.schema import metadata

HEAD = "0015"
"""The newest revision shipped."""

COLUMNS = {
    "objects": {
        "id",
        "type",
        "version",
        "data",
        "actor_type",
        "actor_id",
        "created_at",
        "updated_at",
    },
    "object_events": {
        "event_id",
        "object_id",
        "object_type",
        "version",
        "event",
        "data",
        "changes",
        "actor_type",
        "actor_id",
        "approved_by_type",
        "approved_by_id",
        "object_created_at",
        "created_at",
        "cause",
        "hash",
    },
    "agents": {
        "name",
        "prompt",
        "role",
        "trigger_type",
        "cron_schedule",
        "reaction_config",
        "execution_mode",
        "capabilities",
        "output_schema",
        "enabled",
        "defined_in",
        "created_at",
        "updated_at",
        "schedule_source",
        "code_schedule",
        "approval",
        "spend_cap_usd",
    },
    "agent_runs": {
        "id",
        "agent",
        "run_id",
        "trigger",
        "started_at",
    },
    "processing_log": {
        "id",
        "agent",
        "object_id",
        "object_version",
        "event_type",
        "event_id",
        "status",
        "error",
        "run_id",
        "created_at",
        "updated_at",
        "attempts",
        "owner",
        "superseded_by",
        "cost_usd",
    },
    "admission_buckets": {"agent", "key", "due"},
    "suggestions": {
        "id",
        "agent",
        "object_id",
        "changes",
        "reasoning",
        "status",
        "run_id",
        "created_at",
        "resolved_at",
        "resolved_by_type",
        "resolved_by_id",
        "object_version",
        "proposer_type",
        "proposer_id",
        "superseded_by",
        "basis",
    },
    "suggestion_approvals": {
        "suggestion_id",
        "principal_id",
        "changes_sha256",
        "roles",
        "authenticator",
        "decided_at",
    },
    "processing_history": {
        "id",
        "name",
        "suggestion_id",
        "object_id",
        "payload",
        "created_at",
        "hash",
    },
    "audit_chains": {"table_name", "since", "pruned_through", "pruned_hash"},
    "reaction_cursors": {"agent", "event_id", "updated_at"},
    "run_leases": {"run_id", "worker", "heartbeat_at", "epoch"},
    "cron_ticks": {"agent", "tick_at", "claimed_at"},
    "web_sessions": {
        "id_hash",
        "user_id",
        "csrf",
        "created_at",
        "used_at",
        "roles",
        "authenticator",
    },
    "blocked_runs": {"run_id", "reason", "blocked_at"},
    "queued_jobs": {"key", "job", "queued_at"},
    "prompt_replies": {"run_id", "prompt_id", "answer", "answered_by", "answered_at", "message_id"},
    "service_processes": {"id", "heartbeat_at"},
}


def inspect_schema(conn: sa.Connection) -> dict[str, Any]:
    inspector = sa.inspect(conn)
    tables = {
        name: {column["name"]: column for column in inspector.get_columns(name)}
        for name in inspector.get_table_names()
    }
    context = MigrationContext.configure(
        conn,
        opts={
            "compare_type": True,
            "include_name": lambda name, kind, parent: kind != "table" or name in metadata.tables,
        },
    )
    return {
        "tables": tables,
        "diff": compare_metadata(context, metadata),
        "indexes": {i["name"]: i for i in inspector.get_indexes("processing_log")},
    }


async def migrated(url: str) -> dict[str, Any]:
    assert await upgrade_database(url) == HEAD
    engine = create_async_engine(Database(url).driver_url)
    try:
        async with engine.connect() as conn:
            return await conn.run_sync(inspect_schema)
    finally:
        await engine.dispose()


async def test_migrations_make_every_table_with_its_columns(url: str) -> None:
    schema = await migrated(url)
    tables = schema["tables"]
    assert set(tables) == {*COLUMNS, VERSION_TABLE}
    for table, columns in COLUMNS.items():
        assert set(tables[table]) == columns, table
    agents = tables["agents"]
    for column in ("prompt", "cron_schedule", "role", "trigger_type", "reaction_config"):
        assert column in agents
    assert {"execution_mode", "capabilities"} <= set(agents)
    assert agents["enabled"]["nullable"] is False


async def test_the_migrated_schema_is_the_one_the_code_queries(url: str) -> None:
    schema = await migrated(url)
    assert schema["diff"] == []
    active = schema["indexes"]["uq_processing_log_active"]
    assert active["unique"]
    assert active["column_names"] == ["agent", "object_id", "object_version", "event_type"]


async def test_json_columns_are_jsonb_on_postgresql(postgres_url: str) -> None:
    schema = await migrated(postgres_url)
    assert type(schema["tables"]["agents"]["reaction_config"]["type"]).__name__ == "JSONB"


async def test_upgrading_again_changes_nothing(url: str) -> None:
    assert await upgrade_database(url) == HEAD
    async with ObjectStore(url) as objects:
        ada = await objects.create("Person", {"name": "Ada"})
    assert await upgrade_database(url) == HEAD
    async with ObjectStore(url) as objects:
        assert (await objects.get(ada.id)).data == {"name": "Ada"}


def _alembic(conn: sa.Connection, action: str, revision: str) -> None:
    """Run one Alembic command (``upgrade``, ``downgrade``) of the shipped revisions."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["connection"] = conn
    config.attributes["version_table"] = VERSION_TABLE
    getattr(command, action)(config, revision)


def _fresh_engine(url: str) -> AsyncEngine:
    """An engine on ``url``'s database, not made yet (for SQLite, its folder is made)."""
    database = Database(url)
    if database.path is not None:
        database.path.parent.mkdir(parents=True)
    return create_async_engine(database.driver_url)


async def test_0008_adds_the_processing_history_and_keeps_the_suggestions(url: str) -> None:
    engine = _fresh_engine(url)
    suggestion = sa.table(
        "suggestions",
        *(sa.column(name) for name in ("id", "agent", "changes", "reasoning", "status")),
        sa.column("created_at"),
    )
    try:
        async with engine.begin() as conn:
            await conn.run_sync(_alembic, "upgrade", "0007")
            await conn.execute(
                suggestion.insert().values(
                    id="sug_1", agent="enrich", changes=sa.text("'[]'"), reasoning="why",
                    status="rejected", created_at=sa.func.current_timestamp(),
                )
            )  # fmt: skip
        assert await upgrade_database(url) == HEAD
        async with engine.begin() as conn:
            tables = await conn.run_sync(lambda sync: sa.inspect(sync).get_table_names())
            kept = (await conn.execute(sa.text("SELECT id, status FROM suggestions"))).all()
            history = (await conn.execute(sa.text("SELECT * FROM processing_history"))).all()
            await conn.run_sync(_alembic, "downgrade", "0007")
            after = await conn.run_sync(lambda sync: sa.inspect(sync).get_table_names())
    finally:
        await engine.dispose()
    assert "processing_history" in tables
    assert [tuple(row) for row in kept] == [("sug_1", "rejected")]
    assert history == []
    assert "processing_history" not in after


async def test_0011_keeps_the_suggestions_and_signs_old_sessions_out(url: str) -> None:
    engine = _fresh_engine(url)
    suggestion = sa.table(
        "suggestions",
        *(sa.column(name) for name in ("id", "agent", "changes", "reasoning", "status")),
        sa.column("created_at"),
    )
    session = sa.table(
        "web_sessions", *(sa.column(name) for name in ("id_hash", "user_id", "csrf")),
        sa.column("created_at"), sa.column("used_at"),
    )  # fmt: skip
    now = sa.func.current_timestamp()
    try:
        async with engine.begin() as conn:
            await conn.run_sync(_alembic, "upgrade", "0009")
            await conn.execute(
                suggestion.insert().values(
                    id="sug_1", agent="enrich", changes=sa.text("'[]'"), reasoning="why",
                    status="pending", created_at=now,
                )
            )  # fmt: skip
            await conn.execute(
                session.insert().values(
                    id_hash="h", user_id="alice", csrf="c", created_at=now, used_at=now
                )
            )
        assert await upgrade_database(url) == HEAD
        async with engine.begin() as conn:
            kept = (
                await conn.execute(sa.text("SELECT id, status, proposer_id FROM suggestions"))
            ).all()
            roles = (await conn.execute(sa.text("SELECT roles FROM web_sessions"))).scalar_one()
            await conn.execute(sa.text("UPDATE suggestions SET status = 'expired'"))
            await conn.run_sync(_alembic, "downgrade", "0009")
            after = (await conn.execute(sa.text("SELECT id, status FROM suggestions"))).all()
    finally:
        await engine.dispose()
    assert [tuple(row) for row in kept] == [("sug_1", "pending", None)]
    assert roles is None  # a session without roles is signed out
    assert [tuple(row) for row in after] == [("sug_1", "rejected")]


async def test_0012_keeps_the_suggestions_judged_by_version_and_indexes_the_pages(
    url: str,
) -> None:
    engine = _fresh_engine(url)
    suggestion = sa.table(
        "suggestions",
        *(sa.column(name) for name in ("id", "agent", "changes", "reasoning", "status")),
        sa.column("created_at"),
    )
    try:
        async with engine.begin() as conn:
            await conn.run_sync(_alembic, "upgrade", "0011")
            await conn.execute(
                suggestion.insert().values(
                    id="sug_1",
                    agent="enrich",
                    changes=sa.text("'[]'"),
                    reasoning="why",
                    status="pending",
                    created_at=sa.func.current_timestamp(),
                )
            )
        assert await upgrade_database(url) == HEAD
        async with engine.begin() as conn:
            kept = (
                await conn.execute(
                    sa.text("SELECT id, status, basis, superseded_by FROM suggestions")
                )
            ).all()
            indexes = await conn.run_sync(
                lambda sync: {
                    table: {i["name"] for i in sa.inspect(sync).get_indexes(table)}
                    for table in ("suggestions", "processing_log")
                }
            )
            await conn.execute(sa.text("UPDATE suggestions SET status = 'superseded'"))
            await conn.run_sync(_alembic, "downgrade", "0011")
            after = (await conn.execute(sa.text("SELECT id, status FROM suggestions"))).all()
    finally:
        await engine.dispose()
    assert [tuple(row) for row in kept] == [("sug_1", "pending", None, None)]
    assert {
        "ix_suggestions_created_at_id",
        "ix_suggestions_status_created_at_id",
        "ix_suggestions_agent_status_created_at_id",
        "ix_suggestions_object_id_agent_status",
    } <= indexes["suggestions"]
    assert {
        "ix_processing_log_agent_id",
        "ix_processing_log_agent_status_id",
        "ix_processing_log_object_id_id",
    } <= indexes["processing_log"]
    assert [tuple(row) for row in after] == [("sug_1", "rejected")]


async def test_0015_keeps_each_agent_run_and_drops_the_copy_of_its_status(url: str) -> None:
    engine = _fresh_engine(url)
    insert = sa.text(
        "INSERT INTO agent_runs (agent, run_id, trigger, status, started_at, finished_at, "
        "error) VALUES ('helper', 'run_1', 'cron', 'failed', CURRENT_TIMESTAMP, "
        "CURRENT_TIMESTAMP, 'boom')"
    )
    try:
        async with engine.begin() as conn:
            await conn.run_sync(_alembic, "upgrade", "0014")
            await conn.execute(insert)
        assert await upgrade_database(url) == HEAD
        async with engine.begin() as conn:
            columns = await conn.run_sync(
                lambda sync: {c["name"] for c in sa.inspect(sync).get_columns("agent_runs")}
            )
            kept = await conn.execute(sa.text("SELECT agent, run_id, trigger FROM agent_runs"))
            kept_rows = [tuple(row) for row in kept]
            await conn.execute(
                sa.text(
                    "INSERT INTO agent_runs (agent, run_id, trigger, started_at) "
                    "VALUES ('helper', 'run_2', 'manual', CURRENT_TIMESTAMP)"
                )
            )
            await conn.run_sync(_alembic, "downgrade", "0014")
            after = await conn.execute(
                sa.text("SELECT run_id, status, error FROM agent_runs ORDER BY run_id")
            )
            after_rows = [tuple(row) for row in after]
    finally:
        await engine.dispose()
    assert columns == {"id", "agent", "run_id", "trigger", "started_at"}
    assert kept_rows == [("helper", "run_1", "cron")]
    # back at 0014, the status is unknown there: the store's row of each run says it
    assert after_rows == [("run_1", "unknown", None), ("run_2", "unknown", None)]


async def test_the_database_may_hold_other_tables(url: str) -> None:
    engine = _fresh_engine(url)
    async with engine.begin() as conn:
        await conn.execute(sa.text("CREATE TABLE alembic_version (version_num VARCHAR(32))"))
        await conn.execute(sa.text("INSERT INTO alembic_version VALUES ('app_7')"))
    await engine.dispose()
    schema = await migrated(url)
    assert "alembic_version" in schema["tables"]


def test_reactor_db_upgrade_migrates_the_database(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["db", "upgrade", "--db", url]) == 0
    assert main(["db", "upgrade", "--db", url]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == [f"{url}: the tables are at revision {HEAD} (the newest)."] * 2


def test_reactor_db_upgrade_takes_a_file_path(
    tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "app.db"
    assert main(["db", "upgrade", "--db", str(path)]) == 0
    assert path.exists()


def test_reactor_db_upgrade_reports_a_bad_url(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:  # a bad argument, as argparse says it
        main(["db", "upgrade", "--db", "mysql://localhost/app"])
    assert exited.value.code == 2
    assert capsys.readouterr().err == (
        "reactor db upgrade: error: argument --db: 'mysql://localhost/app' is not a database "
        "this can use; use a file path, sqlite:///path.db or postgresql://user@host:5432/dbname "
        "(see `reactor db upgrade --help`)\n"
    )


def test_reactor_db_upgrade_takes_a_postgres_url_as_postgresql(
    postgres_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    short = postgres_url.replace("postgresql://", "postgres://", 1)
    assert short.startswith("postgres://")
    assert main(["db", "upgrade", "--db", short]) == 0
    assert f"revision {HEAD}" in capsys.readouterr().out


@pytest.mark.parametrize("url", ["http://localhost/app", "postgresql+asyncpg://h/app"])
def test_a_database_url_the_service_cannot_use_is_one_line(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["db", "upgrade", "--db", url])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "postgresql://user@host:5432/dbname" in err
    assert "Traceback" not in err


def test_reactor_db_needs_an_action(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["db"])
    assert "ACTION" in capsys.readouterr().err


def test_the_command_line_default_is_the_services() -> None:
    assert DEFAULT_SERVICE_URL == DEFAULT_URL


async def test_an_unreachable_database_is_a_clear_error() -> None:
    with pytest.raises(
        DatabaseError,
        match=r"^Cannot open the database postgresql://postgres@127\.0\.0\.1:1/app: .+\. Check "
        r"the URL, and that the server runs and accepts this user\.$",
    ):
        await ObjectStore("postgresql://postgres@127.0.0.1:1/app").open()


def test_a_password_is_never_shown() -> None:
    with pytest.raises(ServiceConfigError, match=re.escape("'mysql://u:***@db/app'")):
        ObjectStore("mysql://u:secret@db/app")
