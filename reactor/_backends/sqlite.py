"""Recordings in SQLite: its dialect (a pool of ``sqlite3`` connections), and its store."""

from __future__ import annotations

import contextlib
import json
import math
import os
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from reactor._backends.dialect import Dialect
from reactor._backends.sql import SqlSignalStore
from reactor._backends.sql_writer import SIGNAL_COLUMNS
from reactor._backends.sqlite_db import connect, connect_readonly, migrate
from reactor._recording.store import DEFAULT_SNAPSHOT_EVERY
from reactor.exceptions import RecordingError

__all__ = ["DEFAULT_PATH", "SQLiteDialect", "SQLiteSignalStore"]

DEFAULT_PATH = Path(".reactor") / "runs.db"
"""Where the CLI and the examples keep recordings by default."""

_IDLE = 4
"""Connections the pool keeps open when nobody uses them."""


class SQLiteDialect(Dialect):
    """A SQLite file (stdlib ``sqlite3``, WAL mode), its connections pooled.

    Every statement runs in autocommit, so no read transaction stays open, and in WAL
    mode readers and the writer do not block each other. Each thread takes a
    connection of the pool for the time of one call, so reads from several threads run
    side by side. A write transaction takes the write lock at once (``BEGIN
    IMMEDIATE``): what it reads stays what it read.

    Args:
        path: The database file.
        timeout: SQLite's busy wait, in seconds, before a locked write steps back to
            be retried (it is retried until the lock is released).
        readonly: Open the file read-only (it must exist; nothing is migrated).

    Raises:
        RecordingError: The file is not a reactor database (or, read-only, is missing
            or of another schema).
    """

    errors = (sqlite3.Error,)
    duplicate = (sqlite3.IntegrityError,)
    retry_for = math.inf

    def __init__(self, path: Path, timeout: float, *, readonly: bool) -> None:
        super().__init__()
        self.path, self.timeout, self.readonly = path, timeout, readonly
        self.shown = str(path)
        self._idle: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._closed = False

    def array(self, values: Sequence[Any]) -> Any:
        """``values`` as JSON text, for ``json_each``."""
        return json.dumps(list(values))

    def _open(self) -> sqlite3.Connection:
        if self.readonly:
            return connect_readonly(self.path)
        return connect(self.path, self.timeout)

    @contextlib.contextmanager
    def connection(self, *, wait: float | None = None, writing: bool = False) -> Iterator[Any]:
        """A connection of the pool for this thread, for the time of the block.

        One a database error went through is closed, not kept: the next is opened
        afresh (after a full disk or an I/O error).
        """
        with self._lock:
            if self._closed:
                raise RecordingError(f"The signal store {self.path} is closed.")
            conn = self._idle.pop() if self._idle else None
        if conn is None:
            conn = self._open()
        keep = True
        try:
            yield conn
        except sqlite3.DatabaseError as exc:
            keep = isinstance(exc, sqlite3.IntegrityError) or _locked(exc)
            raise
        finally:
            if conn.in_transaction:  # a failed statement inside BEGIN ... COMMIT
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
            with self._lock:
                keep = keep and not self._closed and len(self._idle) < _IDLE
                if keep:
                    self._idle.append(conn)
            if not keep:
                with contextlib.suppress(sqlite3.Error):  # broken already: nothing to release
                    conn.close()

    @contextlib.contextmanager
    def transaction(self, conn: Any) -> Iterator[Any]:
        """``BEGIN IMMEDIATE`` ... ``COMMIT`` (rolled back on an error); its cursor."""
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn.cursor()
            conn.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            raise

    def insert_signals(
        self, cur: Any, rows: list[list[Any]], *, again: bool
    ) -> dict[str, int] | None:
        """Insert signal rows; written ``again``, those there already are skipped."""
        marks = ", ".join("?" * 10)
        if not again:
            cur.executemany(f"INSERT INTO signals ({SIGNAL_COLUMNS}) VALUES ({marks})", rows)
            return None
        counts: dict[str, int] = {}
        for row in rows:
            cur.execute(f"INSERT OR IGNORE INTO signals ({SIGNAL_COLUMNS}) VALUES ({marks})", row)
            counts[row[0]] = counts.get(row[0], 0) + cur.rowcount
        return counts

    def transient(self, error: BaseException) -> str | None:
        """A lock held by another process passes."""
        return "database locked" if _locked(error) else None

    def refused(self, error: BaseException) -> bool:
        """Anything but the database's own failure (locked, full, I/O) is a value refused."""
        return not isinstance(error, sqlite3.OperationalError)

    def migrate(self) -> None:
        """Open the first connection, bringing the schema up to date (not read-only)."""
        first = self._open()
        if not self.readonly:
            try:
                migrate(first, self.path)
            except BaseException:
                first.close()
                raise
        self._idle.append(first)

    def close(self) -> None:
        """Close the idle connections; those in use close when they come back."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()


def _locked(error: BaseException) -> bool:
    text = str(error)
    return isinstance(error, sqlite3.OperationalError) and ("locked" in text or "busy" in text)


class SQLiteSignalStore(SqlSignalStore):
    """Recordings in a SQLite database (stdlib ``sqlite3``, WAL mode).

    Every behaviour is :class:`~reactor._backends.sql.SqlSignalStore`'s (appends queued
    and written in batches by a thread, backpressure, failed runs): this class makes
    its dialect. A database locked by another process is retried until it is released,
    keeping the signals; a full disk or an I/O error fails the runs being written, and
    the store reopens its connection and records the next runs once the cause is gone.
    Safe to open from several processes (WAL; writers wait on each other's locks). The
    schema is versioned (``PRAGMA user_version``).

    Args:
        path: The database file (parents are created). ``.reactor/runs.db`` by default.
        batch_size: Most signals written per transaction.
        max_backlog: Signals queued for writing beyond which the runs recording here
            wait for the writer (backpressure). A crash loses at most about that many.
        timeout: Seconds SQLite waits for another process's lock before the writer
            steps back and retries (it retries until the lock is released, keeping the
            signals; the runs wait meanwhile once the backlog is full).
        readonly: Only read: the file must exist, nothing is created, migrated or
            written (not even SQLite's ``-wal`` files when no writer has it open), and
            recording to the store raises. What inspecting tools use, so that looking
            at a database someone sent never changes it.
        snapshot_every: A run recorded here writes a ``harness:snapshot`` every this
            many signals, so that resuming it reads only what came after the latest
            one (``None``: never).

    Raises:
        RecordingError: The file is not a reactor database, or was written by a newer
            version of reactor; read-only, also: there is no such file, or it has an
            older schema.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] = DEFAULT_PATH,
        *,
        batch_size: int = 2_000,
        max_backlog: int = 1_000,
        readonly: bool = False,
        timeout: float = 30.0,
        snapshot_every: int | None = DEFAULT_SNAPSHOT_EVERY,
    ) -> None:
        self.path = Path(path)
        self.timeout = timeout
        if not readonly:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        dialect = SQLiteDialect(self.path, timeout, readonly=readonly)
        dialect.migrate()
        super().__init__(
            dialect, batch_size=batch_size, max_backlog=max_backlog, snapshot_every=snapshot_every
        )
