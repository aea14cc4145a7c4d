"""One SQL store over two dialects: SQLite and PostgreSQL behave alike where they once drifted.

Each test runs on both (``store_place``): a closed store refuses a new run the same way,
signals written twice are kept and counted once, ``last`` breaks a tie of start times
the same way, the inbox keeps payloads in one encoding (the memory store's too), and a
database made by the layout before the shared schema version line opens, is migrated
forward, and reads what it held.
"""

from __future__ import annotations

import datetime
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from reactor import RecordingError, RunInfo, Signal, SignalStoreBase
from reactor._backends import postgres_db, sqlite_db
from reactor._backends.dialect import SCHEMA_VERSION
from reactor._recording.inbox import decode_payload, encode_payload
from tests.reactor.databases import StorePlace, execute


def test_a_closed_store_refuses_a_new_run_and_reads(store_place: StorePlace) -> None:
    store = store_place.open()
    store.append(Signal("harness:start", {}, seq=1, run_id="run_early"))
    store.close()
    closed = rf"^The signal store {type(store).__name__}\(.+\) is closed\.$"
    with pytest.raises(RecordingError, match=closed):
        store.start_run(RunInfo(run_id="run_late"))
    with pytest.raises(RecordingError, match=closed):
        store.runs()


def test_signals_written_twice_are_kept_and_counted_once(store_place: StorePlace) -> None:
    def signal(seq: int) -> Signal:
        payload = {} if seq == 1 else {"n": seq}
        name = "harness:start" if seq == 1 else "note"
        return Signal(name, payload, id=f"sig_{seq}", seq=seq, run_id="run_twice")

    with store_place.open() as store:
        for seq in range(1, 6):
            store.append(signal(seq))
        store.flush()
        for seq in (4, 5, 6, 7):  # 4 and 5 again, as after a commit whose answer was lost
            store.append(signal(seq))
        recording = store.load("run_twice")
    assert [s.seq for s in recording.signals] == [1, 2, 3, 4, 5, 6, 7]
    assert (recording.info.signals, recording.info.last_seq) == (7, 7)


def test_last_of_runs_started_at_once_is_the_greatest_run_id(store_place: StorePlace) -> None:
    with store_place.open() as store:
        for run_id in ("run_b", "run_c", "run_a"):
            store.start_run(RunInfo(run_id=run_id, started_at=1_700_000_000.0))
        store.flush()
        assert store.resolve("last") == "run_c"
        assert [info.run_id for info in store.runs()] == ["run_c", "run_b", "run_a"]


PAYLOAD = {
    "when": datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.UTC),
    "pair": (1, 2),
    "text": "é\u2028",
    "nested": {"b": [1.5, None, True]},
}


def test_every_store_gives_a_posted_payload_back_in_the_one_encoding(
    any_store: SignalStoreBase,
) -> None:
    any_store.append(Signal("harness:start", {}, seq=1, run_id="run_p"))
    any_store.flush()
    any_store.post("run_p", "note", PAYLOAD)
    [posted] = any_store.undelivered(["run_p"])
    assert posted.payload == decode_payload(encode_payload(PAYLOAD))
    assert posted.payload == {
        "when": "2026-01-02T03:04:05Z",
        "pair": [1, 2],
        "text": "é\u2028",
        "nested": {"b": [1.5, None, True]},
    }


# -- a database of the layout before the shared version line ---------------------------

_OLD_RUN = "run_old"


def _old_sqlite(path: Path) -> None:
    """A SQLite file as reactor made it at schema 8 (its own line), holding one run."""
    with sqlite3.connect(path) as conn:
        for script in sqlite_db._MIGRATIONS[:8]:
            for statement in script.split(";"):
                if statement.strip():
                    conn.execute(statement)
        conn.execute("PRAGMA user_version = 8")
        _old_rows(conn.execute, "", "?")
    conn.close()


def _old_postgres(dsn: str) -> None:
    """PostgreSQL tables as reactor made them at schema 7 (their own line), holding one run."""
    execute(dsn, "CREATE TABLE reactor_schema (version integer NOT NULL)")
    for step, statements in postgres_db._MIGRATIONS.items():
        for statement in statements if step <= 7 else ():
            execute(dsn, statement)
    execute(dsn, "INSERT INTO reactor_schema VALUES (7)")
    _old_rows(lambda sql, params=(): execute(dsn, sql, params), "reactor_", "%s")


def _old_rows(run: Any, prefix: str, mark: str) -> None:
    """One ended run of two signals, written as the writer of that layout wrote it."""
    marks = ", ".join([mark] * 9)
    run(
        f"INSERT INTO {prefix}runs (run_id, graph, started_at, ended_at, status, signals, "
        f"last_seq) VALUES ({mark}, 'g', 1700000000.0, 1700000001.0, 'completed', 2, 2)",
        (_OLD_RUN,),
    )
    for seq, name, payload in ((1, "harness:start", '{"graph": "g"}'), (2, "note", '{"n": 1}')):
        run(
            f"INSERT INTO {prefix}signals (run_id, seq, id, name, payload, timestamp, source, "
            f"caused_by, depth) VALUES ({marks})",
            (_OLD_RUN, seq, f"sig_{seq}", name, payload, 1700000000.0 + seq, None, None, 0),
        )


def _version(place: StorePlace) -> int:
    if place.kind == "sqlite":
        with sqlite3.connect(place.where) as conn:
            version: int = conn.execute("PRAGMA user_version").fetchone()[0]
        conn.close()
        return version
    return int(execute(place.where, "SELECT version FROM reactor_schema")[0][0])


def _indexes(place: StorePlace) -> set[str]:
    if place.kind == "sqlite":
        with sqlite3.connect(place.where) as conn:
            rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'").fetchall()
        conn.close()
        return {row[0] for row in rows}
    rows = execute(place.where, "SELECT indexname FROM pg_indexes WHERE schemaname = 'public'")
    return {str(row[0]).removeprefix("reactor_") for row in rows}


def test_a_database_of_the_layout_before_is_migrated_and_reads_its_runs(
    store_place: StorePlace,
) -> None:
    if store_place.kind == "sqlite":
        Path(store_place.where).parent.mkdir(parents=True, exist_ok=True)
        _old_sqlite(Path(store_place.where))
    else:
        _old_postgres(store_place.where)
    assert _version(store_place) < SCHEMA_VERSION
    with store_place.open() as store:
        recording = store.load(_OLD_RUN)
        assert [(s.seq, s.name, s.payload) for s in recording.signals] == [
            (1, "harness:start", {"graph": "g"}),
            (2, "note", {"n": 1}),
        ]
        assert recording.info.status == "completed"
        store.append(Signal("harness:start", {}, seq=1, run_id="run_new"))
        store.flush()
        assert store.resolve("last") == "run_new"
    assert _version(store_place) == SCHEMA_VERSION == 9
    assert {"runs_graph", "run_tags_key", "signals_asking", "signals_snapshots"} <= _indexes(
        store_place
    )
