"""The writer thread of a PostgreSQL signal store: queued items, batches, retries.

The store puts items on a queue; the writer takes up to ``batch_size`` of them at a
time, gathers them into a :class:`Batch` and writes the batch as one transaction
(signals by ``COPY``). A write that fails because the database is unreachable, or
because the server gave up on a transaction (deadlock, serialization), is retried
with backoff on a fresh connection for ``retry_for`` seconds; the batch is kept in
memory meanwhile, so nothing in it is lost. Each kind of queued item has its own
branch in :meth:`Batch.add` and its own step in :func:`write`.
"""

from __future__ import annotations

import dataclasses
import queue
import threading
import time
import weakref
from typing import Any, Protocol

import psycopg
import pydantic_core
from psycopg import errors
from psycopg_pool import ConnectionPool

from reactor._recording.info import RunInfo
from reactor._signals.names import HARNESS_END, SESSION_PROMPT, SESSION_REPLY, SESSION_TIMEOUT
from reactor._signals.signal import Signal, json_fallback

__all__ = ["STOP", "Batch", "Delivery", "Request", "write", "write_loop"]

STOP = object()
"""Put on the queue to stop the writer after what is queued before it."""

_COLUMNS = "run_id, seq, id, name, payload, timestamp, source, caused_by, depth"
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


class WriteOwner(Protocol):
    """What the writer thread reports to: the store that owns it."""

    def _failed(self, error: BaseException) -> None: ...


class Batch:
    """What one transaction writes, gathered from queued items in queue order.

    Attributes:
        signals: Rows for ``reactor_signals``, in the order they were appended.
        runs: Run registrations by run id (the latest wins).
        requests: Rows for ``reactor_requests``.
        counts: Signals per run, to add to ``reactor_runs.signals``.
        firsts: Each run's first signal time, for a run never registered.
        ends: Each run's ``harness:end`` (ended_at, status, reason, failures).
        waiting: Flushes to release once the batch is written (or has failed).
        stop: Whether :data:`STOP` was taken.
    """

    def __init__(self) -> None:
        self.signals: list[tuple[Any, ...]] = []
        self.runs: dict[str, RunInfo] = {}
        self.requests: list[tuple[str, str, str, str]] = []
        self.counts: dict[str, int] = {}
        self.firsts: dict[str, float] = {}
        self.ends: dict[str, tuple[Any, ...]] = {}
        self.prompts: dict[str, int] = {}
        self.delivered: list[tuple[int, str]] = []
        self.waiting: list[threading.Event] = []
        self.stop = False

    def __bool__(self) -> bool:
        return bool(self.signals or self.runs or self.requests)

    def add(self, item: object) -> None:
        """Take one queued item into the batch."""
        if type(item) is Signal:
            self._signal(item)
        elif type(item) is Delivery:
            self._signal(item.signal)
            self.delivered.append((item.signal.seq, item.message_id))
        elif isinstance(item, RunInfo):
            self.runs[item.run_id] = item
        elif isinstance(item, Request):
            fingerprint = pydantic_core.to_json(item.fingerprint, fallback=json_fallback)
            agent = str(item.fingerprint.get("agent"))
            self.requests.append((item.run_id, item.request_hash, agent, fingerprint.decode()))
        elif isinstance(item, threading.Event):
            self.waiting.append(item)
        elif item is STOP:
            self.stop = True
        else:
            raise TypeError(f"The signal store's writer cannot write {item!r}.")

    def _signal(self, signal: Signal) -> None:
        run_id = signal.run_id or "unbound"
        payload = signal.payload
        self.signals.append(
            (
                run_id,
                signal.seq,
                signal.id,
                signal.name,
                None
                if payload is None
                else pydantic_core.to_json(payload, fallback=json_fallback).decode(),
                signal.timestamp,
                signal.source,
                signal.caused_by,
                signal.depth,
            )
        )
        counts = self.counts
        if run_id in counts:
            counts[run_id] += 1
        else:
            counts[run_id] = 1
            self.firsts[run_id] = signal.timestamp
        if signal.name == SESSION_PROMPT:
            self.prompts[run_id] = self.prompts.get(run_id, 0) + 1
        elif signal.name in (SESSION_REPLY, SESSION_TIMEOUT):
            self.prompts[run_id] = self.prompts.get(run_id, 0) - 1
        if signal.name == HARNESS_END and isinstance(payload, dict):
            failures = payload.get("failures")
            self.ends[run_id] = (
                signal.timestamp,
                payload.get("status"),
                payload.get("reason"),
                failures if isinstance(failures, int) else 0,
            )


