"""The PostgreSQL tables of a signal store: the URL, connections, and the versioned schema.

Every table is prefixed ``reactor_`` so that the store can share a database with an
application's own tables (and with the service's). ``reactor_schema`` holds the schema
version; :func:`migrate` brings the tables up to date under an advisory lock, so
processes that open a new database at the same moment do not race to create them.
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict

from reactor._backends.dialect import SCHEMA_VERSION, describe
from reactor._backends.tally import ASKING_INDEX
from reactor._signals.names import HARNESS_SNAPSHOT, PROVIDER_END
from reactor.exceptions import RecordingError

__all__ = ["check_url", "connect", "migrate", "shown"]

_MIGRATION_LOCK = 0x7265_6163_746F_7201
"""The advisory lock held while the schema is checked and migrated ("reactor" + 1)."""

_MIGRATIONS: dict[int, tuple[str, ...]] = {
    1: (
        # Payloads and fingerprints are `json`, not `jsonb`: it keeps the text as
        # written (key order, "\u0000", which jsonb refuses), so a recording loads
        # exactly as it was emitted, and COPY does not build the binary form.
        """CREATE TABLE reactor_runs (
            run_id text PRIMARY KEY,
            graph text,
            target text,
            target_hash text,
            started_at double precision NOT NULL,
            ended_at double precision,
            status text,
            reason text,
            failures integer NOT NULL DEFAULT 0,
            signals bigint NOT NULL DEFAULT 0
        )""",
        "CREATE INDEX reactor_runs_started_at ON reactor_runs (started_at)",
        "CREATE INDEX reactor_runs_graph ON reactor_runs (graph, started_at)",
        """CREATE TABLE reactor_run_tags (
            run_id text NOT NULL,
            key text NOT NULL,
            value text NOT NULL DEFAULT '',
            PRIMARY KEY (run_id, key)
        )""",
        "CREATE INDEX reactor_run_tags_key ON reactor_run_tags (key, value)",
        """CREATE TABLE reactor_signals (
            run_id text NOT NULL,
            seq bigint NOT NULL,
            id text NOT NULL,
            name text NOT NULL,
            payload json,
            timestamp double precision NOT NULL,
            source text,
            caused_by text,
            depth integer NOT NULL,
            PRIMARY KEY (run_id, seq)
        )""",
        """CREATE TABLE reactor_requests (
            run_id text NOT NULL,
            request_hash text NOT NULL,
            agent text NOT NULL,
            fingerprint json NOT NULL,
            PRIMARY KEY (run_id, request_hash)
        )""",
    ),
    2: (
        # 2: questions to people pending (a running run is waiting while some are),
        # and the inbox of messages posted to runs
        "ALTER TABLE reactor_runs ADD COLUMN prompts integer NOT NULL DEFAULT 0",
        """CREATE TABLE reactor_inbox (
            position bigserial PRIMARY KEY,
            message_id text NOT NULL UNIQUE,
            run_id text NOT NULL,
            name text NOT NULL,
            payload json,
            source text NOT NULL,
            posted_at double precision NOT NULL,
            delivered_seq bigint
        )""",
        "CREATE INDEX reactor_inbox_waiting ON reactor_inbox (run_id) WHERE delivered_seq IS NULL",
    ),
    3: (
        # 3: the run that started a run with ctx.spawn
        "ALTER TABLE reactor_runs ADD COLUMN parent_run_id text",
    ),
    4: (
        # 4: the run a fork began with; a run's latest snapshot found without reading
        # its log (a partial index: only snapshots are in it); ended runs by age
        "ALTER TABLE reactor_runs ADD COLUMN forked_from text",
        "CREATE INDEX reactor_signals_snapshots ON reactor_signals (run_id, seq) "
        f"WHERE name = '{HARNESS_SNAPSHOT}'",
        "CREATE INDEX reactor_runs_ended_at ON reactor_runs (ended_at) WHERE ended_at IS NOT NULL",
    ),
    5: (
        # 5: durable timers (ctx.sleep) pending, and messages posted to be delivered later
        """CREATE TABLE reactor_timers (
            run_id text NOT NULL,
            timer_id text NOT NULL,
            agent text NOT NULL,
            due_at double precision NOT NULL,
            PRIMARY KEY (run_id, timer_id)
        )""",
        "CREATE INDEX reactor_timers_due ON reactor_timers (due_at)",
        "ALTER TABLE reactor_inbox ADD COLUMN due_at double precision",
        "CREATE INDEX reactor_inbox_due ON reactor_inbox (due_at) "
        "WHERE delivered_seq IS NULL AND due_at IS NOT NULL",
    ),
    6: (
        # 6: counters kept as a run is written (its last seq, the tokens and cost of its
        # model calls) and its latest state, so that showing a run reads no log; its
        # questions and timers found through a partial index. Runs recorded before get
        # their counters here; their state stays unknown (NULL: read from the log's tail).
        "ALTER TABLE reactor_runs ADD COLUMN last_seq bigint NOT NULL DEFAULT 0",
        "ALTER TABLE reactor_runs ADD COLUMN input_tokens bigint NOT NULL DEFAULT 0",
        "ALTER TABLE reactor_runs ADD COLUMN output_tokens bigint NOT NULL DEFAULT 0",
        "ALTER TABLE reactor_runs ADD COLUMN cost_usd double precision DEFAULT 0",
        "ALTER TABLE reactor_runs ADD COLUMN state json",
        "UPDATE reactor_runs r SET last_seq = COALESCE(s.last, 0) FROM (SELECT run_id, "
        "MAX(seq) AS last FROM reactor_signals GROUP BY run_id) s WHERE s.run_id = r.run_id",
        "UPDATE reactor_runs r SET input_tokens = s.tokens_in, output_tokens = s.tokens_out, "
        "cost_usd = s.cost FROM (SELECT run_id, "
        "COALESCE(SUM((payload->'usage'->>'input_tokens')::bigint), 0) AS tokens_in, "
        "COALESCE(SUM((payload->'usage'->>'output_tokens')::bigint), 0) AS tokens_out, "
        "CASE WHEN COUNT(*) = COUNT((payload->>'cost_usd')::float8) "
        "THEN COALESCE(SUM((payload->>'cost_usd')::float8), 0) END AS cost "
        f"FROM reactor_signals WHERE name = '{PROVIDER_END}' GROUP BY run_id) s "
        "WHERE s.run_id = r.run_id",
        f"CREATE INDEX reactor_signals_asking ON reactor_signals (run_id, seq) "
        f"WHERE {ASKING_INDEX}",
    ),
    7: (
        # 7: each run's signals hash-chained (reactor._recording.chain: a signal's
        # hash), and when the store began to chain them: a signal written since without
        # a hash had it removed. Signals written before keep no hash (verify says so).
        "ALTER TABLE reactor_signals ADD COLUMN hash text",
        "CREATE TABLE reactor_audit_chain (since double precision NOT NULL)",
        "INSERT INTO reactor_audit_chain VALUES (extract(epoch FROM clock_timestamp()))",
    ),
    # 8 was SQLite's alone. 9: one version line with SQLite's store from here on (these
    # tables had what it gained).
    9: (),
}
"""Schema version N is reached by running the groups of statements up to N, in order.

