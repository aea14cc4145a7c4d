"""The PostgreSQL tables of a signal store: the URL, connections, and the versioned schema.

Every table is prefixed ``reactor_`` so that the store can share a database with an
application's own tables (and with the service's). ``reactor_schema`` holds the schema
version; :func:`migrate` brings the tables up to date under an advisory lock, so
processes that open a new database at the same moment do not race to create them.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Mapping, Sequence
from typing import Any

import psycopg
import pydantic_core
from psycopg.conninfo import conninfo_to_dict

from reactor._backends.tally import ASKING
from reactor._recording.inbox import Posted
from reactor._recording.info import RunInfo
from reactor._signals.names import HARNESS_SNAPSHOT, PROVIDER_END
from reactor._signals.signal import Signal
from reactor.exceptions import RecordingError

__all__ = [
    "ASKING_INDEX",
    "INFO",
    "SCHEMA_VERSION",
    "STATUS",
    "WAKEUPS",
    "Damaged",
    "check_url",
    "connect",
    "delete_run",
    "describe",
    "info_of",
    "migrate",
    "prune_runs",
    "read_inbox",
    "requests_of",
    "retag_run",
    "shown",
    "signals_of",
]

SCHEMA_VERSION = 7

ASKING_INDEX = f"name IN ({', '.join(repr(name) for name in ASKING)})"
"""The predicate of the partial index of questions and timers (a query repeats it to use it)."""

_MIGRATION_LOCK = 0x7265_6163_746F_7201
"""The advisory lock held while the schema is checked and migrated ("reactor" + 1)."""

_MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (
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
    (
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
    (
        # 3: the run that started a run with ctx.spawn
        "ALTER TABLE reactor_runs ADD COLUMN parent_run_id text",
    ),
    (
        # 4: the run a fork began with; a run's latest snapshot found without reading
        # its log (a partial index: only snapshots are in it); ended runs by age
        "ALTER TABLE reactor_runs ADD COLUMN forked_from text",
        "CREATE INDEX reactor_signals_snapshots ON reactor_signals (run_id, seq) "
        f"WHERE name = '{HARNESS_SNAPSHOT}'",
        "CREATE INDEX reactor_runs_ended_at ON reactor_runs (ended_at) WHERE ended_at IS NOT NULL",
    ),
    (
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
    (
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
    (
        # 7: each run's signals hash-chained (reactor._recording.chain: a signal's
        # hash), and when the store began to chain them: a signal written since without
        # a hash had it removed. Signals written before keep no hash (verify says so).
        "ALTER TABLE reactor_signals ADD COLUMN hash text",
        "CREATE TABLE reactor_audit_chain (since double precision NOT NULL)",
        "INSERT INTO reactor_audit_chain VALUES (extract(epoch FROM clock_timestamp()))",
    ),
)
"""Schema version N is reached by running the first N groups of statements, in order."""


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
                for statements in _MIGRATIONS[version:]:
                    for statement in statements:
                        conn.execute(statement)
                conn.execute("DELETE FROM reactor_schema")
                conn.execute("INSERT INTO reactor_schema VALUES (%s)", (SCHEMA_VERSION,))
    except psycopg.Error as exc:
        raise RecordingError(
            f"Cannot prepare the reactor tables in {where} ({describe(exc)}); "
            "give the store a database (or a user) that may create them."
        ) from exc


def describe(error: BaseException) -> str:
    """An error in one line, for messages: its type and the first line of its text."""
    text = str(error).strip()
    first = text.splitlines()[0].rstrip(".") if text else ""
    return f"{type(error).__name__}: {first}" if first else type(error).__name__


def info_of(row: Sequence[Any]) -> RunInfo:
    """A row of the runs listing (:data:`INFO`) as a :class:`RunInfo`."""
    (
        run_id, graph, target, target_hash, started, ended, status, reason, failures, count,
        tags, parent, forked, last_seq, tokens_in, tokens_out, cost, prompts,
    ) = row  # fmt: skip
    return RunInfo(
        run_id=run_id,
        graph=graph,
        target=target,
        target_hash=target_hash,
        started_at=started,
        ended_at=ended,
        status=status,
        reason=reason,
        failures=failures,
        signals=count,
        last_seq=last_seq,
        input_tokens=tokens_in,
        output_tokens=tokens_out,
        cost_usd=None if cost is None else round(float(cost), 6),
        prompts=max(0, prompts),
        tags=pydantic_core.from_json(tags) if tags else {},
        parent_run_id=parent,
        forked_from=forked,
    )


STATUS = (
    "COALESCE(r.status, CASE WHEN r.prompts > 0 "
    "OR EXISTS (SELECT 1 FROM reactor_timers t WHERE t.run_id = r.run_id) "
    "OR EXISTS (SELECT 1 FROM reactor_inbox i WHERE i.run_id = r.run_id "
    "AND i.delivered_seq IS NULL AND i.due_at IS NOT NULL) THEN 'waiting' ELSE 'running' END)"
)
"""A run's status: final once ended, else waiting while a question, a timer or a
scheduled message is pending."""

WAKEUPS = (
    "SELECT w.run_id, MIN(w.due_at) FROM (SELECT run_id, due_at FROM reactor_timers UNION ALL "
    "SELECT run_id, due_at FROM reactor_inbox WHERE delivered_seq IS NULL AND due_at IS NOT "
    "NULL) w JOIN reactor_runs r ON r.run_id = w.run_id WHERE r.ended_at IS NULL "
    "GROUP BY w.run_id HAVING MIN(w.due_at) < %s ORDER BY 2, 1"
)
"""Runs not ended with their next timer or scheduled message."""

INFO = (
    "SELECT r.run_id, r.graph, r.target, r.target_hash, r.started_at, r.ended_at, "
    f"{STATUS}, "
    "r.reason, r.failures, r.signals, (SELECT json_object_agg(t.key, t.value)::text "
    "FROM reactor_run_tags t WHERE t.run_id = r.run_id), r.parent_run_id, r.forked_from, "
    "r.last_seq, r.input_tokens, r.output_tokens, r.cost_usd, r.prompts FROM reactor_runs r "
)


PRUNABLE = (
    "SELECT run_id FROM (SELECT run_id, ended_at, ROW_NUMBER() OVER "
    "(PARTITION BY graph ORDER BY started_at DESC, run_id DESC) AS newest FROM reactor_runs "
    "WHERE ended_at IS NOT NULL AND status IS NOT NULL AND (%s::text[] IS NULL OR "
    "status = ANY(%s::text[]))) AS ended WHERE newest > %s AND ended_at < %s"
)
"""The ended runs ``prune`` deletes: older than the cutoff, past the newest of their graph."""


def prune_runs(
    conn: psycopg.Connection[Any],
    cutoff: float,
    statuses: tuple[str, ...] | None,
    keep_last: int,
    dry_run: bool,
) -> int:
    """Delete ended runs (and their signals, tags, requests, inbox) in one transaction.

    The runs chosen are locked (``FOR UPDATE``) before their rows are deleted, so a
    run is deleted whole or not at all, also while another process prunes.
    """
    chosen = None if statuses is None else list(statuses)
    with conn.transaction():
        rows = conn.execute(
            f"SELECT run_id FROM reactor_runs WHERE run_id IN ({PRUNABLE}) "
            "ORDER BY run_id FOR UPDATE",
            (chosen, chosen, keep_last, cutoff),
        ).fetchall()
        ids = [row[0] for row in rows]
        if ids and not dry_run:
            for table in ("signals", "run_tags", "requests", "inbox", "timers", "runs"):
                conn.execute(f"DELETE FROM reactor_{table} WHERE run_id = ANY(%s)", (ids,))
    return len(ids)


def delete_run(conn: psycopg.Connection[Any], run_id: str) -> bool:
    """Delete a run, its signals, tags, requests, inbox and timers; whether it existed."""
    found = 0
    with conn.transaction():
        for table in ("runs", "signals", "run_tags", "requests", "inbox", "timers"):
            found += conn.execute(
                f"DELETE FROM reactor_{table} WHERE run_id = %s", (run_id,)
            ).rowcount
    return found > 0


def retag_run(
    conn: psycopg.Connection[Any], run_id: str, tags: Mapping[str, str], remove: Collection[str]
) -> bool:
    """Set and drop a run's tags in one transaction; whether the run exists."""
    with conn.transaction():
        found = conn.execute(
            "SELECT 1 FROM reactor_runs WHERE run_id = %s FOR UPDATE", (run_id,)
        ).fetchone()
        if found is not None:
            conn.execute(
                "DELETE FROM reactor_run_tags WHERE run_id = %s AND key = ANY(%s)",
                (run_id, list(remove)),
            )
            with conn.cursor() as cursor:
                cursor.executemany(
                    "INSERT INTO reactor_run_tags (run_id, key, value) VALUES (%s, %s, %s) "
                    "ON CONFLICT (run_id, key) DO UPDATE SET value = EXCLUDED.value",
                    [(run_id, key, value) for key, value in tags.items()],
                )
    return found is not None


