"""The SQLite file of a signal store: schema, migrations, connections, reading rows back."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

import pydantic_core

from reactor._backends.tally import ASKING
from reactor._recording.info import RunInfo
from reactor._signals.names import (
    HARNESS_END,
    HARNESS_SNAPSHOT,
    HARNESS_START,
    PROVIDER_END,
    parse_state_event,
)
from reactor._signals.signal import Signal
from reactor.exceptions import RecordingError

__all__ = [
    "ASKING_INDEX",
    "INFO",
    "SCHEMA_VERSION",
    "STATUS",
    "WAKEUPS",
    "connect",
    "connect_readonly",
    "decode_info",
    "decode_signal",
    "migrate",
    "prune_runs",
    "retag_run",
]

SCHEMA_VERSION = 8

ASKING_INDEX = f"name IN ({', '.join(repr(name) for name in ASKING)})"
"""The predicate of the partial index of questions and timers (a query repeats it to use it)."""


_SCHEMA_1 = """
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,
    graph TEXT,
    target TEXT,
    started_at REAL NOT NULL,
    ended_at REAL,
    status TEXT,
    reason TEXT,
    signals INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS runs_started_at ON runs (started_at);
CREATE TABLE IF NOT EXISTS run_tags (
    run_id TEXT NOT NULL,
    key TEXT NOT NULL,
    value TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (run_id, key)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS signals (
    run_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    id TEXT NOT NULL,
    name TEXT NOT NULL,
    payload TEXT,
    timestamp REAL NOT NULL,
    source TEXT,
    caused_by TEXT,
    depth INTEGER NOT NULL,
    PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS requests (
    run_id TEXT NOT NULL,
    request_hash TEXT NOT NULL,
    agent TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    PRIMARY KEY (run_id, request_hash)
) WITHOUT ROWID;
"""

_MIGRATIONS = (
    _SCHEMA_1,
    # 2: the hash of the graph's source file, checked before a recorded target is
    # imported; how many activations failed
    "ALTER TABLE runs ADD COLUMN target_hash TEXT;"
    "ALTER TABLE runs ADD COLUMN failures INTEGER NOT NULL DEFAULT 0",
    # 3: questions to people pending (a running run is waiting while some are), and the
    # inbox of messages posted to runs
    """
    ALTER TABLE runs ADD COLUMN prompts INTEGER NOT NULL DEFAULT 0;
    CREATE TABLE IF NOT EXISTS inbox (
        position INTEGER PRIMARY KEY AUTOINCREMENT,
        message_id TEXT NOT NULL UNIQUE,
        run_id TEXT NOT NULL,
        name TEXT NOT NULL,
        payload TEXT,
        source TEXT NOT NULL,
        posted_at REAL NOT NULL,
        delivered_seq INTEGER
    );
    CREATE INDEX IF NOT EXISTS inbox_waiting ON inbox (run_id) WHERE delivered_seq IS NULL
    """,
    # 4: the run that started a run with ctx.spawn
    "ALTER TABLE runs ADD COLUMN parent_run_id TEXT",
    # 5: the run a fork began with; a run's latest snapshot found without reading its
    # log (a partial index: only snapshots are in it); ended runs by age, for prune
    "ALTER TABLE runs ADD COLUMN forked_from TEXT;"
    "CREATE INDEX IF NOT EXISTS signals_snapshots ON signals (run_id, seq) "
    f"WHERE name = '{HARNESS_SNAPSHOT}';"
    "CREATE INDEX IF NOT EXISTS runs_ended_at ON runs (ended_at) WHERE ended_at IS NOT NULL",
    # 6: durable timers (ctx.sleep) pending, and messages posted to be delivered later
    """
    CREATE TABLE IF NOT EXISTS timers (
        run_id TEXT NOT NULL,
        timer_id TEXT NOT NULL,
        agent TEXT NOT NULL,
        due_at REAL NOT NULL,
        PRIMARY KEY (run_id, timer_id)
    ) WITHOUT ROWID;
    CREATE INDEX IF NOT EXISTS timers_due ON timers (due_at);
    ALTER TABLE inbox ADD COLUMN due_at REAL;
    CREATE INDEX IF NOT EXISTS inbox_due ON inbox (due_at)
        WHERE delivered_seq IS NULL AND due_at IS NOT NULL
    """,
    # 7: counters kept as a run is written (its last seq, the tokens and cost of its
    # model calls) and its latest state, so that showing a run reads no log; its
    # questions and timers found through a partial index. Runs recorded before get
    # their counters here; their state stays unknown (NULL: read from the log's tail).
    f"""
    ALTER TABLE runs ADD COLUMN last_seq INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE runs ADD COLUMN input_tokens INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE runs ADD COLUMN output_tokens INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE runs ADD COLUMN cost_usd REAL DEFAULT 0;
    ALTER TABLE runs ADD COLUMN state TEXT;
    UPDATE runs SET last_seq = COALESCE(
        (SELECT MAX(s.seq) FROM signals s WHERE s.run_id = runs.run_id), 0);
    UPDATE runs SET
        input_tokens = COALESCE((SELECT SUM(json_extract(s.payload, '$.usage.input_tokens'))
            FROM signals s WHERE s.run_id = runs.run_id AND s.name = '{PROVIDER_END}'), 0),
        output_tokens = COALESCE((SELECT SUM(json_extract(s.payload, '$.usage.output_tokens'))
            FROM signals s WHERE s.run_id = runs.run_id AND s.name = '{PROVIDER_END}'), 0),
        cost_usd = (SELECT CASE WHEN COUNT(*) = COUNT(json_extract(s.payload, '$.cost_usd'))
            THEN COALESCE(SUM(json_extract(s.payload, '$.cost_usd')), 0) END
            FROM signals s WHERE s.run_id = runs.run_id AND s.name = '{PROVIDER_END}');
    CREATE INDEX IF NOT EXISTS signals_asking ON signals (run_id, seq) WHERE {ASKING_INDEX}
    """,
    # 8: each run's signals hash-chained (reactor._recording.chain: a signal's hash),
    # and when the store began to chain them: a signal written since without a hash
    # had it removed. Signals written before keep no hash (verify says so).
    "ALTER TABLE signals ADD COLUMN hash TEXT;"
    "CREATE TABLE IF NOT EXISTS audit_chain (since REAL NOT NULL);"
    "INSERT INTO audit_chain (since) VALUES ((julianday('now') - 2440587.5) * 86400.0)",
)
"""Schema version N is reached by running the first N scripts, in order."""


def connect(path: Path, timeout: float = 30.0) -> sqlite3.Connection:
    """Open the database for reading and writing (WAL); ``timeout``: SQLite's busy wait."""
    conn = sqlite3.connect(path, timeout=timeout, isolation_level=None, check_same_thread=False)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
    except sqlite3.DatabaseError as exc:
        conn.close()
        raise RecordingError(f"{path} is not a reactor run database ({exc}).") from exc
    return conn


def connect_readonly(path: Path) -> sqlite3.Connection:
    """Open an existing database for reading only: nothing is created, migrated or changed.

    Without a ``-wal`` file (no writer has it open, and the last one checkpointed)
    the file is opened as immutable, so SQLite does not leave ``-wal`` and ``-shm``
    files beside it either.

    Raises:
        RecordingError: No such file, not a reactor database, or another schema.
    """
    if not path.exists():
        raise RecordingError(f"There is no run database at {path}; check the path.")
    if not path.is_file():
        raise RecordingError(f"{path} is not a reactor run database (it is not a file).")
    writing = path.with_name(path.name + "-wal").exists()
    uri = path.resolve().as_uri() + ("?mode=ro" if writing else "?mode=ro&immutable=1")
    try:
        conn = sqlite3.connect(
            uri, uri=True, timeout=30.0, isolation_level=None, check_same_thread=False
        )
    except sqlite3.Error as exc:
        raise RecordingError(f"{path} cannot be opened ({exc}).") from exc
    try:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
    except sqlite3.Error as exc:
        conn.close()
        raise RecordingError(f"{path} is not a reactor run database ({exc}).") from exc
    problem = None
    if version > SCHEMA_VERSION:
        problem = (
            f"{path} was written by a newer reactor (schema {version}, this one reads "
            f"{SCHEMA_VERSION}); upgrade reactor to read it."
        )
    elif version < 1 or not {"runs", "signals", "run_tags", "requests"} <= tables:
        problem = f"{path} is not a reactor run database (it has no runs table)."
    elif version < SCHEMA_VERSION:
        problem = (
            f"{path} was written by an older reactor (schema {version}); record a run to "
            f"it (or open SQLiteSignalStore({str(path)!r}) once) to upgrade it to schema "
            f"{SCHEMA_VERSION}."
        )
    if problem is not None:
        conn.close()
        raise RecordingError(problem)
    return conn


def migrate(conn: sqlite3.Connection, path: Path) -> None:
    """Bring the schema up to date (nothing to write, and no lock taken, when it is)."""
    try:
        if conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION:
            return
        conn.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError as exc:
        if "locked" in str(exc) or "busy" in str(exc):
            raise RecordingError(
                f"{path} is locked by another process ({exc}), so its schema cannot be "
                "prepared; try again when it is released."
            ) from exc
        raise RecordingError(f"{path} is not a reactor run database ({exc}).") from exc
    except sqlite3.DatabaseError as exc:
        raise RecordingError(f"{path} is not a reactor run database ({exc}).") from exc
    try:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise RecordingError(
                f"{path} was written by a newer reactor (schema {version}, this one reads "
                f"{SCHEMA_VERSION}); upgrade reactor to read it."
            )
        if version < SCHEMA_VERSION:
            for script in _MIGRATIONS[version:]:
                for statement in script.split(";"):
                    if statement.strip():
                        conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        conn.execute("COMMIT")
    except sqlite3.DatabaseError as exc:
        conn.execute("ROLLBACK")
        raise RecordingError(f"{path} is not a reactor run database ({exc}).") from exc
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def _damaged(run_id: str, what: str) -> RecordingError:
    return RecordingError(
        f"The recording of {run_id!r} is damaged: {what}. Record the run again, or delete it."
    )


def decode_signal(run_id: str, row: tuple[Any, ...]) -> Signal:
    """One row of the ``signals`` table as a signal, checked for what readers rely on.

    Raises:
        RecordingError: The row is damaged (names the run, the signal and the fault).
    """
    seq, signal_id, name, payload, timestamp, source, caused_by, depth = row
    if not isinstance(seq, int) or not isinstance(name, str):
        raise _damaged(run_id, f"a signal has the seq {seq!r} and the name {name!r}")
    where = f"signal #{seq} ({name!r})"
    if type(timestamp) not in (int, float):
        raise _damaged(run_id, f"{where} has the timestamp {timestamp!r}, not a number")
    if not isinstance(depth, int):
        raise _damaged(run_id, f"{where} has the depth {depth!r}, not a whole number")
    for field, value in (("id", signal_id), ("source", source), ("caused_by", caused_by)):
        if value is not None and not isinstance(value, str):
            raise _damaged(run_id, f"{where} has the {field} {value!r}, not text")
    try:
        data = None if payload is None else pydantic_core.from_json(payload)
    except ValueError as exc:
        raise _damaged(run_id, f"{where} has a payload that is not JSON ({exc})") from exc
    state = parse_state_event(name)
    if name in (HARNESS_START, HARNESS_END) and not isinstance(data, dict):
        raise _damaged(run_id, f"{where} has a payload that is not an object")
    if (
        state is not None
        and state[1] == "changed"
        and not (isinstance(data, dict) and isinstance(data.get("key"), str) and "new" in data)
    ):
        raise _damaged(run_id, f"{where} has no key and new value in its payload")
    return Signal(
        name,
        data,
        id=signal_id,
        seq=seq,
        timestamp=float(timestamp),
        source=source,
        caused_by=caused_by,
        depth=depth,
        run_id=run_id,
    )


_TEXT = ("graph", "target", "target_hash", "status", "reason", "parent_run_id", "forked_from")
_COUNTS = ("failures", "signals", "last_seq", "input_tokens", "output_tokens", "prompts")


def decode_info(row: tuple[Any, ...]) -> RunInfo:
    """One row of the runs listing (:data:`INFO`) as a :class:`RunInfo`, checked.

    Raises:
        RecordingError: The row is damaged (names the run and the fault).
    """
    (
        run_id, graph, target, target_hash, started, ended, status, reason, failures, count,
        tags, parent, forked, last_seq, tokens_in, tokens_out, cost, prompts,
    ) = row  # fmt: skip
    if not isinstance(run_id, str):
        raise RecordingError(f"A run has the id {run_id!r}, not text; the database is damaged.")
    texts = (graph, target, target_hash, status, reason, parent, forked)
    for field, value in zip(_TEXT, texts, strict=True):
        if value is not None and not isinstance(value, str):
            raise _damaged(run_id, f"its {field} is {value!r}, not text")
    for field, value, optional in (("started_at", started, False), ("ended_at", ended, True)):
        if not (type(value) in (int, float) or (optional and value is None)):
            raise _damaged(run_id, f"its {field} is {value!r}, not a time in seconds")
    counts = (failures, count, last_seq, tokens_in, tokens_out, prompts)
    for field, value in zip(_COUNTS, counts, strict=True):
        if not isinstance(value, int):
            raise _damaged(run_id, f"its {field} count is {value!r}, not a whole number")
    if cost is not None and type(cost) not in (int, float):
        raise _damaged(run_id, f"its cost is {cost!r}, not a number")
    try:
        tag_map = json.loads(tags) if tags else {}
    except ValueError as exc:
        raise _damaged(run_id, f"its tags are not readable ({exc})") from exc
    return RunInfo(
        run_id=run_id,
        graph=graph,
        target=target,
        target_hash=target_hash,
        started_at=float(started),
        ended_at=None if ended is None else float(ended),
        status=status,
        reason=reason,
        failures=failures,
        signals=count,
        last_seq=last_seq,
        input_tokens=tokens_in,
        output_tokens=tokens_out,
        cost_usd=None if cost is None else round(float(cost), 6),
        prompts=max(0, prompts),
        parent_run_id=parent,
        forked_from=forked,
        tags={str(key): str(value) for key, value in tag_map.items()},
    )


STATUS = (
    "COALESCE(r.status, CASE WHEN r.prompts > 0 "
    "OR EXISTS (SELECT 1 FROM timers t WHERE t.run_id = r.run_id) "
    "OR EXISTS (SELECT 1 FROM inbox i WHERE i.run_id = r.run_id AND i.delivered_seq IS NULL "
    "AND i.due_at IS NOT NULL) THEN 'waiting' ELSE 'running' END)"
)
"""A run's status: final once ended, else waiting while a question, a timer or a
scheduled message is pending."""

INFO = (
    "SELECT r.run_id, r.graph, r.target, r.target_hash, r.started_at, r.ended_at, "
    f"{STATUS}, r.reason, r.failures, r.signals, (SELECT json_group_object(t.key, t.value) "
    "FROM run_tags t WHERE t.run_id = r.run_id), r.parent_run_id, r.forked_from, r.last_seq, "
    "r.input_tokens, r.output_tokens, r.cost_usd, r.prompts FROM runs r "
)
"""The columns of a :class:`RunInfo` (:func:`decode_info`), from ``runs r``."""

WAKEUPS = (
    "SELECT w.run_id, MIN(w.due_at) FROM (SELECT run_id, due_at FROM timers UNION ALL "
    "SELECT run_id, due_at FROM inbox WHERE delivered_seq IS NULL AND due_at IS NOT NULL) w "
    "JOIN runs r ON r.run_id = w.run_id WHERE r.ended_at IS NULL GROUP BY w.run_id "
    "HAVING MIN(w.due_at) < ? ORDER BY 2, 1"
)
"""Runs not ended with their next timer or scheduled message (``timers``, ``inbox``)."""


PRUNABLE = (
    "SELECT run_id FROM (SELECT run_id, ended_at, ROW_NUMBER() OVER "
    "(PARTITION BY graph ORDER BY started_at DESC, run_id DESC) AS newest FROM runs "
    "WHERE ended_at IS NOT NULL AND status IS NOT NULL{statuses}) "
    "WHERE newest > ? AND ended_at < ?"
)
"""The ended runs ``prune`` deletes: older than the cutoff, past the newest of their graph."""


def prune_runs(
    conn: sqlite3.Connection,
    cutoff: float,
    statuses: tuple[str, ...] | None,
    keep_last: int,
    dry_run: bool,
) -> int:
    """Delete ended runs (and their signals, tags, requests, inbox) in one transaction.

    The rows are chosen and deleted under one write lock (``BEGIN IMMEDIATE``), so a
    run is deleted whole or not at all, and nothing changes between the two.
    """
    marks = "" if statuses is None else f" AND status IN ({', '.join('?' * len(statuses))})"
    params = (*(statuses or ()), keep_last, cutoff)
    conn.execute("BEGIN IMMEDIATE")
    try:
        ids = [row[0] for row in conn.execute(PRUNABLE.format(statuses=marks), params)]
        if ids and not dry_run:
            conn.execute("CREATE TEMP TABLE IF NOT EXISTS pruned (run_id TEXT PRIMARY KEY)")
            conn.execute("DELETE FROM pruned")
            conn.executemany("INSERT INTO pruned VALUES (?)", [(run_id,) for run_id in ids])
            for table in ("signals", "run_tags", "requests", "inbox", "timers", "runs"):
                conn.execute(f"DELETE FROM {table} WHERE run_id IN (SELECT run_id FROM pruned)")
            conn.execute("DELETE FROM pruned")
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return len(ids)


def retag_run(
    conn: sqlite3.Connection, run_id: str, tags: Mapping[str, str], remove: Collection[str]
) -> bool:
    """Set and drop a run's tags in one transaction; whether the run exists."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        found = conn.execute("SELECT 1 FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        if found is not None:
            conn.executemany(
                "DELETE FROM run_tags WHERE run_id = ? AND key = ?", [(run_id, k) for k in remove]
            )
            conn.executemany(
                "INSERT OR REPLACE INTO run_tags (run_id, key, value) VALUES (?, ?, ?)",
                [(run_id, key, value) for key, value in tags.items()],
            )
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return found is not None
