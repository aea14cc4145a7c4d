"""The writer thread of a SQL signal store: batches, one transaction each, retried.

The store's ``append`` puts items on a bounded queue; this thread takes up to
``batch_size`` of them at a time, gathers them into a :class:`Batch` and writes the
batch as one transaction. A write that fails for a reason that passes (SQLite: the
database locked by another process; PostgreSQL: the server unreachable, a deadlock)
is kept and written again after a growing pause, for up to the dialect's
``retry_for`` seconds: the runs' signals wait in memory, the queue fills, and the runs
wait too (backpressure), so nothing is dropped and memory stays bounded.

A write that still fails fails the runs of that batch, not the store:
:class:`WriteFailures` marks them (nothing more of theirs is written, and what is not
written is counted), and the next batch is tried afresh on a fresh connection, so the
store records again as soon as the cause is gone. A batch that fails for what it holds
(a value the database refuses) is written again run by run, one transaction each, so
that only the run whose entry cannot be written fails.

Rows of ``runs`` are always written in run id order, so that two processes writing
batches that touch the same runs cannot deadlock. Each run's signals are hash-chained
as they are written (``reactor._recording.chain``): a batch's transaction reads the
head of each run the writer does not know yet, and the heads move on once it commits.
"""

from __future__ import annotations

import dataclasses
import queue
import threading
import time
import weakref
from collections.abc import Callable, Collection
from typing import Any, Protocol

import pydantic_core

from reactor._backends.dialect import Dialect
from reactor._backends.tally import Tally
from reactor._recording.chain import Heads
from reactor._recording.info import RunInfo
from reactor._recording.writes import Backlog, WriteFailures
from reactor._signals.diagnostics import log
from reactor._signals.signal import Signal, json_fallback

__all__ = ["SIGNAL_COLUMNS", "STOP", "Batch", "Delivery", "Fence", "Request", "write_loop"]

Fence = Callable[[Any, set[str]], Collection[str]]
"""Called in each write's transaction (with its cursor) with the runs it writes; the runs
it must not write (their writer lost its right to: a worker whose lease was taken over)."""

STOP = object()
"""Put on the queue to stop the writer after what is queued before it."""

SIGNAL_COLUMNS = "run_id, seq, id, name, payload, timestamp, source, caused_by, depth, hash"
"""The columns of a signal row the writer makes."""

_PAUSE_FIRST = 0.05
_PAUSE_MOST = 2.0
_CLOSING_WAIT = 10.0
"""Seconds a closing store's writer still retries before it gives up on a batch."""


