"""The writer thread of a SQLite signal store: batches, one transaction each, retried.

The store's ``append`` puts signals on a bounded queue; this thread takes what is
there (up to a batch), writes it in one transaction, and goes on. When the database is
locked or busy (another process holds it longer than SQLite's busy timeout), the batch
is kept and written again after a growing pause: the run's signals wait in memory, the
queue fills, and ``append`` waits too (backpressure), so nothing is dropped and memory
stays bounded; when the lock is released, recording catches up.

Any other failure (a full disk, an I/O error, a value that cannot be encoded) fails
the runs of that batch, not the store: :class:`WriteFailures` marks them and counts
what of theirs is not written, the connection is closed, and the next batch opens a
new one, so the store records again as soon as the cause is gone.
"""

from __future__ import annotations

import contextlib
import json
import queue
import sqlite3
import threading
import time
import weakref
from pathlib import Path
from typing import Any, NamedTuple, Protocol

import pydantic_core

from reactor._backends.sqlite_db import connect
from reactor._backends.tally import Tally
from reactor._recording.info import RunInfo
from reactor._recording.writes import Backlog, WriteFailures
from reactor._signals.diagnostics import log
from reactor._signals.signal import Signal, json_fallback

__all__ = ["STOP", "Delivery", "Request", "WriteOwner", "write_loop"]

STOP = object()
"""Put on the queue to stop the writer after what is queued before it."""

_MAX_PAUSE = 2.0


class WriteOwner(Protocol):
    """What the writer thread asks of the store that owns it."""

    closing: bool


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
    backlog: Backlog,
    batch_size: int,
    owner: weakref.ref[WriteOwner],
    timeout: float,
    failures: WriteFailures,
) -> None:
    """Drain the backlog in batches; each batch is one transaction, retried while locked.

    Runs waiting for room are let go as the backlog goes down (when a batch is taken),
    and all of them when the writer stops.
    """
    conn: sqlite3.Connection | None = None
    items = backlog.queue
    try:
        while True:
            batch = [items.get()]
            while len(batch) < batch_size:
                try:
                    batch.append(items.get_nowait())
                except queue.Empty:
                    break
            backlog.taken(len(batch))
            conn = _write_until_done(conn, batch, owner, path, timeout, failures)
            backlog.written()
            for item in batch:
                if isinstance(item, threading.Event):
                    item.set()
            if any(item is STOP for item in batch):
                return
    finally:
        backlog.release()
        if conn is not None:
            conn.close()


def _write_until_done(
    conn: sqlite3.Connection | None,
    batch: list[Any],
    owner: weakref.ref[WriteOwner],
    path: Path,
    timeout: float,
    failures: WriteFailures,
) -> sqlite3.Connection | None:
    """Write ``batch``; return the connection to use next (``None``: open a new one)."""
    pause, waited, warned = 0.05, 0.0, False
    rows = _Rows(batch, failures)
    if not rows:
        return conn
    while True:
        try:
            if conn is None:
                conn = connect(path, timeout)
            rows.write(conn)
            failures.wrote()
            if warned:
                log("reactor.recording", "warning", "recording resumed", path=str(path))
            return conn
        except sqlite3.OperationalError as exc:
            conn = _rolled_back(conn)
            store = owner()
            transient = "locked" in str(exc) or "busy" in str(exc)
            if not transient or store is None or (store.closing and waited > 10.0):
                failures.lose(rows.counts(), exc)
                _closed(conn)
                return None
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
        except Exception as exc:
            failures.lose(rows.counts(), exc)
            _closed(_rolled_back(conn))
            return None


def _rolled_back(conn: sqlite3.Connection | None) -> sqlite3.Connection | None:
    """``conn`` out of its transaction, or ``None`` if it cannot be (it is dropped)."""
    if conn is None or not conn.in_transaction:
        return conn
    try:
        conn.execute("ROLLBACK")
    except sqlite3.Error:
        _closed(conn)
        return None
    return conn


def _closed(conn: sqlite3.Connection | None) -> None:
    """Close ``conn`` after a failure: the next batch opens a fresh one."""
    if conn is not None:
        with contextlib.suppress(sqlite3.Error):  # already broken: nothing to release
            conn.close()


