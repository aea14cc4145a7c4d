"""The writer thread of a PostgreSQL signal store: queued items, batches, retries.

The store puts items on a queue; the writer takes up to ``batch_size`` of them at a
time, gathers them into a :class:`Batch` and writes the batch as one transaction
(signals by ``COPY``). A write that fails because the database is unreachable, or
because the server gave up on a transaction (deadlock, serialization), is retried
with backoff on a fresh connection for ``retry_for`` seconds; the batch is kept in
memory meanwhile, so nothing in it is lost. A write that still fails fails the runs
of that batch, not the store: :class:`WriteFailures` marks them (nothing more of
theirs is written, and what is not written is counted), and the next batch is tried
afresh, so the store records again as soon as the database is back. A batch that
fails for what it holds (a value the database refuses: a NUL in a text column, say) is
written again run by run, one transaction each, so that only the run whose entry
cannot be written fails, and every other run's signals are written. Each kind of
queued item has its own branch in :meth:`Batch.add` and its own step in :func:`write`.

Each run's signals are hash-chained as they are written (``reactor._recording.chain``):
a batch's transaction reads the head of each run the writer does not know yet, and
the heads move on once it commits.
"""

from __future__ import annotations

import dataclasses
import math
import queue
import threading
import time
from collections.abc import Callable, Collection
from typing import Any

import psycopg
import pydantic_core
from psycopg import errors
from psycopg_pool import ConnectionPool, PoolTimeout

from reactor._backends.tally import Tally
from reactor._recording.chain import Heads
from reactor._recording.info import RunInfo
from reactor._recording.writes import Backlog, WriteFailures
from reactor._signals.signal import Signal, json_fallback

__all__ = ["STOP", "Batch", "Delivery", "Fence", "Request", "write", "write_loop"]

Fence = Callable[[psycopg.Cursor[Any], set[str]], Collection[str]]
"""Called in each write's transaction with the runs it writes; the runs it must not
write (their writer lost its right to: a worker whose lease was taken over)."""

STOP = object()
"""Put on the queue to stop the writer after what is queued before it."""

_COLUMNS = "run_id, seq, id, name, payload, timestamp, source, caused_by, depth, hash"
_BACKOFF_FIRST = 0.05
_BACKOFF_MOST = 2.0


@dataclasses.dataclass(frozen=True, slots=True)
class Delivery:
    """A posted message's signal, written together with the message's delivery."""

    message_id: str
    signal: Signal


@dataclasses.dataclass(frozen=True, slots=True)
class Request:
    """A provider request to keep beside a run (what replay names when it differs)."""

    run_id: str
    request_hash: str
    fingerprint: dict[str, Any]