class WriteOwner(Protocol):
    """What the writer thread asks of the store that owns it."""

    closing: bool
    fence: Fence | None


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
        signals: Signal rows (:data:`SIGNAL_COLUMNS`), in the order they were appended.
        runs: Run registrations by run id (the latest wins).
        requests: Request rows.
        tally: What the signals add to each run's row (counters, end, state, timers).
        delivered: Posted messages the batch delivers: (seq, message id, run id).
        waiting: Flushes to release once the batch is written (or has failed).
        stop: Whether :data:`STOP` was taken.
        touched: The runs registered or with requests in the batch.
        fence: The store's fence, asked in the transaction (``None``: none).
        linked: The heads of the runs' chains once the batch is written.
    """

    def __init__(self, failures: WriteFailures, fence: Fence | None = None) -> None:
        self.failures, self.fence = failures, fence
        self.touched: set[str] = set()
        self.signals: list[list[Any]] = []
        self.runs: dict[str, RunInfo] = {}
        self.requests: list[tuple[str, str, str, str]] = []
        self.tally = Tally()
        self.delivered: list[tuple[int, str, str]] = []
        self.waiting: list[threading.Event] = []
        self.stop = False
        self.linked: dict[str, tuple[int, str | None]] = {}

    def __bool__(self) -> bool:
        return bool(self.signals or self.runs or self.requests)

    def take(self, items: list[object]) -> None:
        """Take the queued items into the batch."""
        failures, tally = self.failures, self.tally
        # One pass with everything in locals: this loop is the writer's hot path, and
        # every signal a run emits goes through it (contending for the GIL with the run).
        marked = failures.failed  # empty unless a write failed: one truth test
        append, count, to_json = self.signals.append, tally.add, pydantic_core.to_json
        for entry in items:
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
                data = None if payload is None else to_json(payload, fallback=json_fallback)
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
                    None if data is None else data.decode(),
                    item.timestamp,
                    item.source,
                    item.caused_by,
                    item.depth,
                    None,  # its hash, set when the batch is linked
                ]
            )
            count(item, run_id)

    def _other(self, item: object) -> None:
        """A run registered, a request kept (unless its run failed), a flush, the stop."""
        lost = self.failures.lost
        if isinstance(item, RunInfo):
            if not lost(item.run_id):
                self.runs[item.run_id] = item
                self.touched.add(item.run_id)
        elif type(item) is Request:
            if not lost(item.run_id):
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
        one = Batch(self.failures, self.fence)
        one.touched = self.touched & {run_id}
        one.signals = [row for row in self.signals if row[0] == run_id]
        if run_id in self.runs:
            one.runs[run_id] = self.runs[run_id]
        one.requests = [row for row in self.requests if row[0] == run_id]
        one.tally = self.tally.only(run_id)
        one.delivered = [row for row in self.delivered if row[2] == run_id]
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


def write_loop(
    dialect: Dialect,
    backlog: Backlog,
    batch_size: int,
    owner: weakref.ref[WriteOwner],
    failures: WriteFailures,
    heads: Heads,
) -> None:
    """Drain the backlog in batches until :data:`STOP`; each batch is one transaction.

    A batch that fails for good fails its runs (see :class:`WriteFailures`); later
    batches are written as usual, and flushes are always released. Runs waiting for
    room are let go as the backlog goes down, and all of them when the writer stops.
    ``heads``: the chains the writer links.
    """
    writing = _Writing(dialect, owner, failures, heads)
    items = backlog.queue
    try:
        while True:
            taken = [items.get()]
            while len(taken) < batch_size:
                try:
                    taken.append(items.get_nowait())
                except queue.Empty:
                    break
            store = owner()
            batch = Batch(failures, None if store is None else store.fence)
            del store
            batch.take(taken)
            backlog.taken(len(taken))
            if batch:
                writing.batch(batch)
            backlog.written()
            for done in batch.waiting:
                done.set()
            if batch.stop:
                return
    finally:
        backlog.release()


class _Writing:
    """How the writer thread writes a batch: in one transaction, else run by run."""

    def __init__(
        self,
        dialect: Dialect,
        owner: weakref.ref[WriteOwner],
        failures: WriteFailures,
        heads: Heads,
    ) -> None:
        self.dialect, self.owner, self.failures, self.heads = dialect, owner, failures, heads

    def batch(self, batch: Batch) -> None:
        """Write ``batch``, else each of its runs apart when it holds what cannot be written."""
        error = self._until_done(batch)
        if error is None:
            self.failures.wrote()
            return
        runs = sorted(batch.per_run())
        if not self.dialect.refused(error) or len(runs) < 2:
            self.failures.lose(batch.per_run(), error)
            return
        for run_id in runs:
            one = batch.only(run_id)
            error = self._until_done(one)
            if error is not None:
                self.failures.lose(one.per_run(), error, store=not self.dialect.refused(error))

    def _until_done(self, batch: Batch) -> BaseException | None:
        """Write ``batch`` in one transaction, retried while the failure may pass.

        Returns the error that stopped the write (``None``: written).
        """
        dialect = self.dialect
        pause, waited, warned = _PAUSE_FIRST, 0.0, False
        while True:
            try:
                wait = min(1.0, max(0.1, dialect.retry_for - waited))
                with dialect.connection(wait=wait, writing=True) as conn:
                    _write(dialect, conn, batch, self.heads)
            except Exception as exc:
                why = dialect.transient(exc)
                store = self.owner()
                closing = store is None or (store.closing and waited > _CLOSING_WAIT)
                del store
                if why is None or closing or waited >= dialect.retry_for:
                    return exc
                if not warned:
                    warned = True
                    log(
                        "reactor.recording",
                        "warning",
                        f"{why}; keeping the signals and retrying",
                        store=dialect.shown,
                        error=str(exc),
                    )
                time.sleep(min(pause, max(0.0, dialect.retry_for - waited)))
                waited += pause
                pause = min(pause * 2, _PAUSE_MOST)
            else:
                self.heads.keep(batch.linked)
                if warned:
                    log("reactor.recording", "warning", "recording resumed", store=dialect.shown)
                return None


def _write(dialect: Dialect, conn: Any, batch: Batch, heads: Heads) -> None:
    """Write ``batch`` in one transaction (again, skipping signals already there)."""
    try:
        with dialect.transaction(conn) as cur:
            _write_rows(dialect, cur, batch, heads, again=False)
    except dialect.duplicate:
        with dialect.transaction(conn) as cur:
            _write_rows(dialect, cur, batch, heads, again=True)


def _write_rows(dialect: Dialect, cur: Any, batch: Batch, heads: Heads, *, again: bool) -> None:
    sql = dialect.sql
    if batch.fence is not None and (runs := batch.touched | batch.tally.counts.keys()):
        refused = batch.fence(cur, runs)
        if refused:
            batch.drop(set(refused))
    if batch.runs:
        _write_runs(dialect, cur, sorted(batch.runs.values(), key=_run_id))
    tally = batch.tally
    if batch.signals:
        cur.executemany(
            sql("INSERT INTO {runs} (run_id, started_at) VALUES (?, ?) ON CONFLICT DO NOTHING"),
            sorted(tally.firsts.items()),
        )
        batch.linked = heads.link(batch.signals, lambda ids: _heads(dialect, cur, ids))
        counts = dialect.insert_signals(cur, batch.signals, again=again)
        if counts is None:
            counts = tally.counts
        cur.executemany(
            sql(
                "UPDATE {runs} SET signals = signals + ?, last_seq = {greatest}(last_seq, ?) "
                "WHERE run_id = ?"
            ),
            [(n, tally.last[run_id], run_id) for run_id, n in sorted(counts.items()) if n],
        )
    _write_tally(dialect, cur, tally)
    if batch.delivered:
        cur.executemany(
            sql(
                "UPDATE {inbox} SET delivered_seq = ? WHERE message_id = ? "
                "AND delivered_seq IS NULL"
            ),
            [(seq, message_id) for seq, message_id, _ in batch.delivered],
        )
    if batch.requests:
        cur.executemany(
            sql(
                "INSERT INTO {requests} (run_id, request_hash, agent, fingerprint) "
                "VALUES (?, ?, ?, {json_mark}) ON CONFLICT (run_id, request_hash) DO UPDATE "
                "SET agent = excluded.agent, fingerprint = excluded.fingerprint"
            ),
            batch.requests,
        )


def _run_id(info: RunInfo) -> str:
    return info.run_id


def _write_runs(dialect: Dialect, cur: Any, infos: list[RunInfo]) -> None:
    """Register runs (and their tags); a run registered again keeps the fork it began with."""
    cur.executemany(
        dialect.sql(
            "INSERT INTO {runs} (run_id, graph, target, target_hash, started_at, "
            "parent_run_id, forked_from) VALUES (?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (run_id) DO UPDATE SET graph = excluded.graph, "
            "target = excluded.target, target_hash = excluded.target_hash, "
            "parent_run_id = excluded.parent_run_id, "
            "forked_from = COALESCE(excluded.forked_from, {runs}.forked_from)"
        ),
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
        cur.executemany(dialect.sql(SET_TAG), tags)


SET_TAG = (
    "INSERT INTO {run_tags} (run_id, key, value) VALUES (?, ?, ?) "
    "ON CONFLICT (run_id, key) DO UPDATE SET value = excluded.value"
)
"""Set one tag of a run."""


def _write_tally(dialect: Dialect, cur: Any, tally: Tally) -> None:
    """What the batch's signals add to their runs' rows (in run id order: no deadlock)."""
    sql = dialect.sql
    if tally.prompts:
        cur.executemany(
            sql("UPDATE {runs} SET prompts = {greatest}(0, prompts + ?) WHERE run_id = ?"),
            [(count, run_id) for run_id, count in sorted(tally.prompts.items())],
        )
    if tally.spent:
        cur.executemany(
            sql(
                "UPDATE {runs} SET input_tokens = input_tokens + ?, "
                "output_tokens = output_tokens + ?, cost_usd = cost_usd + ? WHERE run_id = ?"
            ),
            [(*spent, run_id) for run_id, spent in sorted(tally.spent.items())],
        )
    if tally.started or tally.changes:
        stateful = sorted(tally.stateful())
        current: dict[str, str | None] = {}
        if stateful:
            query = "SELECT run_id, {} FROM {{runs}} WHERE {} ORDER BY run_id{{for_update}}"
            query = query.format(dialect.column("state"), dialect.member("run_id"))
            current = dict(cur.execute(sql(query), (dialect.array(stateful),)).fetchall())
        states = sorted(tally.states(current), key=_run_of)
        cur.executemany(sql("UPDATE {runs} SET state = {json_mark} WHERE run_id = ?"), states)
    if tally.ends:
        cur.executemany(
            sql(
                "UPDATE {runs} SET ended_at = ?, status = ?, reason = ?, failures = ? "
                "WHERE run_id = ?"
            ),
            [(*end, run_id) for run_id, end in sorted(tally.ends.items())],
        )
    timers = tally.timers
    if timers:
        cur.executemany(
            sql(
                "INSERT INTO {timers} (run_id, timer_id, agent, due_at) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (run_id, timer_id) DO UPDATE SET agent = excluded.agent, "
                "due_at = excluded.due_at"
            ),
            timers.set,
        )
        cur.executemany(sql("DELETE FROM {timers} WHERE run_id = ? AND timer_id = ?"), timers.fired)
        cur.executemany(sql("DELETE FROM {timers} WHERE run_id = ?"), timers.ended)


def _run_of(row: tuple[str | None, str]) -> str:
    return row[1]


def _heads(dialect: Dialect, cur: Any, run_ids: list[str]) -> dict[str, tuple[int, str | None]]:
    """The last stored (seq, hash) of each of these runs that has signals."""
    rows = cur.execute(
        dialect.sql(
            "SELECT h.run_id, s.seq, s.hash FROM (SELECT ids.value AS run_id, (SELECT MAX(m.seq) "
            "FROM {signals} m WHERE m.run_id = ids.value) AS seq FROM {each}) h "
            "JOIN {signals} s ON s.run_id = h.run_id AND s.seq = h.seq"
        ),
        (dialect.array(run_ids),),
    ).fetchall()
    return {run_id: (seq, digest) for run_id, seq, digest in rows}
