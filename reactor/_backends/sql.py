"""Recordings in a SQL database, with appends batched off the event loop, for any dialect.

:class:`SqlSignalStore` is every behaviour of the SQL stores, written once: the backlog
and the writer thread, flushes, reads, tags, prune, delete and the inbox. What differs
between SQLite and PostgreSQL (connections, the SQL text, errors, the schema) is its
:class:`~reactor._backends.dialect.Dialect`; :class:`~reactor.SQLiteSignalStore` and
:class:`~reactor.PostgresSignalStore` only make theirs.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import math
import threading
import time
import weakref
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from reactor._backends.dialect import Dialect, describe
from reactor._backends.sql_read import STATUS, Reads
from reactor._backends.sql_writer import SET_TAG, STOP, Delivery, Fence, Request, write_loop
from reactor._recording.chain import Heads, configured
from reactor._recording.inbox import (
    Posted,
    Wakeup,
    check_posted,
    decode_payload,
    due_time,
    encode_payload,
    new_message_id,
)
from reactor._recording.info import RunInfo, prune_bounds, retagged, runs_filter
from reactor._recording.recording import Recording
from reactor._recording.store import DEFAULT_SNAPSHOT_EVERY, PAGE, check_snapshot_every
from reactor._recording.storebase import SignalStoreBase
from reactor._recording.tail import sound_tail
from reactor._recording.writes import Backlog, WriteFailures
from reactor._signals.patterns import Pattern
from reactor._signals.signal import Signal
from reactor.exceptions import RecordingError

__all__ = ["SqlSignalStore"]

WAKEUPS = (
    "SELECT w.run_id, MIN(w.due_at) FROM (SELECT run_id, due_at FROM {timers} UNION ALL "
    "SELECT run_id, due_at FROM {inbox} WHERE delivered_seq IS NULL AND due_at IS NOT NULL) w "
    "JOIN {runs} r ON r.run_id = w.run_id WHERE r.ended_at IS NULL GROUP BY w.run_id "
    "HAVING MIN(w.due_at) < ? ORDER BY 2, 1"
)
"""Runs not ended with their next timer or scheduled message."""

PRUNABLE = (
    "SELECT run_id FROM {runs} WHERE run_id IN (SELECT run_id FROM (SELECT run_id, "
    "ended_at, ROW_NUMBER() OVER (PARTITION BY graph ORDER BY started_at DESC, run_id DESC) "
    "AS newest FROM {runs} WHERE ended_at IS NOT NULL AND status IS NOT NULL{statuses}) "
    "ended WHERE newest > ? AND ended_at < ?) ORDER BY run_id{for_update}"
)
"""The ended runs ``prune`` deletes: older than the cutoff, past the newest of their graph."""

_RUN_TABLES = ("signals", "run_tags", "requests", "inbox", "timers", "runs")
"""The tables holding a run's rows (``runs`` last: a run is gone once its row is)."""

_INBOX = (
    "SELECT message_id, run_id, name, {payload}, source, posted_at, due_at FROM {{inbox}} "
    "WHERE delivered_seq IS NULL AND {member} AND {due} "
    "ORDER BY COALESCE(due_at, posted_at), position"
)