def write_loop(
    pool: ConnectionPool[Any],
    items: queue.SimpleQueue[object],
    batch_size: int,
    retry_for: float,
    owner: weakref.ref[WriteOwner],
) -> None:
    """Drain the queue in batches until :data:`STOP`; each batch is one transaction.

    After a write fails for good, later items are not written (a recording stays a
    prefix of its run, never a log with a hole in it), but flushes are still released.
    """
    failed = False
    while True:
        batch = Batch()
        problem: Exception | None = None
        for item in _take(items, batch_size):
            try:
                batch.add(item)
            except Exception as exc:  # a payload that cannot be serialized
                problem = problem or exc
        if not failed and problem is None and batch:
            try:
                write_with_retry(pool, batch, retry_for)
            except Exception as exc:
                problem = exc
        if not failed and problem is not None:
            failed = True
            store = owner()
            if store is not None:
                store._failed(problem)
        for done in batch.waiting:
            done.set()
        if batch.stop:
            return


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
    Anything else (a table dropped, a permission revoked) fails at once.
    """
    deadline = time.monotonic() + retry_for
    delay = _BACKOFF_FIRST
    while True:
        try:
            with pool.connection(timeout=max(0.1, deadline - time.monotonic())) as conn:
                write(conn, batch)
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
        # Rows of reactor_runs are always taken in run id order, so two processes
        # writing batches that touch the same runs cannot deadlock.
        if batch.runs:
            infos = sorted(batch.runs.values(), key=lambda info: info.run_id)
            cur.executemany(
                "INSERT INTO reactor_runs (run_id, graph, target, target_hash, started_at, "
                "parent_run_id) VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (run_id) DO UPDATE "
                "SET graph = EXCLUDED.graph, target = EXCLUDED.target, "
                "target_hash = EXCLUDED.target_hash, parent_run_id = EXCLUDED.parent_run_id",
                [
                    (
                        i.run_id,
                        i.graph,
                        i.target,
                        i.target_hash,
                        i.started_at or time.time(),
                        i.parent_run_id,
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
        counts = batch.counts
        if batch.signals:
            cur.executemany(
                "INSERT INTO reactor_runs (run_id, started_at) VALUES (%s, %s) "
                "ON CONFLICT (run_id) DO NOTHING",
                sorted(batch.firsts.items()),
            )
            counts = _copy_signals(cur, batch, duplicates=duplicates)
            cur.executemany(
                "UPDATE reactor_runs SET signals = signals + %s WHERE run_id = %s",
                [(count, run_id) for run_id, count in sorted(counts.items()) if count],
            )
        if batch.prompts:
            cur.executemany(
                "UPDATE reactor_runs SET prompts = GREATEST(0, prompts + %s) WHERE run_id = %s",
                [(count, run_id) for run_id, count in sorted(batch.prompts.items())],
            )
        if batch.delivered:
            cur.executemany(
                "UPDATE reactor_inbox SET delivered_seq = %s "
                "WHERE message_id = %s AND delivered_seq IS NULL",
                batch.delivered,
            )
        if batch.ends:
            cur.executemany(
                "UPDATE reactor_runs SET ended_at = %s, status = %s, reason = %s, "
                "failures = %s WHERE run_id = %s",
                [(*end, run_id) for run_id, end in sorted(batch.ends.items())],
            )
        if batch.requests:
            cur.executemany(
                "INSERT INTO reactor_requests (run_id, request_hash, agent, fingerprint) "
                "VALUES (%s, %s, %s, %s) ON CONFLICT (run_id, request_hash) DO UPDATE SET "
                "agent = EXCLUDED.agent, fingerprint = EXCLUDED.fingerprint",
                batch.requests,
            )


def _copy_signals(cur: psycopg.Cursor[Any], batch: Batch, *, duplicates: bool) -> dict[str, int]:
    if not duplicates:
        with cur.copy(f"COPY reactor_signals ({_COLUMNS}) FROM STDIN") as copy:
            write_row = copy.write_row
            for row in batch.signals:
                write_row(row)
        return batch.counts
    cur.execute("CREATE TEMPORARY TABLE reactor_incoming (LIKE reactor_signals) ON COMMIT DROP")
    with cur.copy(f"COPY reactor_incoming ({_COLUMNS}) FROM STDIN") as copy:
        for row in batch.signals:
            copy.write_row(row)
    cur.execute(
        f"INSERT INTO reactor_signals ({_COLUMNS}) SELECT {_COLUMNS} FROM reactor_incoming "
        "ON CONFLICT (run_id, seq) DO NOTHING RETURNING run_id"
    )
    counts: dict[str, int] = {}
    for (run_id,) in cur.fetchall():
        counts[run_id] = counts.get(run_id, 0) + 1
    return counts