class Damaged(Exception):
    """A row of a run that cannot be read: what it is, and what is wrong with it."""

    def __init__(self, what: str, problem: object) -> None:
        super().__init__(what)
        self.what, self.problem = what, problem


def signals_of(run_id: str, rows: Sequence[Sequence[Any]]) -> tuple[Signal, ...]:
    """Rows of ``reactor_signals`` as signals.

    Raises:
        Damaged: A payload is not JSON.
    """
    signals: list[Signal] = []
    from_json = pydantic_core.from_json
    for seq, signal_id, name, payload, timestamp, source, caused_by, depth in rows:
        try:
            data = from_json(payload) if payload is not None else None
        except ValueError as exc:
            raise Damaged(f"signal {seq}'s payload", exc) from exc
        signals.append(
            Signal(
                name,
                data,
                id=signal_id,
                seq=seq,
                timestamp=timestamp,
                source=source,
                caused_by=caused_by,
                depth=depth,
                run_id=run_id,
            )
        )
    return tuple(signals)


def requests_of(rows: Sequence[Sequence[Any]]) -> dict[str, Any]:
    """Rows of ``reactor_requests`` (hash, fingerprint) as the requests of a recording.

    Raises:
        Damaged: A fingerprint is not a JSON object.
    """
    requests: dict[str, Any] = {}
    for digest, fingerprint in rows:
        try:
            requests[digest] = pydantic_core.from_json(fingerprint)
        except ValueError as exc:
            raise Damaged(f"request {digest}", exc) from exc
        if not isinstance(requests[digest], dict):
            raise Damaged(f"request {digest}", "not a JSON object")
    return requests


def read_inbox(conn: psycopg.Connection[Any], run_ids: Collection[str], due: str) -> list[Posted]:
    """The undelivered messages of these runs whose ``due_at`` passes ``due`` (``%s``: now).

    The connection is taken with a short timeout: a run starting while the database is
    away waits briefly, not a pool's 30 s.
    """
    if not run_ids:
        return []
    rows = conn.execute(
        "SELECT message_id, run_id, name, payload::text, source, posted_at, due_at "
        "FROM reactor_inbox WHERE delivered_seq IS NULL AND run_id = ANY(%s) "
        f"AND {due} ORDER BY COALESCE(due_at, posted_at), position",
        (list(run_ids), time.time()),
    ).fetchall()
    return [
        Posted(
            mid, run, name, None if data is None else pydantic_core.from_json(data), source, at, d
        )
        for mid, run, name, data, source, at, d in rows
    ]
