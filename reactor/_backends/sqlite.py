"""Recordings in SQLite, with appends batched off the event loop."""

from __future__ import annotations

import asyncio
import atexit
import json
import os
import threading
import time
import weakref
from collections.abc import Callable, Collection, Iterable, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pydantic_core

from reactor._backends.sqlite_db import STATUS, WAKEUPS, prune_runs, retag_run
from reactor._backends.sqlite_read import Connections, Reads
from reactor._backends.sqlite_writer import STOP, Delivery, Request, write_loop
from reactor._recording.chain import Heads, configured
from reactor._recording.inbox import Posted, Wakeup, check_posted, due_time, new_message_id
from reactor._recording.info import RunInfo, prune_bounds, retagged, runs_filter
from reactor._recording.recording import Recording
from reactor._recording.store import DEFAULT_SNAPSHOT_EVERY, PAGE, check_snapshot_every
from reactor._recording.storebase import SignalStoreBase
from reactor._recording.tail import sound_tail
from reactor._recording.writes import Backlog, WriteFailures
from reactor._signals.patterns import Pattern
from reactor._signals.signal import Signal, json_fallback
from reactor.exceptions import RecordingError, RunNotFoundError

__all__ = ["DEFAULT_PATH", "SQLiteSignalStore"]

DEFAULT_PATH = Path(".reactor") / "runs.db"
"""Where the CLI and the examples keep recordings by default."""


