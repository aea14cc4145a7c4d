"""The writer thread of a SQLite signal store: batches, one transaction each, retried.

The store's ``append`` puts signals on a bounded queue; this thread takes what is
there (up to a batch), writes it in one transaction, and goes on. When the database is
locked or busy (another process holds it longer than SQLite's busy timeout), the batch
is kept and written again after a growing pause: the run's signals wait in memory, the
queue fills, and ``append`` waits too (backpressure), so nothing is dropped and memory
stays bounded; when the lock is released, recording catches up.
"""

from __future__ import annotations

import json
import queue
import sqlite3
import threading
import time
import weakref
from pathlib import Path
from typing import Any, NamedTuple, Protocol

import pydantic_core

from reactor._recording.info import RunInfo
from reactor._recording.sqlite_db import connect
from reactor._signals.diagnostics import log
from reactor._signals.names import (
    HARNESS_END,
    HARNESS_START,
    SESSION_PROMPT,
    SESSION_REPLY,
    SESSION_TIMEOUT,
)
from reactor._signals.signal import Signal, json_fallback

__all__ = ["STOP", "Delivery", "Request", "WriteOwner", "write_loop"]

STOP = object()
"""Put on the queue to stop the writer after what is queued before it."""

_MAX_PAUSE = 2.0


class WriteOwner(Protocol):
    """What the writer thread reports to: the store that owns it."""

    closing: bool

    def _failed(self, error: BaseException) -> None: ...


class Request(NamedTuple):
    """What a provider call was asked, kept with the run."""

    run_id: str
    request_hash: str
    fingerprint: dict[str, Any]


class Delivery(NamedTuple):
    """A posted message's signal, recorded together with the message's delivery."""

    message_id: str
    signal: Signal


def write_loop(
    path: Path,
    items: queue.Queue[Any],
    batch_size: int,
    owner: weakref.ref[WriteOwner],
    timeout: float,
) -> None:
    """Drain the queue in batches; each batch is one transaction, retried while locked."""
    conn = connect(path, timeout)
    try:
        while True:
            batch = [items.get()]
            while len(batch) < batch_size:
                try:
                    batch.append(items.get_nowait())
                except queue.Empty:
                    break
            _write_until_done(conn, batch, owner, path)
            for item in batch:
                if isinstance(item, threading.Event):
                    item.set()
            if any(item is STOP for item in batch):
                return
    finally:
        conn.close()


def _write_until_done(
    conn: sqlite3.Connection, batch: list[Any], owner: weakref.ref[WriteOwner], path: Path
) -> None:
    pause, waited, warned = 0.05, 0.0, False
    while True:
        try:
            _write_batch(conn, batch)
            if warned:
                log("reactor.recording", "warning", "recording resumed", path=str(path))
            return
        except sqlite3.OperationalError as exc:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            store = owner()
            transient = "locked" in str(exc) or "busy" in str(exc)
            if not transient or store is None or (store.closing and waited > 10.0):
                if store is not None:
                    store._failed(exc)
                return
            if not warned:
                warned = True
                log(
                    "reactor.recording",
                    "warning",
                    "database locked; keeping the signals and retrying",
                    path=str(path),
                    error=str(exc),
                )
            del store
            time.sleep(pause)
            waited += pause
            pause = min(pause * 2, _MAX_PAUSE)
        except BaseException as exc:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            store = owner()
            if store is not None:
                store._failed(exc)
            return


def _write_batch(conn: sqlite3.Connection, batch: list[Any]) -> None:
    signals: list[tuple[Any, ...]] = []
    runs: list[RunInfo] = []
    requests: list[tuple[str, str, str, str]] = []
    ends: list[tuple[Any, ...]] = []
    starts: list[tuple[str, float]] = []
    delivered: list[tuple[int, str]] = []
    counts: dict[str, int] = {}
    prompts: dict[str, int] = {}
    to_json = pydantic_core.to_json
    for entry in batch:
        item = entry.signal if type(entry) is Delivery else entry
        if type(entry) is Delivery:
            delivered.append((entry.signal.seq, entry.message_id))
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
            name = item.name
            if name == HARNESS_START:
                starts.append((run_id, item.timestamp))
            elif name == HARNESS_END and isinstance(payload, dict):
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
            elif name == SESSION_PROMPT:
                prompts[run_id] = prompts.get(run_id, 0) + 1
            elif name in (SESSION_REPLY, SESSION_TIMEOUT):
                prompts[run_id] = prompts.get(run_id, 0) - 1
        elif isinstance(item, RunInfo):
            runs.append(item)
        elif type(item) is Request:
            fingerprint = item.fingerprint
            requests.append(
                (
                    item.run_id,
                    item.request_hash,
                    str(fingerprint.get("agent")),
                    json.dumps(fingerprint),
                )
            )
    if not (signals or runs or requests):
        return
    conn.execute("BEGIN")
    for info in runs:
        conn.execute(
            "INSERT INTO runs (run_id, graph, target, target_hash, started_at, parent_run_id) "
            "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (run_id) DO UPDATE SET "
            "graph = excluded.graph, target = excluded.target, "
            "target_hash = excluded.target_hash, parent_run_id = excluded.parent_run_id",
            (
                info.run_id,
                info.graph,
                info.target,
                info.target_hash,
                info.started_at or time.time(),
                info.parent_run_id,
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
        "UPDATE runs SET prompts = MAX(0, prompts + ?) WHERE run_id = ?",
        [(count, run_id) for run_id, count in prompts.items()],
    )
    conn.executemany(
        "UPDATE runs SET ended_at = ?, status = ?, reason = ?, failures = ? WHERE run_id = ?",
        ends,
    )
    conn.executemany(
        "UPDATE inbox SET delivered_seq = ? WHERE message_id = ? AND delivered_seq IS NULL",
        delivered,
    )
    conn.executemany("INSERT OR REPLACE INTO requests VALUES (?, ?, ?, ?)", requests)
    conn.execute("COMMIT")
