"""What only the PostgreSQL store does: URLs, shared databases, several processes, outages.

The behaviour it shares with the SQLite store is tested on both in test_recording.py.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable

import psycopg
import pytest
from psycopg import sql

from reactor import (
    PostgresSignalStore,
    RecordingError,
    RunInfo,
    RunNotFoundError,
    Signal,
    agent,
    reactive,
)
from reactor._backends.dialect import SCHEMA_VERSION
from tests.reactor.databases import admin, execute


def name_of(dsn: str) -> str:
    return dsn.rsplit("/", 1)[1]


def signals(run_id: str, seqs: range) -> list[Signal]:
    return [
        Signal("harness:start" if seq == 1 else "note:tick", {"n": seq}, seq=seq, run_id=run_id)
        for seq in seqs
    ]


@pytest.mark.parametrize(
    ("dsn", "problem"),
    [
        pytest.param(
            "sqlite:///runs.db",
            "it does not start with postgresql:// or postgres://",
            id="another-scheme",
        ),
        pytest.param(
            "host=localhost dbname=runs",
            "it does not start with postgresql:// or postgres://",
            id="key-value",
        ),
        pytest.param(
            "postgresql://localhost/runs?colour=blue",
            'ProgrammingError: invalid URI query parameter: "colour"',
            id="unknown-option",
        ),
    ],
)
def test_a_url_that_is_not_postgresql_is_refused(dsn: str, problem: str) -> None:
    message = (
        f"{dsn!r} is not a PostgreSQL URL ({problem}); "
        "give one like 'postgresql://user@localhost:5432/dbname'."
    )
    with pytest.raises(RecordingError, match=f"^{re.escape(message)}$"):
        PostgresSignalStore(dsn)


def test_an_unreachable_server_is_a_clear_error() -> None:
    with pytest.raises(
        RecordingError,
        match=r"^Cannot connect to PostgreSQL at postgresql://postgres@127\.0\.0\.1:1/runs "
        r"\(OperationalError: connection failed: .*\); check that the server is running "
        r"and that the URL is right\.$",
    ):
        PostgresSignalStore("postgres://postgres@127.0.0.1:1/runs")


def test_the_password_is_never_shown(postgres_dsn: str) -> None:
    with_password = postgres_dsn.replace("://postgres@", "://postgres:s3cret@")
    with PostgresSignalStore(with_password) as store:
        assert repr(store) == f"PostgresSignalStore({postgres_dsn!r})"
        store.append(Signal("harness:start", seq=1, run_id="run_p"))
        store.flush()
        with pytest.raises(RunNotFoundError) as caught:
            store.load("run_missing")
    assert "s3cret" not in str(caught.value)


def test_a_newer_schema_is_refused(postgres_dsn: str) -> None:
    PostgresSignalStore(postgres_dsn).close()
    execute(postgres_dsn, "UPDATE reactor_schema SET version = 99")
    message = (
        f"The reactor tables in {postgres_dsn} were written by a newer reactor (schema 99, "
        f"this one reads {SCHEMA_VERSION}); upgrade reactor to read them."
    )
    with pytest.raises(RecordingError, match=f"^{re.escape(message)}$"):
        PostgresSignalStore(postgres_dsn)


def test_the_store_keeps_to_its_own_tables_beside_an_application(postgres_dsn: str) -> None:
    execute(postgres_dsn, "CREATE TABLE runs (id integer PRIMARY KEY, note text)")
    execute(postgres_dsn, "INSERT INTO runs VALUES (1, 'the application''s own')")
    graph = reactive({"a": agent(run=lambda ctx: None)}, name="g")
    with PostgresSignalStore(postgres_dsn) as store:
        result = graph.run_sync(record=store)
        assert [info.run_id for info in store.runs()] == [result.run_id]
    assert execute(postgres_dsn, "SELECT id, note FROM runs") == [(1, "the application's own")]
    tables = execute(
        postgres_dsn,
        "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename",
    )
    assert [row[0] for row in tables] == [
        "reactor_audit_chain",
        "reactor_inbox",
        "reactor_requests",
        "reactor_run_tags",
        "reactor_runs",
        "reactor_schema",
        "reactor_signals",
        "reactor_timers",
        "runs",
    ]


def test_a_table_in_the_way_is_a_clear_error_and_nothing_is_half_made(postgres_dsn: str) -> None:
    execute(postgres_dsn, "CREATE TABLE reactor_signals (something text)")
    message = (
        f"Cannot prepare the reactor tables in {postgres_dsn} (DuplicateTable: relation "
        '"reactor_signals" already exists); give the store a database (or a user) that may '
        "create them."
    )
    with pytest.raises(RecordingError, match=f"^{re.escape(message)}$"):
        PostgresSignalStore(postgres_dsn)
    assert execute(postgres_dsn, "SELECT to_regclass('reactor_schema')") == [(None,)]
    assert execute(postgres_dsn, "SELECT to_regclass('reactor_runs')") == [(None,)]


def test_stores_opening_a_new_database_at_once_make_the_tables_once(postgres_dsn: str) -> None:
    opening = 8
    barrier = threading.Barrier(opening)
    errors: list[BaseException] = []

    def open_one() -> None:
        barrier.wait()
        try:
            PostgresSignalStore(postgres_dsn).close()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=open_one) for _ in range(opening)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert execute(postgres_dsn, "SELECT version FROM reactor_schema") == [(SCHEMA_VERSION,)]


RECORDER = """
import asyncio, json, sys, time
from reactor import PostgresSignalStore, agent, reactive