class Batch:
    """What one transaction writes, gathered from queued items in queue order.

    Attributes:
        signals: Rows for ``reactor_signals``, in the order they were appended.
        runs: Run registrations by run id (the latest wins).
        requests: Rows for ``reactor_requests``.
        tally: What the signals add to each run's row (counters, end, state, timers).
        delivered: Posted messages the batch delivers: (seq, message id, run id).
        waiting: Flushes to release once the batch is written (or has failed).
        stop: Whether :data:`STOP` was taken.
        touched: The runs with rows in the batch.
    """

    def __init__(self, failures: WriteFailures) -> None:
        self.failures = failures
        self.touched: set[str] = set()
        self.signals: list[list[Any]] = []
        self.runs: dict[str, RunInfo] = {}
        self.requests: list[tuple[str, str, str, str]] = []
        self.tally = Tally()
        self.delivered: list[tuple[int, str, str]] = []
        self.waiting: list[threading.Event] = []
        self.stop = False
        self.fence: Fence | None = None
        self.heads: Heads | None = None
        self.linked: dict[str, tuple[int, str | None]] = {}

    def __bool__(self) -> bool:
        return bool(self.signals or self.runs or self.requests)

    def add(self, item: object) -> None:
        """Take one queued item into the batch."""
        if type(item) is Signal:
            self._signal(item)
        elif type(item) is Delivery:
            if self._signal(item.signal):
                self.delivered.append((item.signal.seq, item.message_id, item.signal.run_id or ""))
        elif isinstance(item, RunInfo):
            if not self.failures.lost(item.run_id):
                self.runs[item.run_id] = item
                self.touched.add(item.run_id)
        elif isinstance(item, Request):
            if self.failures.lost(item.run_id):
                return
            fingerprint = pydantic_core.to_json(item.fingerprint, fallback=json_fallback)
            agent = str(item.fingerprint.get("agent"))
            self.requests.append((item.run_id, item.request_hash, agent, fingerprint.decode()))
            self.touched.add(item.run_id)
        elif isinstance(item, threading.Event):
            self.waiting.append(item)
        elif item is STOP:
            self.stop = True
        else:
            raise TypeError(f"The signal store's writer cannot write {item!r}.")

    def per_run(self) -> dict[str, int]:
        """Signals per run in the batch (a run registered without signals counts 0)."""
        return {**dict.fromkeys(self.touched, 0), **self.tally.counts}

    def only(self, run_id: str) -> Batch:
        """What the batch writes of ``run_id`` alone (it is written again run by run)."""
        one = Batch(self.failures)
        one.touched = self.touched & {run_id}
        one.signals = [row for row in self.signals if row[0] == run_id]
        if run_id in self.runs:
            one.runs[run_id] = self.runs[run_id]
        one.requests = [row for row in self.requests if row[0] == run_id]
        one.tally = self.tally.only(run_id)
        one.delivered = [row for row in self.delivered if row[2] == run_id]
        one.fence, one.heads = self.fence, self.heads
        return one

    def drop(self, runs: set[str]) -> None:
        """Leave out everything of ``runs`` (the fence refused them)."""
        self.signals = [row for row in self.signals if row[0] not in runs]
        self.requests = [row for row in self.requests if row[0] not in runs]
        self.delivered = [row for row in self.delivered if row[2] not in runs]
        for run_id in runs:
            self.runs.pop(run_id, None)
        self.tally.drop(runs)
        self.touched -= runs

    def _signal(self, signal: Signal) -> bool:
        """Take a signal; ``False`` if it is not written (its run's recording failed)."""
        run_id = signal.run_id or "unbound"
        failures = self.failures
        marked = failures.failed  # empty unless a write failed: one truth test
        if marked and run_id in marked:
            failures.drop(run_id)
            return False
        payload = signal.payload
        try:
            data = None if payload is None else _encode(payload)
        except Exception as exc:  # a value the log cannot hold: this run fails here
            failures.lose({run_id: 1}, exc, store=False)
            return False
        self.signals.append(
            [
                run_id,
                signal.seq,
                signal.id,
                signal.name,
                data,
                signal.timestamp,
                signal.source,
                signal.caused_by,
                signal.depth,
                None,  # its hash, set when the batch is linked
            ]
        )
        self.tally.add(signal, run_id)
        return True


def _encode(payload: Any) -> str:
    return pydantic_core.to_json(payload, fallback=json_fallback).decode()


def write_loop(
    pool: ConnectionPool[Any],
    backlog: Backlog,
    batch_size: int,
    retry_for: float,
    failures: WriteFailures,
    fence: Callable[[], Fence | None] = lambda: None,
    heads: Heads | None = None,
) -> None:
    """Drain the queue in batches until :data:`STOP`; each batch is one transaction.

    A batch that fails for good fails its runs (see :class:`WriteFailures`); later
    batches are written as usual, and flushes are always released. ``fence`` gives the
    store's :data:`Fence`, if it has one; ``heads``, the chains the writer links
    (``None``: none). Runs waiting for room are let go as the backlog goes down, and
    all of them when the writer stops.
    """
    chains = heads if heads is not None else Heads(None)
    try:
        while True:
            batch = Batch(failures)
            batch.fence, batch.heads = fence(), chains
            taken = _take(backlog.queue, batch_size)
            for item in taken:
                batch.add(item)
            backlog.taken(len(taken))
            if batch:
                _write_batch(pool, batch, retry_for)
            backlog.written()
            for done in batch.waiting:
                done.set()
            if batch.stop:
                return
    finally:
        backlog.release()


_DATA_ERRORS = (psycopg.DataError, psycopg.IntegrityError, ValueError, TypeError)
"""What a batch fails with for what it holds (a value the database refuses), not for
the database: such a batch is written again run by run."""


def _write_batch(pool: ConnectionPool[Any], batch: Batch, retry_for: float) -> None:
    """Write ``batch``, else each of its runs apart when it holds what cannot be written."""
    failures = batch.failures
    try:
        write_with_retry(pool, batch, retry_for)
    except Exception as exc:
        runs = sorted(batch.per_run())
        if not isinstance(exc, _DATA_ERRORS) or len(runs) < 2:
            failures.lose(batch.per_run(), exc)
            return
        for run_id in runs:
            one = batch.only(run_id)
            try:
                write_with_retry(pool, one, retry_for)
            except Exception as error:
                failures.lose(one.per_run(), error, store=not isinstance(error, _DATA_ERRORS))
            else:
                _linked(one)
    else:
        _linked(batch)
        failures.wrote()


def _linked(batch: Batch) -> None:
    """``batch`` is committed: its runs' chains go on from what it wrote."""
    if batch.heads is not None:
        batch.heads.keep(batch.linked)


