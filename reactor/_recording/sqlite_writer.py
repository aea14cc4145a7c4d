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
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple, Protocol

import pydantic_core

from reactor._recording.info import RunInfo, parse_until
from reactor._recording.sqlite_db import connect
from reactor._recording.store import WriteFailures
from reactor._signals.diagnostics import log
from reactor._signals.names import (
    HARNESS_END,
    HARNESS_START,
    SESSION_PROMPT,
    SESSION_REPLY,
    SESSION_TIMEOUT,
    TIMER_FIRED,
    TIMER_SET,
)
from reactor._signals.signal import Signal, json_fallback

__all__ = ["STOP", "Delivery", "Request", "Timers", "WriteOwner", "write_loop"]

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
    items: queue.Queue[Any],
    batch_size: int,
    owner: weakref.ref[WriteOwner],
    timeout: float,
    failures: WriteFailures,
) -> None:
    """Drain the queue in batches; each batch is one transaction, retried while locked."""
    conn: sqlite3.Connection | None = None
    try:
        while True:
            batch = [items.get()]
            while len(batch) < batch_size:
                try:
                    batch.append(items.get_nowait())
                except queue.Empty:
                    break
            conn = _write_until_done(conn, batch, owner, path, timeout, failures)
            for item in batch:
                if isinstance(item, threading.Event):
                    item.set()
            if any(item is STOP for item in batch):
                return
    finally:
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


class Timers:
    """The timers a batch sets, fires, or forgets with the end of their run (the ``timers`` table).

    The same for the PostgreSQL writer: rows of (run id, timer id, agent, due in UNIX
    seconds) to insert, (run id, timer id) to delete, (run id,) whose timers go.
    """

    __slots__ = ("ended", "fired", "set")

    def __init__(self) -> None:
        self.set: list[tuple[str, str, str, float]] = []
        self.fired: list[tuple[str, str]] = []
        self.ended: list[tuple[str]] = []

    def __bool__(self) -> bool:
        return bool(self.set or self.fired or self.ended)

    def note(self, run_id: str, name: str, payload: Any) -> None:
        """Take a ``timer:set`` or a ``timer:fired``."""
        if not isinstance(payload, dict | Mapping):
            return
        timer_id = str(payload.get("timer_id"))
        if name == TIMER_FIRED:
            self.fired.append((run_id, timer_id))
            return
        try:
            due = parse_until(str(payload.get("until"))).timestamp()
        except ValueError:
            return  # not a time: nothing to wake the run for
        self.set.append((run_id, timer_id, str(payload.get("agent")), due))


class _Rows:
    """A batch made into rows; signals of runs whose recording failed are counted out."""

    def __init__(self, batch: list[Any], failures: WriteFailures) -> None:
        self.failures = failures
        self.signals: list[tuple[Any, ...]] = []
        self.runs: list[RunInfo] = []
        self.requests: list[tuple[str, str, str, str]] = []
        self.ends: list[tuple[Any, ...]] = []
        self.starts: list[tuple[str, float]] = []
        self.delivered: list[tuple[int, str]] = []
        self.per_run: dict[str, int] = {}
        self.prompts: dict[str, int] = {}
        self.timers = Timers()
        self.touched: set[str] = set()
        # One pass with everything in locals: this loop is the writer's hot path, and
        # every signal a run emits goes through it (contending for the GIL with the run).
        failures = self.failures
        marked = failures.failed  # empty unless a write failed: one truth test
        append, per_run, to_json = self.signals.append, self.per_run, _to_json
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
            name = item.name
            append(
                (
                    run_id,
                    item.seq,
                    item.id,
                    name,
                    data,
                    item.timestamp,
                    item.source,
                    item.caused_by,
                    item.depth,
                )
            )
            per_run[run_id] = per_run.get(run_id, 0) + 1
            if name in _NOTED:
                self._note(item, run_id, name, payload)

    def __bool__(self) -> bool:
        return bool(self.signals or self.runs or self.requests)

    def counts(self) -> dict[str, int]:
        """Signals per run in these rows (a run registered without signals counts 0)."""
        return {**dict.fromkeys(self.touched, 0), **self.per_run}

    def _note(self, item: Signal, run_id: str, name: str, payload: Any) -> None:
        """What a run's row keeps of its start, end and pending prompts."""
        if name == HARNESS_START:
            self.starts.append((run_id, item.timestamp))
        elif name == HARNESS_END and isinstance(payload, dict):
            failed = payload.get("failures")
            self.ends.append(
                (
                    item.timestamp,
                    payload.get("status"),
                    payload.get("reason"),
                    failed if isinstance(failed, int) else 0,
                    run_id,
                )
            )
            self.timers.ended.append((run_id,))
        elif name == SESSION_PROMPT:
            self.prompts[run_id] = self.prompts.get(run_id, 0) + 1
        elif name in (TIMER_SET, TIMER_FIRED):
            self.timers.note(run_id, name, payload)
        else:  # a reply or a timeout
            self.prompts[run_id] = self.prompts.get(run_id, 0) - 1

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
_NOTED = frozenset(
    {
        HARNESS_START,
        HARNESS_END,
        SESSION_PROMPT,
        SESSION_REPLY,
        SESSION_TIMEOUT,
        TIMER_SET,
        TIMER_FIRED,
    }
)


def _write_rows(conn: sqlite3.Connection, rows: _Rows) -> None:
    signals, runs, requests = rows.signals, rows.runs, rows.requests
    ends, starts, delivered = rows.ends, rows.starts, rows.delivered
    counts, prompts = rows.per_run, rows.prompts
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
    timers = rows.timers
    if timers:
        conn.executemany("INSERT OR REPLACE INTO timers VALUES (?, ?, ?, ?)", timers.set)
        conn.executemany("DELETE FROM timers WHERE run_id = ? AND timer_id = ?", timers.fired)
        conn.executemany("DELETE FROM timers WHERE run_id = ?", timers.ended)
    conn.execute("COMMIT")