class _Rows:
    """A batch made into rows; signals of runs whose recording failed are counted out."""

    def __init__(self, batch: list[Any], failures: WriteFailures) -> None:
        self.failures = failures
        self.signals: list[tuple[Any, ...]] = []
        self.runs: list[RunInfo] = []
        self.requests: list[tuple[str, str, str, str]] = []
        self.delivered: list[tuple[int, str]] = []
        self.tally = tally = Tally()
        self.touched: set[str] = set()
        # One pass with everything in locals: this loop is the writer's hot path, and
        # every signal a run emits goes through it (contending for the GIL with the run).
        marked = failures.failed  # empty unless a write failed: one truth test
        append, count, to_json = self.signals.append, tally.add, _to_json
        for entry in batch:
            item = entry.signal if type(entry) is Delivery else entry
            if type(item) is not Signal:
                self._other(item)
                continue
            run_id = item.run_id or "unbound"
            if marked and run_id in marked:
                failures.drop(run_id)
                continue
            payload = item.payload
            try:
                data = None if payload is None else to_json(payload, fallback=_fallback).decode()
            except Exception as exc:  # a value the log cannot hold: this run fails here
                failures.lose({run_id: 1}, exc, store=False)
                continue
            if type(entry) is Delivery:
                self.delivered.append((item.seq, entry.message_id))
            append(
                (
                    run_id,
                    item.seq,
                    item.id,
                    item.name,
                    data,
                    item.timestamp,
                    item.source,
                    item.caused_by,
                    item.depth,
                )
            )
            count(item, run_id)

    def __bool__(self) -> bool:
        return bool(self.signals or self.runs or self.requests)

    def counts(self) -> dict[str, int]:
        """Signals per run in these rows (a run registered without signals counts 0)."""
        return {**dict.fromkeys(self.touched, 0), **self.tally.counts}

    def _other(self, item: Any) -> None:
        """A run registered, or a provider request kept (unless the run failed)."""
        lost = self.failures.lost
        if isinstance(item, RunInfo):
            if not lost(item.run_id):
                self.runs.append(item)
                self.touched.add(item.run_id)
        elif type(item) is Request and not lost(item.run_id):
            fingerprint = item.fingerprint
            self.requests.append(
                (
                    item.run_id,
                    item.request_hash,
                    str(fingerprint.get("agent")),
                    json.dumps(fingerprint),
                )
            )
            self.touched.add(item.run_id)

    def write(self, conn: sqlite3.Connection) -> None:
        """Write the rows in one transaction."""
        _write_rows(conn, self)


_to_json, _fallback = pydantic_core.to_json, json_fallback


def _write_rows(conn: sqlite3.Connection, rows: _Rows) -> None:
    signals, runs, requests, tally = rows.signals, rows.runs, rows.requests, rows.tally
    if not (signals or runs or requests):
        return
    conn.execute("BEGIN")
    for info in runs:
        conn.execute(
            "INSERT INTO runs (run_id, graph, target, target_hash, started_at, parent_run_id, "
            "forked_from) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (run_id) DO UPDATE SET "
            "graph = excluded.graph, target = excluded.target, "
            "target_hash = excluded.target_hash, parent_run_id = excluded.parent_run_id, "
            "forked_from = COALESCE(excluded.forked_from, runs.forked_from)",
            (
                info.run_id,
                info.graph,
                info.target,
                info.target_hash,
                info.started_at or time.time(),
                info.parent_run_id,
                info.forked_from,
            ),
        )
        conn.executemany(
            "INSERT OR REPLACE INTO run_tags (run_id, key, value) VALUES (?, ?, ?)",
            [(info.run_id, key, value) for key, value in info.tags.items()],
        )
    conn.executemany("INSERT OR IGNORE INTO signals VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", signals)
    conn.executemany(
        "INSERT OR IGNORE INTO runs (run_id, started_at) VALUES (?, ?)", tally.firsts.items()
    )
    conn.executemany(
        "UPDATE runs SET signals = signals + ?, last_seq = MAX(last_seq, ?) WHERE run_id = ?",
        [(count, tally.last[run_id], run_id) for run_id, count in tally.counts.items()],
    )
    if tally.prompts:
        conn.executemany(
            "UPDATE runs SET prompts = MAX(0, prompts + ?) WHERE run_id = ?",
            [(count, run_id) for run_id, count in tally.prompts.items()],
        )
    if tally.spent:
        conn.executemany(
            "UPDATE runs SET input_tokens = input_tokens + ?, output_tokens = output_tokens + ?, "
            "cost_usd = cost_usd + ? WHERE run_id = ?",
            [(*spent, run_id) for run_id, spent in tally.spent.items()],
        )
    if tally.started or tally.changes:
        stateful = tuple(tally.stateful())
        marks = ", ".join("?" * len(stateful))
        found = f"SELECT run_id, state FROM runs WHERE run_id IN ({marks})"
        current = dict(conn.execute(found, stateful).fetchall() if stateful else ())
        conn.executemany("UPDATE runs SET state = ? WHERE run_id = ?", tally.states(current))
    conn.executemany(
        "UPDATE runs SET ended_at = ?, status = ?, reason = ?, failures = ? WHERE run_id = ?",
        [(*end, run_id) for run_id, end in tally.ends.items()],
    )
    conn.executemany(
        "UPDATE inbox SET delivered_seq = ? WHERE message_id = ? AND delivered_seq IS NULL",
        rows.delivered,
    )
    conn.executemany("INSERT OR REPLACE INTO requests VALUES (?, ?, ?, ?)", requests)
    timers = tally.timers
    if timers:
        conn.executemany("INSERT OR REPLACE INTO timers VALUES (?, ?, ?, ?)", timers.set)
        conn.executemany("DELETE FROM timers WHERE run_id = ? AND timer_id = ?", timers.fired)
        conn.executemany("DELETE FROM timers WHERE run_id = ?", timers.ended)
    conn.execute("COMMIT")
