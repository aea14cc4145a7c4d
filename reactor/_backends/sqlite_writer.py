"""The writer thread of a SQLite signal store: batches, one transaction each, retried.

The store's ``append`` puts signals on a bounded queue; this thread takes what is
there (up to a batch), writes it in one transaction, and goes on. When the database is
locked or busy (another process holds it longer than SQLite's busy timeout), the batch
is kept and written again after a growing pause: the run's signals wait in memory, the
queue fills, and ``append`` waits too (backpressure), so nothing is dropped and memory
stays bounded; when the lock is released, recording catches up.

A full disk or an I/O error fails the runs of that batch, not the store:
:class:`WriteFailures` marks them and counts what of theirs is not written, the
connection is closed, and the next batch opens a new one, so the store records again
as soon as the cause is gone. A batch that fails for what it holds (a value the
database refuses) is written again run by run, one transaction each, so that only the
run whose entry cannot be written fails, and every other run's signals are written.

Each run's signals are hash-chained as they are written (``reactor._recording.chain``):
the batch's transaction reads the head of each run it does not know yet, and the
heads move on once it commits.
"""

from __future__ import annotations

import contextlib
import functools
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
from reactor._recording.chain import Heads
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
    heads: Heads,
) -> None:
    """Drain the backlog in batches; each batch is one transaction, retried while locked.

    Runs waiting for room are let go as the backlog goes down (when a batch is taken),
    and all of them when the writer stops. ``heads``: the chains the writer links.
    """
    conn: sqlite3.Connection | None = None
    items = backlog.queue
    writing = _Writing(owner, path, timeout, failures, heads)
    try:
        while True:
            batch = [items.get()]
            while len(batch) < batch_size:
                try:
                    batch.append(items.get_nowait())
                except queue.Empty:
                    break
            backlog.taken(len(batch))
            conn = writing.batch(conn, batch)
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


class _Writing:
    """How the writer thread writes a batch: in one transaction, else run by run."""

    def __init__(
        self,
        owner: weakref.ref[WriteOwner],
        path: Path,
        timeout: float,
        failures: WriteFailures,
        heads: Heads,
    ) -> None:
        self.owner, self.path, self.timeout = owner, path, timeout
        self.failures, self.heads = failures, heads

    def batch(self, conn: sqlite3.Connection | None, batch: list[Any]) -> sqlite3.Connection | None:
        """Write ``batch``; return the connection to use next (``None``: open a new one).

        A batch that fails for what it holds (not for the database: locked, full, an
        I/O error) is written again run by run, and only the runs that still fail lose
        their signals.
        """
        rows = _Rows(self.failures)
        rows.take(batch)
        if not rows:
            return conn
        conn, error = self._until_done(conn, rows)
        if error is None:
            self.failures.wrote()
        elif isinstance(error, sqlite3.OperationalError) or len(rows.run_ids()) < 2:
            self.failures.lose(rows.counts(), error)
        else:
            for run_id in sorted(rows.run_ids()):
                one = rows.only(run_id)
                conn, error = self._until_done(conn, one)
                if error is not None:
                    self.failures.lose(one.counts(), error, store=False)
        return conn

    def _until_done(
        self, conn: sqlite3.Connection | None, rows: _Rows
    ) -> tuple[sqlite3.Connection | None, BaseException | None]:
        """Write ``rows`` in one transaction, retried while the database is locked.

        Returns the connection to use next (``None``: open a new one) and the error
        that stopped the write (``None``: written).
        """
        path = self.path
        pause, waited, warned = 0.05, 0.0, False
        while True:
            try:
                if conn is None:
                    conn = connect(path, self.timeout)
                self.heads.keep(rows.write(conn, self.heads))
                if warned:
                    log("reactor.recording", "warning", "recording resumed", path=str(path))
                return conn, None
            except sqlite3.OperationalError as exc:
                conn = _rolled_back(conn)
                store = self.owner()
                transient = "locked" in str(exc) or "busy" in str(exc)
                if not transient or store is None or (store.closing and waited > 10.0):
                    _closed(conn)
                    return None, exc
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
                return _rolled_back(conn), exc


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

    def __init__(self, failures: WriteFailures) -> None:
        self.failures = failures
        self.signals: list[list[Any]] = []
        self.runs: list[RunInfo] = []
        self.requests: list[tuple[str, str, str, str]] = []
        self.delivered: list[tuple[int, str, str]] = []
        self.tally = Tally()
        self.touched: set[str] = set()

    def take(self, batch: list[Any]) -> None:
        """Make the batch's items into rows."""
        failures, tally = self.failures, self.tally
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
                self.delivered.append((item.seq, entry.message_id, run_id))
            append(
                [
                    run_id,
                    item.seq,
                    item.id,
                    item.name,
                    data,
                    item.timestamp,
                    item.source,
                    item.caused_by,
                    item.depth,
                    None,  # its hash, set when the batch is linked
                ]
            )
            count(item, run_id)

    def __bool__(self) -> bool:
        return bool(self.signals or self.runs or self.requests)

    def counts(self) -> dict[str, int]:
        """Signals per run in these rows (a run registered without signals counts 0)."""
        return {**dict.fromkeys(self.touched, 0), **self.tally.counts}

    def run_ids(self) -> set[str]:
        """The runs with rows here."""
        return self.touched | self.tally.counts.keys()

    def only(self, run_id: str) -> _Rows:
        """The rows of ``run_id`` alone (the batch is written again run by run)."""
        one = _Rows(self.failures)
        one.signals = [row for row in self.signals if row[0] == run_id]
        one.runs = [info for info in self.runs if info.run_id == run_id]
        one.requests = [row for row in self.requests if row[0] == run_id]
        one.delivered = [row for row in self.delivered if row[2] == run_id]
        one.tally = self.tally.only(run_id)
        one.touched = self.touched & {run_id}
        return one

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

    def write(self, conn: sqlite3.Connection, heads: Heads) -> dict[str, tuple[int, str | None]]:
        """Write the rows in one transaction; the heads of their runs' chains after it."""
        return _write_rows(conn, self, heads)


