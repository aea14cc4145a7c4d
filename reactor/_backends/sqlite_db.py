"""The SQLite file of a signal store: its schema, its migrations, opening it."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from reactor._backends.dialect import SCHEMA_VERSION
from reactor._backends.tally import ASKING_INDEX
from reactor._signals.names import HARNESS_SNAPSHOT, PROVIDER_END
from reactor.exceptions import RecordingError

__all__ = ["connect", "connect_readonly", "migrate"]


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
    # 9: one version line with PostgreSQL's store from here on; the indexes it had and
    # this file lacked (runs by graph, tags by key)
    "CREATE INDEX IF NOT EXISTS runs_graph ON runs (graph, started_at);"
    "CREATE INDEX IF NOT EXISTS run_tags_key ON run_tags (key, value)",
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