Below 9 the versions were this store's own (SQLite's file counted differently)."""


def check_url(dsn: str) -> str:
    """Return ``dsn`` if it is a PostgreSQL URL that libpq can parse.

    Raises:
        RecordingError: It is not one (another scheme, a key=value string, an unknown
            query parameter).
    """
    problem = "it does not start with postgresql:// or postgres://"
    if isinstance(dsn, str) and dsn.startswith(("postgresql://", "postgres://")):
        try:
            conninfo_to_dict(dsn)
        except psycopg.Error as exc:
            problem = describe(exc)
        else:
            return dsn
    raise RecordingError(
        f"{dsn!r} is not a PostgreSQL URL ({problem}); give one like "
        "'postgresql://user@localhost:5432/dbname'."
    )


def shown(dsn: str) -> str:
    """The URL without its password or options, for messages and ``repr``."""
    parts = conninfo_to_dict(dsn)
    user = f"{parts['user']}@" if parts.get("user") else ""
    host = str(parts.get("host") or "")
    port = f":{parts['port']}" if parts.get("port") else ""
    return f"postgresql://{user}{host}{port}/{parts.get('dbname') or ''}"


def connect(dsn: str) -> psycopg.Connection[tuple[Any, ...]]:
    """Open one connection (autocommit) to the store's database.

    Raises:
        RecordingError: The server cannot be reached or refuses the connection.
    """
    try:
        return psycopg.connect(dsn, autocommit=True, connect_timeout=10)
    except psycopg.Error as exc:
        raise RecordingError(
            f"Cannot connect to PostgreSQL at {shown(dsn)} ({describe(exc)}); "
            "check that the server is running and that the URL is right."
        ) from exc


def migrate(conn: psycopg.Connection[tuple[Any, ...]], where: str) -> None:
    """Create or upgrade the store's tables in one transaction, under an advisory lock.

    Raises:
        RecordingError: The tables were written by a newer reactor, or cannot be made
            (a table of the same name that reactor did not create, no permission).
    """
    try:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
            found = conn.execute("SELECT to_regclass('reactor_schema')").fetchone()
            if found is None or found[0] is None:
                conn.execute("CREATE TABLE reactor_schema (version integer NOT NULL)")
            row = conn.execute("SELECT max(version) FROM reactor_schema").fetchone()
            version = int(row[0]) if row is not None and row[0] is not None else 0
            if version > SCHEMA_VERSION:
                raise RecordingError(
                    f"The reactor tables in {where} were written by a newer reactor (schema "
                    f"{version}, this one reads {SCHEMA_VERSION}); upgrade reactor to read them."
                )
            if version < SCHEMA_VERSION:
                for step, statements in _MIGRATIONS.items():
                    for statement in statements if step > version else ():
                        conn.execute(statement)
                conn.execute("DELETE FROM reactor_schema")
                conn.execute("INSERT INTO reactor_schema VALUES (%s)", (SCHEMA_VERSION,))
    except psycopg.Error as exc:
        raise RecordingError(
            f"Cannot prepare the reactor tables in {where} ({describe(exc)}); "
            "give the store a database (or a user) that may create them."
        ) from exc
