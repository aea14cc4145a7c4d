"""The service's audit trail is tamper-evident: an edit made with SQL is named by table and id.

A real ``reactor serve`` on a SQLite file and on PostgreSQL: people are created, a
suggestion is approved by bob and another rejected; then a row of the processing
history, of the object events or of a reaction run's signals is changed with SQL, as
a person with access to the database would (the probe that made bob's approval
alice's). ``reactor audit verify`` (a real process) and ``GET /api/audit/verify`` both
name the entry; put back, the trail verifies again.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx2
import pytest
from psycopg.types.json import Jsonb
from sqlalchemy.ext.asyncio import create_async_engine

from reactor._recording.chain import Report
from reactor._signals.settings import database_location
from reactor.service import DatabaseError, ObjectStore
from reactor.service._objects.db import Database
from reactor.service._objects.history import History, verify_database
from tests.reactor.cli_support import cli_env, reactor_process
from tests.reactor.databases import execute
from tests.service.server import BOB, CAROL, DATABASES, Server, ok, serving_on, wait_for
from tests.service.support import decided_line
from tests.service.test_migrations import _alembic

MISMATCH = (
    "its content does not match its hash: it was changed, or an entry before it was "
    "removed, added or moved"
)


@pytest.fixture(scope="module", params=DATABASES)
def server(request: pytest.FixtureRequest) -> Iterator[Server]:
    with serving_on(request) as running:
        yield running


def sql(server: Server, statement: str, params: Sequence[Any] = ()) -> list[Any]:
    """One statement on the server's database, from outside the service (``%s`` marks)."""
    if sqlite(server):
        with sqlite3.connect(server.db.removeprefix("sqlite:///")) as conn:
            return conn.execute(statement.replace("%s", "?"), tuple(params)).fetchall()
    wrapped = tuple(Jsonb(value) if isinstance(value, dict) else value for value in params)
    return execute(server.db, statement, wrapped)


def sqlite(server: Server) -> bool:
    return server.db.startswith("sqlite:///")


def json_set(server: Server, column: str, path: str, value: str) -> str:
    """SQL that sets ``column``'s ``path`` (dotted) to the string ``value``."""
    if sqlite(server):
        return f"json_set({column}, '$.{path}', '{value}')"
    return f"jsonb_set({column}, '{{{path.replace('.', ',')}}}', '\"{value}\"')"


@pytest.fixture(scope="module")
def decided(server: Server) -> dict[str, Any]:
    """Two people, one suggestion approved by bob and one rejected: the history's rows."""
    with server.client() as api:
        people = [
            ok(api.post("/api/objects", json={"type": "Person", "data": {"name": name}}), 201)
            for name in ("Ada", "Grace")
        ]
        ids = {person["id"] for person in people}

        def both() -> list[dict[str, Any]] | None:
            found = ok(api.get("/api/suggestions", params={"status": "pending"}))
            mine = [s for s in found if s["object_id"] in ids]
            return mine if len(mine) == 2 else None

        first, second = sorted(wait_for(both), key=lambda s: s["created_at"])
        with server.client(BOB) as bob:
            ok(bob.post(f"/api/suggestions/{first['id']}/approve"))
        ok(api.post(f"/api/suggestions/{second['id']}/reject"))
        history = ok(api.get("/api/processing-log/history"))
        entry = ok(api.get("/api/processing-log", params={"object_id": first["object_id"]}))
    assert [e["name"] for e in history] == ["suggestion:decided", "suggestion:decided"]
    assert [e["payload"]["outcome"] for e in history] == ["applied", "rejected"]
    return {"history": history, "approved": first, "entries": entry}


def audit(server: Server, tmp_path: Path, *options: str) -> tuple[int, list[str]]:
    """``reactor audit verify --db`` the server's database, in a new process."""
    env = cli_env()
    env.pop("REACTOR_AUDIT_KEY", None)
    done = reactor_process(tmp_path, "audit", "verify", "--db", server.db, *options, env=env)
    return done.returncode, (done.stdout + done.stderr).splitlines()