class SqlSignalStore(SignalStoreBase):
    """Recordings in a SQL database, over the dialect of the database.

    ``append`` only queues the signal; a writer thread takes queued signals in batches
    and writes each batch in one transaction, so dispatch never waits on the database
    and a crash loses at most what was still queued. Past ``max_backlog`` queued
    signals the runs recording here wait between their steps (:meth:`room`:
    backpressure is awaited, the event loop goes on). A write that fails for a reason
    that passes (a lock, a lost connection) is retried, keeping the signals; one that
    fails for good fails the runs being written, which end ``failed`` with a
    :class:`~reactor.RecordingError` counting their unwritten signals, and the store
    records the next runs as soon as the cause is gone (``_backends.sql_writer``).

    Args:
        dialect: The database (connections, SQL, errors, schema), migrated already.
        batch_size: Most queued items written per transaction.
        max_backlog: Queued signals beyond which the runs recording here wait for the
            writer, so memory stays bounded when signals come faster than they are written.
        snapshot_every: A run recorded here writes a ``harness:snapshot`` every this
            many signals, so that resuming it reads only what came after the latest
            one (``None``: never).
    """

    def __init__(
        self,
        dialect: Dialect,
        *,
        batch_size: int = 2_000,
        max_backlog: int = 1_000,
        snapshot_every: int | None = DEFAULT_SNAPSHOT_EVERY,
    ) -> None:
        self.snapshot_every = check_snapshot_every(snapshot_every)
        self.dialect = dialect
        self.readonly = dialect.readonly
        self.batch_size = batch_size
        self.max_backlog = max_backlog
        self.closing = False
        self.fence: Fence | None = None  # runs a write leaves out, asked in its transaction
        self._lock = threading.Lock()
        self._backlog = Backlog(max_backlog)
        self._writer: threading.Thread | None = None
        self._failures = WriteFailures(dialect.shown)
        self._closed = False
        self._reads = Reads(dialect, self._read, repr(self))

    # -- writing -------------------------------------------------------------------

    def _ensure_writer(self) -> None:
        if self._writer is None:
            with self._lock:
                if self._writer is None:
                    self._refuse_writes()
                    self._writer = threading.Thread(
                        target=write_loop,
                        args=(
                            self.dialect,
                            self._backlog,
                            self.batch_size,
                            weakref.ref(self),
                            self._failures,
                            Heads(configured()),
                        ),
                        name=f"reactor-recorder {self.dialect.shown}",
                        daemon=True,
                    )
                    self._writer.start()
                    atexit.register(self.close)

    def _refuse_writes(self) -> None:
        """Raise unless the store may be written to.

        Raises:
            RecordingError: It is closed, or open read-only.
        """
        if self._closed:
            raise RecordingError(f"The signal store {self!r} is closed.")
        if self.readonly:
            raise RecordingError(
                f"The signal store {self!r} is open read-only. Open it without "
                "readonly=True to record to it."
            )

    def start_run(self, info: RunInfo) -> None:
        """Register a run about to be recorded (graph, tags, target).

        Raises:
            RecordingError: The store is closed or read-only.
        """
        self._refuse_writes()
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

    def flush(self) -> None:
        """Block until everything appended so far is written, or has failed to be.

        While a write is retried (a lock held, the database away) this waits for the
        writer's retries, so that a flush that returns means the signals are there, or
        their runs' :meth:`recording_error` says why not.
        """
        if self._writer is not None and self._writer.is_alive():
            done = threading.Event()
            self._backlog.put(done)
            done.wait()

    def recording_error(self, run_id: str) -> RecordingError | None:
        """Why ``run_id``'s recording is incomplete (a full disk, no database), after a flush."""
        return self._failures.error_for(run_id)

    def watch_recording(self, run_id: str, failed: Callable[[], None]) -> Callable[[], None]:
        """Have ``failed()`` called (from the writer's thread) once ``run_id``'s recording fails."""
        return self._failures.watch(run_id, failed)

    def close(self) -> None:
        """Write what is queued, stop the writer and close the connections."""
        if self._closed:
            return
        self._closed = True
        self.closing = True
        writer = self._writer
        if writer is not None and writer.is_alive():
            self._backlog.put(STOP)
            writer.join()
        self._backlog.release()
        self.dialect.close()
        atexit.unregister(self.close)

    # -- the inbox -------------------------------------------------------------------

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
            RecordingError: The store is read-only or closed, or the database cannot be
                reached.
        """
        check_posted(name, payload)
        due = due_time(at)
        self._refuse_writes()
        message_id = new_message_id()
        row = (message_id, run_id, name, encode_payload(payload), source, time.time(), due)
        with self._doing(f"Posting to run {run_id!r}") as conn:
            conn.execute(
                self.dialect.sql(
                    "INSERT INTO {inbox} (message_id, run_id, name, payload, source, "
                    "posted_at, due_at) VALUES (?, ?, ?, {json_mark}, ?, ?, ?)"
                ),
                row,
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
        """The undelivered messages of these runs whose ``due_at`` passes ``due`` (``?``: now).

        Read with a short wait for a connection: a run starting while the database is
        away waits briefly, not a pool's 30 s.
        """
        if not run_ids:
            return []
        dialect = self.dialect
        query = _INBOX.format(
            payload=dialect.column("payload"), member=dialect.member("run_id"), due=due
        )
        rows = self._read(
            dialect.sql(query), (dialect.array(list(run_ids)), float(time.time())), wait=2.0
        )
        return [
            Posted(mid, run, name, decode_payload(data), source, at, due_at)
            for mid, run, name, data, source, at, due_at in rows
        ]

    def wakeups(self, *, before: datetime | None = None) -> list[Wakeup]:
        """Runs not ended with a timer or a scheduled message (due ``before``), soonest first."""
        limit = due_time(before) if before is not None else math.inf
        rows = self._query(self.dialect.sql(WAKEUPS), (limit,))
        return [Wakeup(run_id, datetime.fromtimestamp(due, UTC)) for run_id, due in rows]

    # -- reading -------------------------------------------------------------------

    def _read(
        self, sql: str, params: Iterable[Any] = (), *, wait: float | None = None
    ) -> list[Any]:
        """Rows of one statement (in the dialect's SQL), read whole.

        Raises:
            RecordingError: The store is closed, or the database cannot be read.
        """
        if self._closed:
            raise RecordingError(f"The signal store {self!r} is closed.")
        dialect = self.dialect
        try:
            with dialect.connection(wait=wait) as conn:
                rows: list[Any] = conn.execute(sql, tuple(params)).fetchall()
        except dialect.errors as exc:
            raise RecordingError(
                f"Reading from {dialect.shown} failed ({describe(exc)}); check that the "
                "database is reachable and is a reactor run database."
            ) from exc
        return rows

    def _query(self, sql: str, params: Iterable[Any] = ()) -> list[Any]:
        """Rows of a query, once what this process appended is written (read your writes)."""
        if self._writer is not None:
            self.flush()
        return self._read(sql, params)

    def resolve(self, ref: str) -> str:
        """Turn ``ref`` (a run id, a unique prefix of one, or ``last``) into a run id.

        Of runs started at the same moment, the one with the greatest id is the later.

        Raises:
            RunNotFoundError: No run matches, or the prefix is ambiguous.
        """
        sql = self.dialect.sql
        if ref == "last":
            rows = self._query(
                sql("SELECT run_id FROM {runs} ORDER BY started_at DESC, run_id DESC LIMIT 1")
            )
        else:
            # A prefix compared as text: LIKE would read '_' and '%' in it as wildcards.
            rows = self._query(
                sql(
                    "SELECT run_id FROM {runs} WHERE substr(run_id, 1, ?) = ? "
                    "ORDER BY started_at DESC, run_id DESC LIMIT 6"
                ),
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
            RecordingError: The database cannot be read.
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
            RecordingError: The database cannot be read, or a row is damaged.
        """
        return self._reads.page(run_id, after=after, before=before, limit=limit, names=names)

    def state(self, run_id: str) -> dict[str, Any]:
        """The run's latest state, kept in its row as it is written (no log read).

        A run recorded before this store kept states is rebuilt from its tail.

        Raises:
            RunNotFoundError: No such run.
            RecordingError: The database cannot be read.
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
        them), and the earlier ones it names as still needed (triggers not decided
        yet); the whole run when it has none. Found through an index of snapshots, so
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

        ``tag`` is a key (``"nightly"``) or ``key=value`` (``"env=prod"``); ``status``
        is ``running``, ``waiting`` or a final status. Runs recorded by other processes
        to the same database are listed too.
        """
        sql = self.dialect.sql
        where = (sql(STATUS), sql("{run_tags}"), self.dialect.mark)
        clause, params = runs_filter(*where, graph=graph, tag=tag, status=status, limit=limit)
        if self._writer is not None:
            self.flush()
        return self._reads.infos(clause, params)

    # -- changing what is stored ------------------------------------------------------

    @contextlib.contextmanager
    def _doing(self, what: str) -> Iterator[Any]:
        """A connection for a change, its driver's errors told as ``what`` failing.

        Raises:
            RecordingError: The store is closed, or the change failed in the database.
        """
        if self._closed:
            raise RecordingError(f"The signal store {self!r} is closed.")
        dialect = self.dialect
        try:
            with dialect.connection() as conn:
                yield conn
        except dialect.errors as exc:
            raise RecordingError(
                f"{what} in {dialect.shown} failed ({describe(exc)}); check that the "
                "database is reachable and writable."
            ) from exc

    def _admin(self, what: str, *, dry_run: bool = False) -> None:
        """Ready the store for a change: refused read-only, what is queued written first."""
        if self.readonly and not dry_run:
            raise RecordingError(
                f"The signal store {self!r} is open read-only. Open it without "
                f"readonly=True for {what}."
            )
        if self._writer is not None:
            self.flush()

    def delete(self, run_id: str) -> bool:
        """Delete a run, its signals, tags, requests, inbox and timers; whether it existed.

        Raises:
            RecordingError: The store is read-only, or the database cannot be reached.
        """
        self._admin("deleting")
        dialect = self.dialect
        found = 0
        with self._doing(f"Deleting run {run_id!r}") as conn, dialect.transaction(conn) as cur:
            for table in _RUN_TABLES:
                query = dialect.sql(f"DELETE FROM {{{table}}} WHERE run_id = ?")
                deleted = cur.execute(query, (run_id,)).rowcount
                found += deleted if table in ("runs", "signals") else 0
        return found > 0

    def tag(
        self, run_id: str, tags: Mapping[str, str] | None = None, *, remove: Collection[str] = ()
    ) -> RunInfo:
        """Set and drop a run's tags in one transaction; its info after (see the base class).

        Raises:
            RunNotFoundError: No such run.
            RecordingError: The store is read-only, or the database cannot be reached.
        """
        retagged({}, tags, remove)  # bad tags are refused before anything is written
        self._admin("tagging")
        sql = self.dialect.sql
        with self._doing(f"Tagging run {run_id!r}") as conn, self.dialect.transaction(conn) as cur:
            found = cur.execute(
                sql("SELECT 1 FROM {runs} WHERE run_id = ?{for_update}"), (run_id,)
            ).fetchone()
            if found is not None:
                cur.executemany(
                    sql("DELETE FROM {run_tags} WHERE run_id = ? AND key = ?"),
                    [(run_id, key) for key in remove],
                )
                cur.executemany(sql(SET_TAG), [(run_id, k, v) for k, v in (tags or {}).items()])
        if found is None:
            raise self._reads.missing(run_id)
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

        The runs are chosen and deleted in one transaction that holds them (SQLite's
        write lock, PostgreSQL's row locks), so a run is deleted whole or not at all,
        also while another process prunes.

        Raises:
            ValueError: A status is not one a run ends with, or a bound is negative.
            RecordingError: The store is read-only, or the database cannot be reached.
        """
        cutoff, statuses = prune_bounds(older_than, status, keep_last)
        self._admin("pruning", dry_run=dry_run)
        dialect = self.dialect
        chosen = "" if statuses is None else f" AND {dialect.member('status')}"
        params = [] if statuses is None else [dialect.array(statuses)]
        with self._doing("Pruning runs") as conn, dialect.transaction(conn) as cur:
            query = dialect.sql(PRUNABLE.replace("{statuses}", chosen))
            ids = [row[0] for row in cur.execute(query, (*params, keep_last, cutoff)).fetchall()]
            if ids and not dry_run:
                for table in _RUN_TABLES:
                    member = dialect.member("run_id")
                    query = dialect.sql(f"DELETE FROM {{{table}}} WHERE {member}")
                    cur.execute(query, (dialect.array(ids),))
        return len(ids)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.dialect.shown!r})"