async def tick(ctx):
    await asyncio.sleep(0.001)

graph = reactive(
    {"ticker": agent(run=tick, activate_on=["harness:start", "agent:ticker:completed"])},
    name=sys.argv[2],
)

async def main():
    with PostgresSignalStore(sys.argv[1], batch_size=50) as store:
        print("ready", flush=True)
        sys.stdin.readline()
        result = await graph.run(record=store, max_depth=None, max_activations=300)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and len(store.runs()) < 2:
            await asyncio.sleep(0.02)
        seen = [info.run_id for info in store.runs()]
    print(json.dumps({"mine": result.run_id, "seen": seen}), flush=True)

asyncio.run(main())
"""


def test_two_processes_record_to_one_database_at_once(postgres_dsn: str) -> None:
    script = textwrap.dedent(RECORDER)
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    processes = [
        subprocess.Popen(
            [sys.executable, "-W", "ignore", "-c", script, postgres_dsn, graph],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for graph in ("one", "two")
    ]
    try:
        for process in processes:
            assert process.stdout is not None
            assert process.stdout.readline() == "ready\n"
        for process in processes:  # both start recording together
            assert process.stdin is not None
            process.stdin.write("go\n")
            process.stdin.flush()
        reports = []
        for process in processes:
            out, _ = process.communicate(timeout=120)
            assert process.returncode == 0
            reports.append(json.loads(out))
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait()
    mine = {report["mine"] for report in reports}
    assert len(mine) == 2
    for report in reports:
        assert set(report["seen"]) == mine  # each process sees the other's run
    with PostgresSignalStore(postgres_dsn) as store:
        infos = store.runs()
        assert {info.graph for info in infos} == {"one", "two"}
        for info in infos:
            recording = store.load(info.run_id)
            assert info.complete
            assert info.signals == len(recording.signals) > 600
            assert [s.seq for s in recording.signals] == list(range(1, info.signals + 1))


def _waiting_on_a_lock(dsn: str) -> list[int]:
    rows = execute(
        dsn,
        "SELECT pid FROM pg_stat_activity WHERE datname = %s AND wait_event_type = 'Lock'",
        (name_of(dsn),),
    )
    return [row[0] for row in rows]


def _until(found: Callable[[], object], what: str) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if found():
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def test_a_write_cut_off_by_a_lost_connection_is_retried(postgres_dsn: str) -> None:
    with PostgresSignalStore(postgres_dsn) as store:
        store.append(signals("run_r", range(1, 2))[0])
        store.flush()
        with psycopg.connect(postgres_dsn) as locker:
            # Hold the signals table so that the writer's next batch waits mid-transaction,
            # then cut the writer's connection from under it.
            locker.execute("LOCK TABLE reactor_signals IN ACCESS EXCLUSIVE MODE")
            for each in signals("run_r", range(2, 102)):
                store.append(each)
            _until(lambda: _waiting_on_a_lock(postgres_dsn), "the writer to wait on the lock")
            (first,) = _waiting_on_a_lock(postgres_dsn)
            execute(postgres_dsn, "SELECT pg_terminate_backend(%s)", (first,))
            _until(
                lambda: _waiting_on_a_lock(postgres_dsn) not in ([], [first]),
                "the writer to come back on a new connection",
            )
        store.flush()  # the lock is released: the retried batch is written
        recording = store.load("run_r")
    assert [s.seq for s in recording.signals] == list(range(1, 102))
    assert recording.info.signals == 101


def test_recording_fails_clearly_when_the_database_stays_away_and_then_recovers(
    postgres_dsn: str,
) -> None:
    name = sql.Identifier(name_of(postgres_dsn))
    with PostgresSignalStore(postgres_dsn, retry_for=0.5) as store:
        store.append(signals("run_gone", range(1, 2))[0])
        store.flush()
        with admin() as conn:
            conn.execute(sql.SQL("ALTER DATABASE {} ALLOW_CONNECTIONS false").format(name))
            try:
                conn.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s",
                    (name_of(postgres_dsn),),
                )
                store.append(signals("run_gone", range(2, 3))[0])
                store.flush()  # returns once the writer gave up: it never hangs
            finally:
                conn.execute(sql.SQL("ALTER DATABASE {} ALLOW_CONNECTIONS true").format(name))
        store.append(signals("run_gone", range(3, 4))[0])  # counted, not written
        store.flush()
        error = store.recording_error("run_gone")
        assert isinstance(error, RecordingError)
        assert error.unwritten == 2
        assert re.match(
            rf"^Recording run run_gone to {re.escape(postgres_dsn)} failed \(.+\); 2 of its "
            r"signals were not written, so its log stops where the failure began\. Check "
            r"that the store's database is reachable and writable\. The store retries by "
            r"itself and records the next runs once it can; resume this one with "
            r"graph\.resume\(run_id, record=store\) or run it again\.$",
            str(error),
        )
        # The same store object records the next run: it was never left broken.
        store.append(signals("run_next", range(1, 3))[0])
        assert [s.seq for s in store.load("run_next").signals] == [1]
        assert [s.seq for s in store.load("run_gone").signals] == [1]


def test_a_write_that_cannot_succeed_fails_at_once(postgres_dsn: str) -> None:
    with PostgresSignalStore(postgres_dsn) as store:
        execute(postgres_dsn, "DROP TABLE reactor_signals")
        store.append(signals("run_x", range(1, 2))[0])
        started = time.monotonic()
        store.flush()
        assert time.monotonic() - started < 10  # not retried for retry_for seconds
        error = store.recording_error("run_x")
        assert error is not None
        assert str(error).startswith(
            f"Recording run run_x to {postgres_dsn} failed (UndefinedTable: relation "
            '"reactor_signals" does not exist); 1 of its signals were not written'
        )


@pytest.mark.parametrize(
    ("damage", "what"),
    [
        pytest.param(
            "UPDATE reactor_signals SET payload = '\"\\ud800\"' WHERE seq = 2",
            "signal #2 ('note:tick') has a payload that is not JSON (",
            id="payload",
        ),
        pytest.param(
            "UPDATE reactor_requests SET fingerprint = '[1, 2]'",
            "the request 'h1' is not a JSON object",
            id="request",
        ),
    ],
)
def test_a_damaged_row_is_a_recording_error_naming_the_run(
    postgres_dsn: str, damage: str, what: str
) -> None:
    with PostgresSignalStore(postgres_dsn) as store:
        for each in signals("run_d", range(1, 4)):
            store.append(each)
        store.record_request("run_d", "h1", {"agent": "a", "messages": []})
        store.flush()
        execute(postgres_dsn, damage)
        pattern = (
            rf"^The recording of 'run_d' is damaged: {re.escape(what)}.*\. Record the run "
            r"again, or delete it\.$"
        )
        with pytest.raises(RecordingError, match=pattern):
            store.load("run_d")
        assert store.delete("run_d")


def test_signals_written_twice_are_kept_once(postgres_dsn: str) -> None:
    with PostgresSignalStore(postgres_dsn) as store:
        first = signals("run_twice", range(1, 6))
        for each in first:
            store.append(each)
        store.flush()
        for each in [*first[3:], *signals("run_twice", range(6, 8))]:  # 4 and 5 again
            store.append(each)
        recording = store.load("run_twice")
    assert [s.seq for s in recording.signals] == [1, 2, 3, 4, 5, 6, 7]
    assert recording.signals[:5] == tuple(first)
    assert recording.info.signals == 7


def test_a_small_backlog_slows_appends_and_loses_nothing(postgres_dsn: str) -> None:
    with PostgresSignalStore(postgres_dsn, batch_size=7, max_backlog=10) as store:
        for each in signals("run_b", range(1, 1001)):
            store.append(each)
        recording = store.load("run_b")
    assert [s.seq for s in recording.signals] == list(range(1, 1001))


def test_a_closed_store_refuses_to_read_or_record(postgres_dsn: str) -> None:
    store = PostgresSignalStore(postgres_dsn)
    store.close()
    with pytest.raises(
        RecordingError, match=r"^The signal store PostgresSignalStore\(.*\) is closed\.$"
    ):
        store.start_run(RunInfo(run_id="run_late"))
    with pytest.raises(
        RecordingError, match=r"^The signal store PostgresSignalStore\(.*\) is closed\.$"
    ):
        store.runs()