def api_report(server: Server, **params: str) -> dict[str, Any]:
    with server.client() as api:
        report: dict[str, Any] = ok(api.get("/api/audit/verify", params=params))
    return report


def test_an_intact_service_database_verifies(
    server: Server, decided: dict[str, Any], tmp_path: Path
) -> None:
    status, lines = audit(server, tmp_path)
    assert status == 0, lines
    assert "processing_history: 2 entries chained" in lines
    assert any(line.startswith("object_events: ") for line in lines)
    assert lines[0].startswith("signals: ")
    report = api_report(server)
    assert (report["intact"], report["broken"]) == (True, None)
    tables = {checked["table"]: checked for checked in report["checked"]}
    assert tables["processing_history"]["entries"] == 2
    assert tables["object_events"]["entries"] >= 4  # two created, a company, an update
    assert tables["object_events"]["unchained"] == 0


def test_an_approval_whose_approver_was_changed_is_named(
    server: Server, decided: dict[str, Any], tmp_path: Path
) -> None:
    approval = decided["history"][0]
    key = (approval["id"],)
    ((original,),) = sql(server, "SELECT payload FROM processing_history WHERE id = %s", key)
    edit = json_set(server, "payload", "principal.id", "alice")
    sql(server, f"UPDATE processing_history SET payload = {edit} WHERE id = %s", key)
    try:
        with server.client() as api:
            shown = ok(api.get("/api/processing-log/history"))[0]
        assert shown["payload"]["principal"]["id"] == "alice"  # the lie, served
        status, lines = audit(server, tmp_path)
        assert (status, lines) == (
            1,
            [f"Broken: table processing_history, id {approval['id']}: {MISMATCH}."],
        )
        report = api_report(server)
        assert report["intact"] is False
        assert report["broken"] == {
            "table": "processing_history",
            "id": approval["id"],
            "seq": None,
            "run_id": None,
            "problem": MISMATCH,
        }
    finally:
        sql(server, "UPDATE processing_history SET payload = %s WHERE id = %s", (original, *key))
    assert audit(server, tmp_path)[0] == 0


def test_an_edited_object_event_is_named(
    server: Server, decided: dict[str, Any], tmp_path: Path
) -> None:
    object_id = decided["approved"]["object_id"]
    ((event_id, data),) = sql(
        server,
        "SELECT event_id, data FROM object_events WHERE object_id = %s AND event = 'updated'",
        (object_id,),
    )
    edit = json_set(server, "data", "employer", "Initech")
    sql(server, f"UPDATE object_events SET data = {edit} WHERE event_id = %s", (event_id,))
    try:
        status, lines = audit(server, tmp_path)
        assert (status, lines) == (1, [f"Broken: table object_events, id {event_id}: {MISMATCH}."])
        assert api_report(server)["broken"]["id"] == event_id
    finally:
        sql(server, "UPDATE object_events SET data = %s WHERE event_id = %s", (data, event_id))
    assert api_report(server)["intact"] is True


def test_a_history_row_deleted_in_the_middle_is_caught(
    server: Server, decided: dict[str, Any], tmp_path: Path
) -> None:
    approval, rejection = decided["history"]
    (row,) = sql(server, "SELECT * FROM processing_history WHERE id = %s", (approval["id"],))
    sql(server, "DELETE FROM processing_history WHERE id = %s", (approval["id"],))
    try:
        status, lines = audit(server, tmp_path)
        assert (status, lines) == (
            1,
            [f"Broken: table processing_history, id {rejection['id']}: {MISMATCH}."],
        )
    finally:
        marks = ", ".join(["%s"] * len(row))
        sql(server, f"INSERT INTO processing_history VALUES ({marks})", row)
    assert audit(server, tmp_path)[0] == 0


