"""Recordings in PostgreSQL: its dialect (a ``psycopg`` pool, ``COPY``), and its store."""

from __future__ import annotations

import atexit
import contextlib
import math
from collections.abc import Iterator
from typing import Any

import psycopg
from psycopg.errors import UniqueViolation
from psycopg_pool import ConnectionPool, PoolTimeout

from reactor._backends.dialect import Dialect
from reactor._backends.postgres_db import check_url, connect, migrate, shown
from reactor._backends.sql import SqlSignalStore
from reactor._backends.sql_writer import SIGNAL_COLUMNS
from reactor._recording.store import DEFAULT_SNAPSHOT_EVERY

__all__ = ["PostgresDialect", "PostgresSignalStore"]

_REFUSED = (psycopg.DataError, psycopg.IntegrityError, ValueError, TypeError)
"""What a write fails with for a value it holds (a NUL in a text column), not for the
database: such a batch is written again run by run."""


class PostgresDialect(Dialect):
    """A PostgreSQL database, its connections pooled; tables prefixed ``reactor_``.

    Each read takes a connection of the pool (autocommit) for one statement, with a
    short wait: while the database is away a read fails in seconds, not after a pool's
    30 s. Signals are written by ``COPY``.

    Args:
        dsn: A PostgreSQL URL (checked: :func:`~reactor._backends.postgres_db.check_url`).
        retry_for: Seconds a write is retried while the database is unreachable.
        pool_size: Most connections (the writer and readers share them).
    """

    prefix = "reactor_"
    mark = "%s"
    errors = (psycopg.Error,)
    duplicate = (UniqueViolation,)
    text = "{}::text"
    greatest = "GREATEST"
    tags_object = "json_object_agg(t.key, t.value)::text"
    snapshot = "(payload->>'seq')::bigint, (payload->'needs')::text"
    each = "unnest(?::text[]) AS ids (value)"
    for_update = " FOR UPDATE"
    json_mark = "?::json"

    def __init__(self, dsn: str, *, retry_for: float, pool_size: int) -> None:
        super().__init__()
        self.dsn, self.retry_for, self.pool_size = dsn, retry_for, pool_size
        self.shown = shown(dsn)
        self._pool: ConnectionPool[Any] | None = None

    def member(self, column: str) -> str:
        """``column = ANY(?)``: an index answers it."""
        return f"{column} = ANY(?)"

    def migrate(self) -> None:
        """Create or upgrade the tables (under an advisory lock), then open the pool."""
        with connect(self.dsn) as conn:
            migrate(conn, self.shown)
        self._pool = ConnectionPool(
            self.dsn,
            min_size=1,
            max_size=max(2, self.pool_size),
            kwargs={"autocommit": True},
            check=ConnectionPool.check_connection,
            name=f"reactor-recorder {self.shown}",
            open=True,
        )

    @contextlib.contextmanager
    def connection(self, *, wait: float | None = None, writing: bool = False) -> Iterator[Any]:
        """A connection of the pool; the writer's own one when the pool has none to give.

        After an outage the pool reconnects on its own, slowly backing off; the writer
        does not wait for it, so recording resumes as soon as the database is back.
        """
        assert self._pool is not None, "migrate() opens the pool"
        entered = False
        try:
            with self._pool.connection(timeout=10.0 if wait is None else wait) as conn:
                entered = True
                yield conn
        except PoolTimeout:
            if entered or not writing:
                raise
            timeout = max(1, math.ceil(wait or 1.0))
            with psycopg.connect(self.dsn, autocommit=True, connect_timeout=timeout) as own:
                yield own

    @contextlib.contextmanager
    def transaction(self, conn: Any) -> Iterator[Any]:
        """``conn.transaction()``; its cursor."""
        with conn.transaction(), conn.cursor() as cur:
            yield cur

    def insert_signals(
        self, cur: Any, rows: list[list[Any]], *, again: bool
    ) -> dict[str, int] | None:
        """``COPY`` the rows; ``again``, through a temporary table that skips those there."""
        if not again:
            with cur.copy(f"COPY reactor_signals ({SIGNAL_COLUMNS}) FROM STDIN") as copy:
                write_row = copy.write_row
                for row in rows:
                    write_row(row)
            return None
        cur.execute("CREATE TEMPORARY TABLE reactor_incoming (LIKE reactor_signals) ON COMMIT DROP")
        with cur.copy(f"COPY reactor_incoming ({SIGNAL_COLUMNS}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)
        cur.execute(
            f"INSERT INTO reactor_signals ({SIGNAL_COLUMNS}) SELECT {SIGNAL_COLUMNS} "
            "FROM reactor_incoming ON CONFLICT (run_id, seq) DO NOTHING RETURNING run_id"
        )
        counts: dict[str, int] = {}
        for (run_id,) in cur.fetchall():
            counts[run_id] = counts.get(run_id, 0) + 1
        return counts

    def transient(self, error: BaseException) -> str | None:
        """A lost connection, a server restarting, a deadlock, no connection to be had."""
        return "database unreachable" if isinstance(error, psycopg.OperationalError) else None

    def refused(self, error: BaseException) -> bool:
        """A value the database refuses (a NUL in text), a row there twice."""
        return isinstance(error, _REFUSED)

    def close(self) -> None:
        """Close the pool."""
        if self._pool is not None:
            self._pool.close()


class PostgresSignalStore(SqlSignalStore):
    """Recordings in a PostgreSQL database, shared safely by several processes.

    The store of long-lived deployments: the service and its workers record every run
    to one database and any of them reads any run. Every behaviour is
    :class:`~reactor._backends.sql.SqlSignalStore`'s (appends queued and written in
    batches by a thread, backpressure, failed runs): this class makes its dialect.
    Signals are written by ``COPY``; a write that fails because the database is briefly
    unavailable is retried on a fresh connection for up to ``retry_for`` seconds, then
    fails the runs being written, and the store records the next runs as soon as the
    database is back. The tables are prefixed ``reactor_`` (the database may hold other
    tables) and versioned; opening the store creates or upgrades them under an advisory
    lock.

    Args:
        dsn: A PostgreSQL URL, ``postgresql://user@host:5432/dbname`` (or
            ``postgres://...``).
        batch_size: Most queued items written per transaction.
        max_backlog: Queued signals beyond which the runs recording here wait for the
            writer, so memory stays bounded when signals come faster than the database
            takes them.
        retry_for: Seconds a write is retried while the database is unreachable before
            recording fails.
        pool_size: Most connections the store opens (the writer and readers share them).
        snapshot_every: A run recorded here writes a ``harness:snapshot`` every this
            many signals, so that resuming it reads only what came after the latest
            one (``None``: never).

    Raises:
        RecordingError: The URL is not a PostgreSQL URL, the server cannot be reached,
            or the tables were written by a newer version of reactor.
    """

    def __init__(
        self,
        dsn: str,
        *,
        batch_size: int = 2_000,
        max_backlog: int = 1_000,
        retry_for: float = 30.0,
        pool_size: int = 4,
        snapshot_every: int | None = DEFAULT_SNAPSHOT_EVERY,
    ) -> None:
        self.dsn = check_url(dsn)
        self.retry_for = retry_for
        dialect = PostgresDialect(self.dsn, retry_for=retry_for, pool_size=pool_size)
        dialect.migrate()
        super().__init__(
            dialect, batch_size=batch_size, max_backlog=max_backlog, snapshot_every=snapshot_every
        )
        atexit.register(self.close)
