"""The SQLite file of a signal store: schema, connections, and the batched writer thread."""

from __future__ import annotations

import json
import queue
import sqlite3
import threading
import time
import weakref
from pathlib import Path
from typing import Any, Protocol

import pydantic_core

from reactor._names import HARNESS_END, HARNESS_START
from reactor._recording.info import RunInfo
from reactor._signal import Signal, json_fallback
from reactor.exceptions import RecordingError

__all__ = ["SCHEMA_VERSION", "STOP", "connect", "migrate", "write_loop"]

SCHEMA_VERSION = 2


class WriteOwner(Protocol):
    """What the writer thread reports to: the store that owns it."""

    def _failed(self, error: BaseException) -> None: ...


STOP = object()
"""Put on the queue to stop the writer after what is queued before it."""

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
)
"""Schema version N is reached by running the first N scripts, in order."""


def connect(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, timeout=30.0, isolation_level=None, check_same_thread=False)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
    except sqlite3.DatabaseError as exc:
        conn.close()
        raise RecordingError(f"{path} is not a reactor run database ({exc}).") from exc
    return conn


def migrate(conn: sqlite3.Connection, path: Path) -> None:
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


def write_loop(
    path: Path,
    items: queue.SimpleQueue[Any],
    batch_size: int,
    owner: weakref.ref[WriteOwner],
) -> None:
    """Drain the queue in batches; each batch is one transaction."""
    conn = connect(path)
    try:
        while True:
            batch = [items.get()]
            while len(batch) < batch_size:
                try:
                    batch.append(items.get_nowait())
                except queue.Empty:
                    break
            stop = any(item is STOP for item in batch)
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
            if item.name == HARNESS_START:
                starts.append((run_id, item.timestamp))
            elif item.name == HARNESS_END and isinstance(payload, dict):
                failures = payload.get("failures")
                ends.append(
                    (
                        item.timestamp,
                        payload.get("status"),
                        payload.get("reason"),
                        failures if isinstance(failures, int) else 0,
                        run_id,
                    )
                )
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
            "INSERT INTO runs (run_id, graph, target, target_hash, started_at) "
            "VALUES (?, ?, ?, ?, ?) ON CONFLICT (run_id) DO UPDATE SET graph = excluded.graph, "
            "target = excluded.target, target_hash = excluded.target_hash",
            (
                info.run_id,
                info.graph,
                info.target,
                info.target_hash,
                info.started_at or time.time(),
            ),
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
    conn.executemany(
        "UPDATE runs SET ended_at = ?, status = ?, reason = ?, failures = ? WHERE run_id = ?",
        ends,
    )
    conn.executemany("INSERT OR REPLACE INTO requests VALUES (?, ?, ?, ?)", requests)
    conn.execute("COMMIT")
