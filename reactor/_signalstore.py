"""Recordings in SQLite, with appends batched off the event loop."""

from __future__ import annotations

import atexit
import json
import os
import queue
import sqlite3
import threading
import time
import weakref
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pydantic_core

from reactor._diagnostics import log
from reactor._recording import Recording, RunInfo
from reactor._signal import Signal, json_fallback
from reactor.exceptions import RecordingError, RunNotFoundError

__all__ = ["DEFAULT_PATH", "SQLiteSignalStore"]

DEFAULT_PATH = Path(".reactor") / "runs.db"
"""Where the CLI and the examples keep recordings by default."""

SCHEMA_VERSION = 1


class SQLiteSignalStore:
    """Recordings in a SQLite database (stdlib ``sqlite3``, WAL mode).

    ``append`` only queues the signal; a writer thread serializes and inserts queued
    signals in batches, each committed as one transaction, so the event loop never
    waits on the disk and a crash loses at most the batch being written. Safe to open
    from several processes (WAL; writers wait on each other's locks). The schema is
    versioned (``PRAGMA user_version``).

    Args:
        path: The database file (parents are created). ``.reactor/runs.db`` by default.
        batch_size: Most signals written per transaction.
        max_backlog: Queued signals beyond which ``append`` waits for the writer, so
            memory stays bounded when signals come faster than the disk takes them.

    Raises:
        RecordingError: The file is not a reactor database, or was written by a newer
            version of reactor.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] = DEFAULT_PATH,
        *,
        batch_size: int = 2_000,
        max_backlog: int = 50_000,
    ) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.batch_size = batch_size
        self.max_backlog = max_backlog
        self._lock = threading.Lock()
        self._read = _connect(self.path)
        _migrate(self._read, self.path)
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._writer: threading.Thread | None = None
        self._error: BaseException | None = None
        self._reported = False
        self._appended = 0
        self._closed = False

    # -- writing -------------------------------------------------------------------

    def _ensure_writer(self) -> None:
        if self._writer is None:
            with self._lock:
                if self._writer is None:
                    if self._closed:
                        raise RecordingError(f"The signal store {self.path} is closed.")
                    self._writer = threading.Thread(
                        target=_write_loop,
                        args=(self.path, self._queue, self.batch_size, weakref.ref(self)),
                        name=f"reactor-recorder {self.path.name}",
                        daemon=True,
                    )
                    self._writer.start()
                    atexit.register(self.close)

    def start_run(self, info: RunInfo) -> None:
        """Register a run about to be recorded (graph, tags, target)."""
        self._ensure_writer()
        self._queue.put(info)

    def append(self, signal: Signal) -> None:
        """Queue one signal for writing (never blocks on disk)."""
        if self._error is not None:
            self._report()
            return
        if self._writer is None:
            self._ensure_writer()
        self._queue.put(signal)
        self._appended += 1
        if not self._appended & 1023 and self._queue.qsize() > self.max_backlog:
            while self._queue.qsize() > self.max_backlog // 2 and self._error is None:
                time.sleep(0.001)

    def record_request(self, run_id: str, request_hash: str, fingerprint: dict[str, Any]) -> None:
        """Keep what a provider was asked (for replay mismatch messages)."""
        self._ensure_writer()
        self._queue.put(("request", run_id, request_hash, fingerprint))

    def flush(self) -> None:
        """Block until everything appended so far is committed.

        Raises:
            RecordingError: The writer failed (disk full, database locked for too long).
        """
        if self._writer is not None and self._writer.is_alive():
            done = threading.Event()
            self._queue.put(done)
            done.wait()
        if self._error is not None:
            raise RecordingError(
                f"Recording to {self.path} failed: {type(self._error).__name__}: {self._error}."
            ) from self._error

    def _failed(self, error: BaseException) -> None:
        self._error = error

    def _report(self) -> None:
        if not self._reported:
            self._reported = True
            log(
                "reactor.recording",
                "error",
                "recording failed; later signals are not recorded",
                path=str(self.path),
                error=repr(self._error),
            )

    def close(self) -> None:
        """Flush, stop the writer and close the database."""
        if self._closed:
            return
        self._closed = True
        writer = self._writer
        if writer is not None and writer.is_alive():
            self._queue.put(_STOP)
            writer.join()
        with self._lock:
            self._read.close()
        atexit.unregister(self.close)

    def __enter__(self) -> SQLiteSignalStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- reading -------------------------------------------------------------------

    def _query(self, sql: str, params: Iterable[Any] = ()) -> list[Any]:
        if self._writer is not None:
            self.flush()
        with self._lock:
            return self._read.execute(sql, tuple(params)).fetchall()

    def resolve(self, ref: str) -> str:
        """Turn ``ref`` (a run id, a unique prefix of one, or ``last``) into a run id.

        Raises:
            RunNotFoundError: No run matches, or the prefix is ambiguous.
        """
        if ref == "last":
            rows = self._query("SELECT run_id FROM runs ORDER BY started_at DESC LIMIT 1")
        else:
            rows = self._query(
                "SELECT run_id FROM runs WHERE run_id = ? OR run_id LIKE ? "
                "ORDER BY started_at DESC",
                (ref, ref.replace("%", "") + "%"),
            )
            exact = [row for row in rows if row[0] == ref]
            rows = exact or rows
        if not rows:
            raise RunNotFoundError(f"No run {ref!r} in {self.path} (see `reactor runs`).")
        if len(rows) > 1:
            choices = ", ".join(row[0] for row in rows[:5])
            raise RunNotFoundError(f"Run id prefix {ref!r} is ambiguous: {choices}.")
        return str(rows[0][0])

    def load(self, run_id: str) -> Recording:
        """Return the recording of ``run_id`` (an incomplete one if the run was cut off).

        Raises:
            RunNotFoundError: No such run.
        """
        rows = self._query(
            "SELECT seq, id, name, payload, timestamp, source, caused_by, depth FROM signals "
            "WHERE run_id = ? ORDER BY seq",
            (run_id,),
        )
        info = self._infos("WHERE r.run_id = ?", (run_id,))
        if not rows and not info:
            raise RunNotFoundError(f"No run {run_id!r} in {self.path} (see `reactor runs`).")
        signals = tuple(
            Signal(
                name,
                pydantic_core.from_json(payload) if payload is not None else None,
                id=signal_id,
                seq=seq,
                timestamp=timestamp,
                source=source,
                caused_by=caused_by,
                depth=depth,
                run_id=run_id,
            )
            for seq, signal_id, name, payload, timestamp, source, caused_by, depth in rows
        )
        requests = {
            digest: json.loads(fingerprint)
            for digest, fingerprint in self._query(
                "SELECT request_hash, fingerprint FROM requests WHERE run_id = ?", (run_id,)
            )
        }
        return Recording(
            info=info[0] if info else RunInfo(run_id=run_id), signals=signals, requests=requests
        )

    def runs(
        self, *, graph: str | None = None, tag: str | None = None, limit: int | None = None
    ) -> list[RunInfo]:
        """Recorded runs, newest first, optionally filtered by graph name or tag.

        ``tag`` is a key (``"nightly"``) or ``key=value`` (``"env=prod"``).
        """
        where: list[str] = []
        params: list[Any] = []
        if graph is not None:
            where.append("r.graph = ?")
            params.append(graph)
        if tag is not None:
            key, _, value = tag.partition("=")
            clause = "EXISTS (SELECT 1 FROM run_tags t WHERE t.run_id = r.run_id AND t.key = ?"
            params.append(key)
            if "=" in tag:
                clause += " AND t.value = ?"
                params.append(value)
            where.append(clause + ")")
        sql = ("WHERE " + " AND ".join(where)) if where else ""
        sql += " ORDER BY r.started_at DESC"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        return self._infos(sql, params)

    def _infos(self, clause: str, params: Iterable[Any]) -> list[RunInfo]:
        rows = self._query(
            "SELECT r.run_id, r.graph, r.target, r.started_at, r.ended_at, r.status, r.reason, "
            "r.signals, (SELECT json_group_object(t.key, t.value) FROM run_tags t "
            f"WHERE t.run_id = r.run_id) FROM runs r {clause}",
            params,
        )
        return [
            RunInfo(
                run_id=run_id,
                graph=graph,
                target=target,
                started_at=started,
                ended_at=ended,
                status=status,
                reason=reason,
                signals=count,
                tags=json.loads(tags) if tags else {},
            )
            for run_id, graph, target, started, ended, status, reason, count, tags in rows
        ]

    def delete(self, run_id: str) -> bool:
        """Delete a run and its signals; return whether it existed."""
        if self._writer is not None:
            self.flush()
        with self._lock:
            conn = self._read
            conn.execute("BEGIN IMMEDIATE")
            try:
                found = conn.execute("DELETE FROM runs WHERE run_id = ?", (run_id,)).rowcount
                found += conn.execute("DELETE FROM signals WHERE run_id = ?", (run_id,)).rowcount
                conn.execute("DELETE FROM run_tags WHERE run_id = ?", (run_id,))
                conn.execute("DELETE FROM requests WHERE run_id = ?", (run_id,))
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        return found > 0

    def __repr__(self) -> str:
        return f"SQLiteSignalStore({str(self.path)!r})"


_STOP = object()

_SCHEMA = """
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