class SQLiteSignalStore(SignalStoreBase):
    """Recordings in a SQLite database (stdlib ``sqlite3``, WAL mode).

    ``append`` only queues the signal; a writer thread serializes and inserts queued
    signals in batches, each committed as one transaction, so the event loop never
    waits on the disk. Past ``max_backlog`` queued signals (the disk is slower than
    the run, or another process holds the database locked) the runs recording here
    wait between their steps (:meth:`room`: backpressure is awaited, the event loop
    goes on), so a crash loses at most about that many signals and memory stays
    bounded. A locked database is retried until it is released, keeping the signals.
    Any other write failure (a full disk, an I/O error) fails the runs being written,
    which end ``failed`` with a :class:`~reactor.RecordingError` counting their
    unwritten signals; the store reopens its connection and records the next runs as
    soon as the cause is gone.
    Safe to open from several processes (WAL; writers wait on each other's locks).
    The schema is versioned (``PRAGMA user_version``).

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
        self.snapshot_every = check_snapshot_every(snapshot_every)
        self.path = Path(path)
        self.readonly = readonly
        self.batch_size = batch_size
        self.max_backlog = max_backlog
        self.timeout = timeout
        self._lock = threading.Lock()
        if not readonly:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self._connections = Connections(self.path, timeout, readonly=readonly)
        self._reads = Reads(self._connections, repr(self))
        self._backlog = Backlog(max_backlog)
        self._writer: threading.Thread | None = None
        self._failures = WriteFailures(str(self.path))
        self._closed = False
        self.closing = False

    # -- writing -------------------------------------------------------------------

    def _ensure_writer(self) -> None:
        if self._writer is None:
            with self._lock:
                if self._writer is None:
                    if self._closed:
                        raise RecordingError(f"The signal store {self.path} is closed.")
                    if self.readonly:
                        raise RecordingError(
                            f"The signal store {self.path} is open read-only; open it "
                            "without readonly=True to record to it."
                        )
                    self._writer = threading.Thread(
                        target=write_loop,
                        args=(
                            self.path,
                            self._backlog,
                            self.batch_size,
                            weakref.ref(self),
                            self.timeout,
                            self._failures,
                            Heads(configured()),
                        ),
                        name=f"reactor-recorder {self.path.name}",
                        daemon=True,
                    )
                    self._writer.start()
                    atexit.register(self.close)

    def start_run(self, info: RunInfo) -> None:
        """Register a run about to be recorded (graph, tags, target)."""
        self._ensure_writer()
        self._backlog.put(info)

    def append(self, signal: Signal) -> None:
        """Queue one signal for writing (never waits: see :meth:`room`)."""
        if self._writer is None:
            self._ensure_writer()
        self._backlog.put(signal)

    def room(self) -> asyncio.Future[None] | None:
        """``None`` while the writer keeps up; else a future done once the backlog is down."""
        return self._backlog.room()

    def record_request(self, run_id: str, request_hash: str, fingerprint: dict[str, Any]) -> None:
        """Keep what a provider was asked (for replay mismatch messages)."""
        self._ensure_writer()
        self._backlog.put(Request(run_id, request_hash, fingerprint))

    def deliver(self, message_id: str, signal: Signal) -> None:
        """Queue a posted message's signal; it is written with the message's delivery."""
        self._ensure_writer()
        self._backlog.put(Delivery(message_id, signal))

    def post(
        self,
        run_id: str,
        name: str,
        payload: Any = None,
        *,
        source: str = "user",
        at: datetime | None = None,
    ) -> str:
        """Queue a signal for a run, from any process; return the message's id.

        A live run recorded to this database emits it within 100 ms (of ``at``, if
        given); a stopped one, when it is resumed. See :class:`reactor.SignalStore`.

        Raises:
            SignalNameError: ``name`` is one only the runtime emits.
            PayloadError: The log cannot hold ``payload`` (nothing is posted).
            ValueError: ``at`` is not an aware datetime.
            RecordingError: The store is read-only.
        """
        check_posted(name, payload)
        due = due_time(at)
        if self.readonly:
            raise RecordingError(f"The signal store {self.path} is open read-only.")
        message_id = new_message_id()
        data = None if payload is None else _json(payload)
        with self._connections.connection() as conn:
            conn.execute(
                "INSERT INTO inbox (message_id, run_id, name, payload, source, posted_at, "
                "due_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (message_id, run_id, name, data, source, time.time(), due),
            )
        return message_id

    def undelivered(self, run_ids: Collection[str]) -> list[Posted]:
        """Messages posted to these runs, due and not yet delivered, in order (of due time)."""
        return self._inbox(run_ids, "(due_at IS NULL OR due_at <= ?)")

    def scheduled(self, run_ids: Collection[str]) -> list[Posted]:
        """Messages posted to these runs with ``at=`` and not due yet, soonest first."""
        return self._inbox(run_ids, "due_at > ?")

    def waiting_messages(self, run_ids: Collection[str]) -> list[Posted]:
        """Messages posted to these runs and not delivered, due or not, in order (one query)."""
        return self._inbox(run_ids, "(due_at IS NULL OR ? > 0)")

    def _inbox(self, run_ids: Collection[str], due: str) -> list[Posted]:
        if not run_ids:
            return []
        marks = ", ".join("?" * len(run_ids))
        rows = self._connections.query(
            "SELECT message_id, run_id, name, payload, source, posted_at, due_at FROM inbox "
            f"WHERE delivered_seq IS NULL AND run_id IN ({marks}) AND {due} "
            "ORDER BY COALESCE(due_at, posted_at), position",
            (*run_ids, time.time()),
        )
        found = [
            (m, r, n, None if d is None else json.loads(d), *more) for m, r, n, d, *more in rows
        ]
        return [Posted(*row) for row in found]

    def wakeups(self, *, before: datetime | None = None) -> list[Wakeup]:
        """Runs not ended with a timer or a scheduled message (due ``before``), soonest first."""
        limit = due_time(before) if before is not None else float("inf")
        rows = self._query(WAKEUPS, (limit,))
        return [Wakeup(run_id, datetime.fromtimestamp(due, UTC)) for run_id, due in rows]

    def flush(self) -> None:
        """Block until everything appended so far is written, or has failed to be.

        A run whose signals could not be written learns it from
        :meth:`recording_error`; the store itself goes on recording other runs.
        """
        if self._writer is not None and self._writer.is_alive():
            done = threading.Event()
            self._backlog.put(done)
            done.wait()

    def recording_error(self, run_id: str) -> RecordingError | None:
        """Why ``run_id``'s recording is incomplete (disk full, I/O error), after a flush."""
        return self._failures.error_for(run_id)

    def watch_recording(self, run_id: str, failed: Callable[[], None]) -> Callable[[], None]:
        """Have ``failed()`` called (from the writer's thread) once ``run_id``'s recording fails."""
        return self._failures.watch(run_id, failed)

    def close(self) -> None:
        """Flush, stop the writer and close the database."""
        if self._closed:
            return
        self._closed = True
        self.closing = True
        writer = self._writer
        if writer is not None and writer.is_alive():
            self._backlog.put(STOP)
            writer.join()
        self._backlog.release()
        self._connections.close()
        atexit.unregister(self.close)

    # -- reading -------------------------------------------------------------------

    def _query(self, sql: str, params: Iterable[Any] = ()) -> list[Any]:
        """Rows of a query, once what this process appended is written (read your writes)."""
        if self._writer is not None:
            self.flush()
        return self._connections.query(sql, params)

    def resolve(self, ref: str) -> str:
        """Turn ``ref`` (a run id, a unique prefix of one, or ``last``) into a run id.

        Raises:
            RunNotFoundError: No run matches, or the prefix is ambiguous.
        """
        if ref == "last":
            rows = self._query("SELECT run_id FROM runs ORDER BY started_at DESC LIMIT 1")
        else:
            # A prefix compared as text: LIKE would read '_' and '%' in it as wildcards.
            rows = self._query(
                "SELECT run_id FROM runs WHERE substr(run_id, 1, ?) = ? "
                "ORDER BY started_at DESC LIMIT 6",
                (len(ref), ref),
            )
            exact = [row for row in rows if row[0] == ref]
            rows = exact or rows
        return self._one(ref, [str(row[0]) for row in rows])

    def info(self, run_id: str) -> RunInfo:
        """What the store knows of the run, its counters included: one row, no log read.

        What is written so far (the writer may be a batch behind this process's run).

        Raises:
            RunNotFoundError: No such run.
        """
        return self._reads.info(run_id)

    def signals(
        self,
        run_id: str,
        *,
        after: int = 0,
        before: int | None = None,
        limit: int = PAGE,
        names: Collection[Pattern] | None = None,
    ) -> list[Signal]:
        """One page of the run's log, read through its index (see :class:`SignalStoreBase`).

        What is written so far, like :meth:`info`.

        Raises:
            RunNotFoundError: No such run.
            ValueError: A bound is not a seq, or ``limit`` < 1.
        """
        return self._reads.page(run_id, after=after, before=before, limit=limit, names=names)

    def state(self, run_id: str) -> dict[str, Any]:
        """The run's latest state, kept in its row as it is written (no log read).

        A run recorded before this store kept states is rebuilt from its tail.

        Raises:
            RunNotFoundError: No such run.
        """
        kept = self._reads.state(run_id)
        return kept if kept is not None else self.load_tail(run_id).state

    def load(self, run_id: str) -> Recording:
        """Return the recording of ``run_id`` (an incomplete one if the run was cut off).

        Raises:
            RunNotFoundError: No such run.
        """
        if self._writer is not None:
            self.flush()
        return self._reads.load(run_id)

    def load_tail(self, run_id: str) -> Recording:
        """The run from its latest ``harness:snapshot`` on: what a resume reads.

        The signals after the one the snapshot was taken after (the snapshot among
        them), and the earlier ones it names as still needed (triggers not decided
        yet); the whole run when it has none. Found through an index of snapshots, so
        the time it takes does not grow with the length of the log. A snapshot that
        fails its check (changed since it was taken) gives way to the latest sound one
        before it (``reactor._recording.tail``).

        Raises:
            RunNotFoundError: No such run.
        """
        if self._writer is not None:
            self.flush()
        return sound_tail(self, self._reads.load(run_id, tail=True), sealed=self._reads.seal)

    def runs(
        self,
        *,
        graph: str | None = None,
        tag: str | None = None,
        status: str | None = None,
        limit: int | None = None,
    ) -> list[RunInfo]:
        """Recorded runs, newest first, optionally filtered by graph, tag or status.

        ``tag`` is a key (``"nightly"``) or ``key=value`` (``"env=prod"``); ``status``
        is ``running``, ``waiting`` or a final status.
        """
        sql, params = runs_filter(
            STATUS, "run_tags", "?", graph=graph, tag=tag, status=status, limit=limit
        )
        if self._writer is not None:
            self.flush()
        return self._reads.infos(sql, params)

    def delete(self, run_id: str) -> bool:
        """Delete a run and its signals; return whether it existed."""
        if self.readonly:
            raise RecordingError(f"The signal store {self.path} is open read-only.")
        if self._writer is not None:
            self.flush()
        with self._connections.connection() as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                found = conn.execute("DELETE FROM runs WHERE run_id = ?", (run_id,)).rowcount
                found += conn.execute("DELETE FROM signals WHERE run_id = ?", (run_id,)).rowcount
                for table in ("run_tags", "requests", "inbox", "timers"):
                    conn.execute(f"DELETE FROM {table} WHERE run_id = ?", (run_id,))
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        return found > 0

    def tag(
        self, run_id: str, tags: Mapping[str, str] | None = None, *, remove: Collection[str] = ()
    ) -> RunInfo:
        """Set and drop a run's tags; its info after (see :class:`SignalStoreBase`)."""
        retagged({}, tags, remove)  # bad tags are refused before anything is written
        if self.readonly:
            raise RecordingError(f"The signal store {self.path} is open read-only.")
        if self._writer is not None:
            self.flush()
        with self._connections.connection() as conn:
            if not retag_run(conn, run_id, dict(tags or {}), list(remove)):
                raise RunNotFoundError(f"No run {run_id!r} in {self.path}.")
        return self.info(run_id)

    def prune(
        self,
        *,
        older_than: timedelta,
        status: Collection[str] | None = ("completed",),
        keep_last: int = 0,
        dry_run: bool = False,
    ) -> int:
        """Delete ended runs older than ``older_than``; return how many (see the base class).

        Raises:
            ValueError: A status is not one a run ends with, or a bound is negative.
            RecordingError: The store is read-only.
        """
        cutoff, statuses = prune_bounds(older_than, status, keep_last)
        if self.readonly and not dry_run:
            raise RecordingError(f"The signal store {self.path} is open read-only.")
        if self._writer is not None:
            self.flush()
        with self._connections.connection() as conn:
            return prune_runs(conn, cutoff, statuses, keep_last, dry_run)

    def __repr__(self) -> str:
        return f"SQLiteSignalStore({str(self.path)!r})"


def _json(value: Any) -> str:
    return pydantic_core.to_json(value, fallback=json_fallback).decode()