def test_an_edited_signal_of_a_reaction_run_is_named(
    server: Server, decided: dict[str, Any], tmp_path: Path
) -> None:
    run_id = decided["entries"][0]["run_id"]
    table = "signals" if sqlite(server) else "reactor_signals"
    text = "payload" if sqlite(server) else "payload::text"
    where = "WHERE run_id = %s AND seq = %s"
    ((seq, signal_id, payload),) = sql(
        server,
        f"SELECT seq, id, {text} FROM {table} WHERE run_id = %s AND name = 'harness:start'",
        (run_id,),
    )
    forged = json.dumps({**json.loads(payload), "input": "forged"})
    sql(server, f"UPDATE {table} SET payload = %s {where}", (forged, run_id, seq))
    try:
        status, lines = audit(server, tmp_path)
        assert (status, lines) == (
            1,
            [f"Broken: table {table}, run {run_id}, seq {seq}, id {signal_id}: {MISMATCH}."],
        )
        assert api_report(server, run=run_id)["broken"] == {
            "table": table,
            "id": signal_id,
            "seq": seq,
            "run_id": run_id,
            "problem": MISMATCH,
        }
    finally:  # the very text it held: its hash is of the text
        sql(server, f"UPDATE {table} SET payload = %s {where}", (payload, run_id, seq))
    assert audit(server, tmp_path, "--run", run_id)[0] == 0


def test_verify_in_the_api_names_an_unknown_run(server: Server) -> None:
    with server.client() as api:
        answer = api.get("/api/audit/verify", params={"run": "run_nope"})
    assert answer.status_code == 404, answer.text


def test_verify_in_the_api_needs_a_token(server: Server) -> None:
    answer = httpx2.get(f"{server.url}/api/audit/verify", timeout=30)
    assert answer.status_code == 401, answer.text


async def test_a_database_of_the_revision_before_chains_is_migrated_and_its_rows_are_not_chained(
    url: str, tmp_path: Path
) -> None:
    async with ObjectStore(url) as objects:
        ada = await objects.create("Person", {"name": "Ada"})
        await objects.update(ada.id, {"name": "Ada Lovelace"})
    engine = create_async_engine(Database(url).driver_url)
    try:
        async with engine.begin() as conn:
            await conn.run_sync(_alembic, "downgrade", "0009")  # as reactor before chains left it
    finally:
        await engine.dispose()
    where = database_location(url)
    with pytest.raises(
        DatabaseError, match=r"before they were hash-chained; run `reactor db upgrade"
    ):
        verify_database(where, Report(), None)
    async with ObjectStore(url) as objects:  # opening it migrates it
        await objects.create("Person", {"name": "Grace"})
    report = Report()
    verify_database(where, report, None)
    assert report.intact, report.broken
    events = report.table("object_events")
    assert (events.unchained, events.entries) == (2, 1)
    assert report.lines()[:2] == [
        "processing_history: 0 entries chained",
        "object_events: 1 entry chained, 2 written before the trail was chained (not checked)",
    ]


async def test_writers_in_two_stores_at_once_never_fork_a_chain(url: str) -> None:
    """Two object stores on one database (as two serving processes): each chain stays one."""
    decided = decided_line()
    async with ObjectStore(url) as one, ObjectStore(url) as two:
        assert one.db is not two.db

        async def notes(objects: ObjectStore) -> None:
            for n in range(30):
                await objects.create("Note", {"n": n})

        async def decisions(db: Database) -> None:
            for _ in range(15):
                await History(db).add("suggestion:rejected", decided)

        await asyncio.gather(notes(one), notes(two), decisions(one.db), decisions(two.db))
    report = Report()
    verify_database(database_location(url), report, None)
    assert report.broken is None
    assert report.table("object_events").entries == 60
    assert report.table("processing_history").entries == 30


@pytest.mark.parametrize("token", [BOB, CAROL], ids=["approver-operator", "viewer"])
def test_only_an_admin_verifies_the_trail(server: Server, token: str) -> None:
    with server.client(token) as api:
        response = api.get("/api/audit/verify")
    assert response.status_code == 403, response.text