def _take(items: queue.SimpleQueue[object], most: int) -> list[object]:
    """Wait for one item, then take what else is queued, up to ``most`` in all."""
    taken = [items.get()]
    while len(taken) < most:
        try:
            taken.append(items.get_nowait())
        except queue.Empty:
            break
    return taken


def write_with_retry(pool: ConnectionPool[Any], batch: Batch, retry_for: float) -> None:
    """Write ``batch``, retrying with backoff while the database is unavailable.

    ``OperationalError`` covers what passes: a lost connection, a server restarting,
    a deadlock or serialization failure, no connection to be had from the pool.
    Anything else (a table dropped, a permission revoked) fails at once. When the
    pool has no connection to give (after an outage it reconnects on its own, slowly
    backing off), the batch goes through a connection of its own, so recording
    resumes as soon as the database is back.
    """
    deadline = time.monotonic() + retry_for
    delay = _BACKOFF_FIRST
    while True:
        left = max(0.1, deadline - time.monotonic())
        try:
            try:
                with pool.connection(timeout=min(left, 1.0)) as conn:
                    write(conn, batch)
            except PoolTimeout:
                conninfo = pool.conninfo if isinstance(pool.conninfo, str) else pool.conninfo()
                with psycopg.connect(
                    conninfo, autocommit=True, connect_timeout=max(1, math.ceil(left))
                ) as own:
                    write(own, batch)
            return
        except psycopg.OperationalError:
            left = deadline - time.monotonic()
            if left <= 0:
                raise
            time.sleep(min(delay, left))
            delay = min(delay * 2, _BACKOFF_MOST)


def write(conn: psycopg.Connection[Any], batch: Batch) -> None:
    """Write ``batch`` in one transaction.

    Signals go by ``COPY``. If some of them are already there (a batch retried after
    its commit was lost on the way back), the batch is written again through a
    temporary table that skips them, and only the new ones are counted.
    """
    try:
        _write(conn, batch, duplicates=False)
    except errors.UniqueViolation:
        _write(conn, batch, duplicates=True)


def _write(conn: psycopg.Connection[Any], batch: Batch, *, duplicates: bool) -> None:
    with conn.transaction(), conn.cursor() as cur:
        if batch.fence is not None and (runs := batch.touched | batch.tally.counts.keys()):
            refused = batch.fence(cur, runs)
            if refused:
                batch.drop(set(refused))
        # Rows of reactor_runs are always taken in run id order, so two processes
        # writing batches that touch the same runs cannot deadlock.
        if batch.runs:
            infos = sorted(batch.runs.values(), key=lambda info: info.run_id)
            cur.executemany(
                "INSERT INTO reactor_runs (run_id, graph, target, target_hash, started_at, "
                "parent_run_id, forked_from) VALUES (%s, %s, %s, %s, %s, %s, %s) "
                "ON CONFLICT (run_id) DO UPDATE SET graph = EXCLUDED.graph, "
                "target = EXCLUDED.target, target_hash = EXCLUDED.target_hash, "
                "parent_run_id = EXCLUDED.parent_run_id, "
                "forked_from = COALESCE(EXCLUDED.forked_from, reactor_runs.forked_from)",
                [
                    (
                        i.run_id,
                        i.graph,
                        i.target,
                        i.target_hash,
                        i.started_at or time.time(),
                        i.parent_run_id,
                        i.forked_from,
                    )
                    for i in infos
                ],
            )
            tags = [(i.run_id, key, value) for i in infos for key, value in i.tags.items()]
            if tags:
                cur.executemany(
                    "INSERT INTO reactor_run_tags (run_id, key, value) VALUES (%s, %s, %s) "
                    "ON CONFLICT (run_id, key) DO UPDATE SET value = EXCLUDED.value",
                    tags,
                )
        tally = batch.tally
        if batch.signals:
            cur.executemany(
                "INSERT INTO reactor_runs (run_id, started_at) VALUES (%s, %s) "
                "ON CONFLICT (run_id) DO NOTHING",
                sorted(tally.firsts.items()),
            )
            rows = _chained(cur, batch)
            counts = _copy_signals(cur, batch, rows, duplicates=duplicates)
            cur.executemany(
                "UPDATE reactor_runs SET signals = signals + %s, "
                "last_seq = GREATEST(last_seq, %s) WHERE run_id = %s",
                [
                    (count, tally.last[run_id], run_id)
                    for run_id, count in sorted(counts.items())
                    if count
                ],
            )
        _write_tally(cur, tally)
        if batch.delivered:
            cur.executemany(
                "UPDATE reactor_inbox SET delivered_seq = %s "
                "WHERE message_id = %s AND delivered_seq IS NULL",
                [(seq, message_id) for seq, message_id, _ in batch.delivered],
            )
        if batch.requests:
            cur.executemany(
                "INSERT INTO reactor_requests (run_id, request_hash, agent, fingerprint) "
                "VALUES (%s, %s, %s, %s) ON CONFLICT (run_id, request_hash) DO UPDATE SET "
                "agent = EXCLUDED.agent, fingerprint = EXCLUDED.fingerprint",
                batch.requests,
            )


