"""Recordings in PostgreSQL, shared by processes, with appends batched off the event loop."""

from __future__ import annotations

import asyncio
import atexit
import math
import threading
import time
from collections.abc import Callable, Collection, Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pydantic_core
from psycopg_pool import ConnectionPool

from reactor._backends.postgres_db import (
    STATUS,
    WAKEUPS,
    check_url,
    connect,
    delete_run,
    describe,
    migrate,
    prune_runs,
    read_inbox,
    retag_run,
    shown,
)
from reactor._backends.postgres_read import Reads
from reactor._backends.postgres_writer import STOP, Delivery, Fence, Request, write_loop
from reactor._recording.chain import Heads, configured
from reactor._recording.inbox import Posted, Wakeup, check_posted, due_time, new_message_id
from reactor._recording.info import RunInfo, prune_bounds, retagged, runs_filter
from reactor._recording.recording import Recording
from reactor._recording.store import DEFAULT_SNAPSHOT_EVERY, PAGE, check_snapshot_every
from reactor._recording.storebase import SignalStoreBase
from reactor._recording.tail import sound_tail
from reactor._recording.writes import Backlog, WriteFailures
from reactor._signals.patterns import Pattern
from reactor._signals.signal import Signal
from reactor.exceptions import RecordingError, RunNotFoundError

__all__ = ["PostgresSignalStore"]