def _connect(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, timeout=30.0, isolation_level=None, check_same_thread=False)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
    except sqlite3.DatabaseError as exc:
        conn.close()
        raise RecordingError(f"{path} is not a reactor run database ({exc}).") from exc
    return conn


def _migrate(conn: sqlite3.Connection, path: Path) -> None:
    try:
        conn.execute("BEGIN IMMEDIATE")
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
            for statement in _SCHEMA.split(";"):
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


def _write_loop(
    path: Path,
    items: queue.SimpleQueue[Any],
    batch_size: int,
    owner: weakref.ref[SQLiteSignalStore],
) -> None:
    """Drain the queue in batches; each batch is one transaction."""
    conn = _connect(path)
    try:
        while True:
            batch = [items.get()]
            while len(batch) < batch_size:
                try:
                    batch.append(items.get_nowait())
                except queue.Empty:
                    break
            stop = any(item is _STOP for item in batch)
            try:
                _write_batch(conn, batch)
            except BaseException as exc:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                store = owner()
                if store is not None:
                    store._failed(exc)
            for item in batch:
                if isinstance(item, threading.Event):
                    item.set()
            if stop:
                return
    finally:
        conn.close()


def _write_batch(conn: sqlite3.Connection, batch: list[Any]) -> None:
    signals: list[tuple[Any, ...]] = []
    runs: list[RunInfo] = []
    requests: list[tuple[str, str, str, str]] = []
    ends: list[tuple[Any, ...]] = []
    starts: list[tuple[str, float]] = []
    counts: dict[str, int] = {}
    to_json = pydantic_core.to_json
    for item in batch:
        if type(item) is Signal:
            run_id = item.run_id or "unbound"
            payload = item.payload
            signals.append(
                (
                    run_id,
                    item.seq,
                    item.id,
                    item.name,
                    None if payload is None else to_json(payload, fallback=json_fallback).decode(),
                    item.timestamp,
                    item.source,
                    item.caused_by,
                    item.depth,
                )
            )
            counts[run_id] = counts.get(run_id, 0) + 1
            if item.name == "harness:start":
                starts.append((run_id, item.timestamp))
            elif item.name == "harness:end" and isinstance(payload, dict):
                ends.append((item.timestamp, payload.get("status"), payload.get("reason"), run_id))
        elif isinstance(item, RunInfo):
            runs.append(item)
        elif isinstance(item, tuple) and item[0] == "request":
            _, run_id, digest, fingerprint = item
            requests.append(
                (run_id, digest, str(fingerprint.get("agent")), json.dumps(fingerprint))
            )
    if not (signals or runs or requests):
        return
    conn.execute("BEGIN")
    for info in runs:
        conn.execute(
            "INSERT INTO runs (run_id, graph, target, started_at) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (run_id) DO UPDATE SET graph = excluded.graph, target = excluded.target",
            (info.run_id, info.graph, info.target, info.started_at or time.time()),
        )
        conn.executemany(
            "INSERT OR REPLACE INTO run_tags (run_id, key, value) VALUES (?, ?, ?)",
            [(info.run_id, key, value) for key, value in info.tags.items()],
        )
    conn.executemany("INSERT OR IGNORE INTO runs (run_id, started_at) VALUES (?, ?)", starts)
    conn.executemany("INSERT OR IGNORE INTO signals VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", signals)
    conn.executemany(
        "INSERT OR IGNORE INTO runs (run_id, started_at) VALUES (?, ?)",
        [(run_id, time.time()) for run_id in counts],
    )
    conn.executemany(
        "UPDATE runs SET signals = signals + ? WHERE run_id = ?",
        [(count, run_id) for run_id, count in counts.items()],
    )
    conn.executemany("UPDATE runs SET ended_at = ?, status = ?, reason = ? WHERE run_id = ?", ends)
    conn.executemany("INSERT OR REPLACE INTO requests VALUES (?, ?, ?, ?)", requests)
    conn.execute("COMMIT")