def _write_tally(cur: psycopg.Cursor[Any], tally: Tally) -> None:
    """What the batch's signals add to their runs' rows (in run id order: no deadlock)."""
    if tally.prompts:
        cur.executemany(
            "UPDATE reactor_runs SET prompts = GREATEST(0, prompts + %s) WHERE run_id = %s",
            [(count, run_id) for run_id, count in sorted(tally.prompts.items())],
        )
    if tally.spent:
        cur.executemany(
            "UPDATE reactor_runs SET input_tokens = input_tokens + %s, "
            "output_tokens = output_tokens + %s, cost_usd = cost_usd + %s WHERE run_id = %s",
            [(*spent, run_id) for run_id, spent in sorted(tally.spent.items())],
        )
    if tally.started or tally.changes:
        stateful = sorted(tally.stateful())
        current: dict[str, str | None] = {}
        if stateful:
            cur.execute(
                "SELECT run_id, state::text FROM reactor_runs WHERE run_id = ANY(%s) "
                "ORDER BY run_id FOR UPDATE",
                (stateful,),
            )
            current = dict(cur.fetchall())
        states = sorted(tally.states(current), key=_run_of)
        cur.executemany("UPDATE reactor_runs SET state = %s::json WHERE run_id = %s", states)
    if tally.ends:
        cur.executemany(
            "UPDATE reactor_runs SET ended_at = %s, status = %s, reason = %s, "
            "failures = %s WHERE run_id = %s",
            [(*end, run_id) for run_id, end in sorted(tally.ends.items())],
        )
    timers = tally.timers
    if timers:
        cur.executemany(
            "INSERT INTO reactor_timers (run_id, timer_id, agent, due_at) "
            "VALUES (%s, %s, %s, %s) ON CONFLICT (run_id, timer_id) DO UPDATE SET "
            "agent = EXCLUDED.agent, due_at = EXCLUDED.due_at",
            timers.set,
        )
        cur.executemany(
            "DELETE FROM reactor_timers WHERE run_id = %s AND timer_id = %s", timers.fired
        )
        cur.executemany("DELETE FROM reactor_timers WHERE run_id = %s", timers.ended)


def _run_of(row: tuple[str | None, str]) -> str:
    return row[1]


def _chained(cur: psycopg.Cursor[Any], batch: Batch) -> list[list[Any]]:
    """The batch's signal rows with their hashes (the heads of runs it does not know read here)."""
    if batch.heads is None:
        return batch.signals

    def lookup(run_ids: list[str]) -> dict[str, tuple[int, str | None]]:
        cur.execute(
            "SELECT r.run_id, s.seq, s.hash FROM unnest(%s::text[]) AS r (run_id) "
            "CROSS JOIN LATERAL (SELECT seq, hash FROM reactor_signals "
            "WHERE run_id = r.run_id ORDER BY seq DESC LIMIT 1) AS s",
            (run_ids,),
        )
        return {run_id: (seq, digest) for run_id, seq, digest in cur.fetchall()}

    batch.linked = batch.heads.link(batch.signals, lookup)
    return batch.signals


def _copy_signals(
    cur: psycopg.Cursor[Any], batch: Batch, rows: list[list[Any]], *, duplicates: bool
) -> dict[str, int]:
    if not duplicates:
        with cur.copy(f"COPY reactor_signals ({_COLUMNS}) FROM STDIN") as copy:
            write_row = copy.write_row
            for row in rows:
                write_row(row)
        return batch.tally.counts
    cur.execute("CREATE TEMPORARY TABLE reactor_incoming (LIKE reactor_signals) ON COMMIT DROP")
    with cur.copy(f"COPY reactor_incoming ({_COLUMNS}) FROM STDIN") as copy:
        for row in rows:
            copy.write_row(row)
    cur.execute(
        f"INSERT INTO reactor_signals ({_COLUMNS}) SELECT {_COLUMNS} FROM reactor_incoming "
        "ON CONFLICT (run_id, seq) DO NOTHING RETURNING run_id"
    )
    counts: dict[str, int] = {}
    for (run_id,) in cur.fetchall():
        counts[run_id] = counts.get(run_id, 0) + 1
    return counts