class PostgresSignalStore(SignalStoreBase):
    """Recordings in a PostgreSQL database, shared safely by several processes.

    The store of long-lived deployments: the service and its workers record every run
    to one database and any of them reads any run. ``append`` only queues the signal;
    a writer thread takes queued signals in batches and writes each batch in one
    transaction (``COPY``), so dispatch never waits on the network and a crash loses
    at most what was still queued; past ``max_backlog`` queued signals the runs
    recording here wait between their steps (:meth:`room`: backpressure is awaited,
    the event loop goes on). A write that fails because the database is
    briefly unavailable is retried on a fresh connection from the store's pool; one
    that still fails after ``retry_for`` seconds fails the runs being written (they end
    ``failed`` with a :class:`~reactor.RecordingError` counting their unwritten
    signals), and the store records the next runs as soon as the database is back.

    The tables are prefixed ``reactor_`` (the database may hold other tables) and
    versioned; opening the store creates or upgrades them under an advisory lock.

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
        self.snapshot_every = check_snapshot_every(snapshot_every)
        self.dsn = check_url(dsn)
        self.batch_size = batch_size
        self.max_backlog = max_backlog
        self.retry_for = retry_for
        self._shown = shown(dsn)
        with connect(dsn) as conn:
            migrate(conn, self._shown)
        self._pool: ConnectionPool[Any] = ConnectionPool(
            dsn,
            min_size=1,
            max_size=max(2, pool_size),
            kwargs={"autocommit": True},
            check=ConnectionPool.check_connection,
            name=f"reactor-recorder {self._shown}",
            open=True,
        )
        atexit.register(self.close)
        self._lock = threading.Lock()
        self._backlog = Backlog(max_backlog)
        self._reads = Reads(self._pool, self._shown)
        self._writer: threading.Thread | None = None
        self._failures = WriteFailures(self._shown)
        self._closed = False
        self.fence: Fence | None = None  # runs a write leaves out, asked in its transaction

    # -- writing -------------------------------------------------------------------

    def _ensure_writer(self) -> None:
        if self._writer is None:
            with self._lock:
                if self._writer is None:
                    if self._closed:
                        raise RecordingError(f"The signal store {self} is closed.")
                    self._writer = threading.Thread(
                        target=write_loop,
                        args=(
                            self._pool,
                            self._backlog,
                            self.batch_size,
                            self.retry_for,
                            self._failures,
                            lambda: self.fence,
                            Heads(configured()),
                        ),
                        name=f"reactor-recorder {self._shown}",
                        daemon=True,
                    )
                    self._writer.start()

    def start_run(self, info: RunInfo) -> None:
        """Register a run about to be recorded (graph, tags, target).

        Raises:
            RecordingError: The store is closed.
        """
        if self._closed:
            raise RecordingError(f"The signal store {self} is closed.")
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
            RecordingError: The database cannot be reached.
        """
        check_posted(name, payload)
        due = due_time(at)
        message_id = new_message_id()
        data = None if payload is None else pydantic_core.to_json(payload).decode()
        try:
            with self._pool.connection() as conn:
                conn.execute(
                    "INSERT INTO reactor_inbox (message_id, run_id, name, payload, source, "
                    "posted_at, due_at) VALUES (%s, %s, %s, %s, %s, %s, %s)",
                    (message_id, run_id, name, data, source, time.time(), due),
                )
        except psycopg.Error as exc:
            raise RecordingError(
                f"Posting to run {run_id!r} in {self._shown} failed ({describe(exc)})."
            ) from exc
        return message_id

    def undelivered(self, run_ids: Collection[str]) -> list[Posted]:
        """Messages posted to these runs, due and not yet delivered, in order (of due time)."""
        return self._inbox(run_ids, "(due_at IS NULL OR due_at <= %s)")

    def scheduled(self, run_ids: Collection[str]) -> list[Posted]:
        """Messages posted to these runs with ``at=`` and not due yet, soonest first."""
        return self._inbox(run_ids, "due_at > %s")

    def waiting_messages(self, run_ids: Collection[str]) -> list[Posted]:
        """Messages posted to these runs and not delivered, due or not, in order (one query)."""
        return self._inbox(run_ids, "(due_at IS NULL OR %s::float8 > 0)")

    def _inbox(self, run_ids: Collection[str], due: str) -> list[Posted]:
        with self._pool.connection(timeout=2.0) as conn:  # not a pool's 30 s: see read_inbox
            return read_inbox(conn, run_ids, due)

    def wakeups(self, *, before: datetime | None = None) -> list[Wakeup]:
        """Runs not ended with a timer or a scheduled message (due ``before``), soonest first."""
        limit = due_time(before) if before is not None else math.inf
        rows = self._query(WAKEUPS, (limit,))
        return [Wakeup(run_id, datetime.fromtimestamp(due, UTC)) for run_id, due in rows]

    def record_request(self, run_id: str, request_hash: str, fingerprint: dict[str, Any]) -> None:
        """Keep what a provider was asked (for replay mismatch messages)."""
        self._ensure_writer()
        self._backlog.put(Request(run_id, request_hash, fingerprint))

    def flush(self) -> None:
        """Block until everything appended so far is written, or has failed to be.

        While the database is unreachable this waits for the writer's retries (up to
        ``retry_for`` seconds), so that a flush that returns means the signals are
        there, or their runs' :meth:`recording_error` says why not.
        """
        if self._writer is not None and self._writer.is_alive():
            done = threading.Event()
            self._backlog.put(done)
            done.wait()

    def recording_error(self, run_id: str) -> RecordingError | None:
        """Why ``run_id``'s recording is incomplete, after a flush.

        The database stayed away for ``retry_for`` seconds, a table dropped, a right revoked.
        """
        return self._failures.error_for(run_id)

    def watch_recording(self, run_id: str, failed: Callable[[], None]) -> Callable[[], None]:
        """Have ``failed()`` called (from the writer's thread) once ``run_id``'s recording fails."""
        return self._failures.watch(run_id, failed)

    def close(self) -> None:
        """Write what is queued, stop the writer and close the connections."""
        if self._closed:
            return
        self._closed = True
        writer = self._writer
        if writer is not None and writer.is_alive():
            self._backlog.put(STOP)
            writer.join()
        self._backlog.release()
        self._reads.closed = True
        self._pool.close()
        atexit.unregister(self.close)

    # -- reading -------------------------------------------------------------------

    def _query(self, sql: str, params: Iterable[Any] = ()) -> list[Any]:
        """Rows of a query, once what this process appended is written (read your writes)."""
        if self._writer is not None:
            self.flush()
        return self._reads.query(sql, params)

    def resolve(self, ref: str) -> str:
        """Turn ``ref`` (a run id, a unique prefix of one, or ``last``) into a run id.

        Raises:
            RunNotFoundError: No run matches, or the prefix is ambiguous.
        """
        if ref == "last":
            rows = self._query(
                "SELECT run_id FROM reactor_runs ORDER BY started_at DESC, run_id DESC LIMIT 1"
            )
        else:
            # A prefix compared as text: LIKE would read '_' and '%' in it as wildcards.
            rows = self._query(
                "SELECT run_id FROM reactor_runs WHERE starts_with(run_id, %s) "
                "ORDER BY started_at DESC, run_id DESC LIMIT 6",
                (ref,),
            )
            exact = [row for row in rows if row[0] == ref]
            rows = exact or rows
        return self._one(ref, [str(row[0]) for row in rows])

    def info(self, run_id: str) -> RunInfo:
        """What the store knows of the run, its counters included: one row, no log read.

        What is written so far (the writer may be a batch behind this process's run).

        Raises:
            RunNotFoundError: No such run.
            RecordingError: The database cannot be reached.
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
            RecordingError: The database cannot be reached, or a row cannot be read.
        """
        return self._reads.page(run_id, after=after, before=before, limit=limit, names=names)

    def state(self, run_id: str) -> dict[str, Any]:
        """The run's latest state, kept in its row as it is written (no log read).

        A run recorded before this store kept states is rebuilt from its tail.

        Raises:
            RunNotFoundError: No such run.
            RecordingError: The database cannot be reached.
        """
        kept = self._reads.state(run_id)
        return kept if kept is not None else self.load_tail(run_id).state

    def load(self, run_id: str) -> Recording:
        """Return the recording of ``run_id`` (an incomplete one if the run was cut off).

        Raises:
            RunNotFoundError: No such run.
            RecordingError: A row of the run cannot be read (edited by hand, damaged).
        """
        if self._writer is not None:
            self.flush()
        return self._reads.load(run_id)

    def load_tail(self, run_id: str) -> Recording:
        """The run from its latest ``harness:snapshot`` on: what a resume reads.

        The signals after the one the snapshot was taken after (the snapshot among
        them); the whole run when it has none. Found through an index of snapshots, so
        the time it takes does not grow with the length of the log. A snapshot that
        fails its check (changed since it was taken) gives way to the latest sound one
        before it (``reactor._recording.tail``).

        Raises:
            RunNotFoundError: No such run.
            RecordingError: A row of the run cannot be read.
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

        ``tag`` is a key (``"nightly"``) or ``key=value`` (``"env=prod"``). Runs
        recorded by other processes to the same database are listed too.
        """
        sql, params = runs_filter(
            STATUS, "reactor_run_tags", "%s", graph=graph, tag=tag, status=status, limit=limit
        )
        if self._writer is not None:
            self.flush()
        return self._reads.infos(sql, params)

    def delete(self, run_id: str) -> bool:
        """Delete a run, its signals, tags and requests; return whether it existed."""
        if self._writer is not None:
            self.flush()
        try:
            with self._pool.connection() as conn:
                found = delete_run(conn, run_id)
        except psycopg.Error as exc:
            raise RecordingError(
                f"Deleting run {run_id!r} from {self._shown} failed ({describe(exc)}); "
                "check that the database is reachable."
            ) from exc
        return bool(found)

    def tag(
        self, run_id: str, tags: Mapping[str, str] | None = None, *, remove: Collection[str] = ()
    ) -> RunInfo:
        """Set and drop a run's tags; its info after (see :class:`SignalStoreBase`)."""
        retagged({}, tags, remove)  # bad tags are refused before anything is written
        if self._writer is not None:
            self.flush()
        try:
            with self._pool.connection() as conn:
                found = retag_run(conn, run_id, dict(tags or {}), list(remove))
        except psycopg.Error as exc:
            raise RecordingError(f"Tagging run {run_id!r} failed ({describe(exc)}).") from exc
        if not found:
            raise RunNotFoundError(f"No run {run_id!r} in {self._shown}.")
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
            RecordingError: The database cannot be reached.
        """
        cutoff, statuses = prune_bounds(older_than, status, keep_last)
        if self._writer is not None:
            self.flush()
        try:
            with self._pool.connection() as conn:
                return prune_runs(conn, cutoff, statuses, keep_last, dry_run)
        except psycopg.Error as exc:
            raise RecordingError(
                f"Pruning runs in {self._shown} failed ({describe(exc)}); check that the "
                "database is reachable."
            ) from exc

    def __repr__(self) -> str:
        return f"PostgresSignalStore({self._shown!r})"