_to_json, _fallback = pydantic_core.to_json, json_fallback


def _write_rows(
    conn: sqlite3.Connection, rows: _Rows, heads: Heads
) -> dict[str, tuple[int, str | None]]:
    signals, runs, requests, tally = rows.signals, rows.runs, rows.requests, rows.tally
    if not (signals or runs or requests):
        return {}
    # IMMEDIATE: the heads are read before anything is written, and must stay the heads.
    conn.execute("BEGIN IMMEDIATE")
    linked = heads.link(signals, functools.partial(_heads, conn))
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
    conn.executemany(
        f"INSERT OR IGNORE INTO signals ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        signals,
    )
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
        [(seq, message_id) for seq, message_id, _ in rows.delivered],
    )
    conn.executemany("INSERT OR REPLACE INTO requests VALUES (?, ?, ?, ?)", requests)
    timers = tally.timers
    if timers:
        conn.executemany("INSERT OR REPLACE INTO timers VALUES (?, ?, ?, ?)", timers.set)
        conn.executemany("DELETE FROM timers WHERE run_id = ? AND timer_id = ?", timers.fired)
        conn.executemany("DELETE FROM timers WHERE run_id = ?", timers.ended)
    conn.execute("COMMIT")
    return linked


_COLUMNS = "run_id, seq, id, name, payload, timestamp, source, caused_by, depth, hash"


def _heads(conn: sqlite3.Connection, run_ids: list[str]) -> dict[str, tuple[int, str | None]]:
    """The last stored (seq, hash) of each of these runs that has signals."""
    found: dict[str, tuple[int, str | None]] = {}
    for run_id in run_ids:
        row = conn.execute(
            "SELECT seq, hash FROM signals WHERE run_id = ? ORDER BY seq DESC LIMIT 1", (run_id,)
        ).fetchone()
        if row is not None:
            found[run_id] = (row[0], row[1])
    return found
