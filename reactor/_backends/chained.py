"""The hash chains of the SQL signal stores: checking a snapshot's link, verifying runs.

Each run's signals are chained in ``seq`` order as the writer threads write them (the
link and its format: ``reactor._recording.chain``; the ``hash`` column of the signals
table holds each one). What both stores then read of the chains is here, in SQL both
speak: each store passes its :class:`ChainSQL` (tables and placeholder) and a function
that runs one statement and returns its rows. Runs are verified a page at a time, so
that a run of millions of signals is never read whole.
"""

from __future__ import annotations

import contextlib
import dataclasses
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from reactor._backends.sqlite_db import connect_readonly
from reactor._recording.chain import Break, Report, Walk, signal_entry
from reactor._recording.seals import HASH
from reactor._signals.signal import Signal
from reactor.exceptions import RecordingError, RunNotFoundError

__all__ = ["PAGE", "ChainSQL", "Fetch", "seal_problem", "tables_of", "verify_runs", "verify_store"]

PAGE = 1_000
"""Signals (and runs) read at a time when verifying."""

Fetch = Callable[[str, Sequence[Any]], Sequence[Sequence[Any]]]
"""Runs one statement with its parameters; returns its rows."""


@dataclasses.dataclass(frozen=True)
class ChainSQL:
    """Where a store keeps its chains, in its SQL.

    Attributes:
        signals: The signals table.
        runs: The runs table.
        since: The one-row table of when the store began to chain (``since``, UNIX s).
        mark: The driver's placeholder (``?``, ``%s``).
        payload: The payload column read as text.
    """

    signals: str
    runs: str
    since: str
    mark: str
    payload: str

    @property
    def columns(self) -> str:
        """A signal's row as :func:`~reactor._recording.chain.signal_entry` takes it, and hash."""
        return f"run_id, seq, id, name, {self.payload}, timestamp, source, caused_by, depth, hash"

    def rows(self, after: bool) -> str:
        """A page of a run's rows, after a seq (``after``) or up to one, backwards."""
        mark = self.mark
        where, order = ("seq > ", "") if after else ("seq < ", " DESC")
        return (
            f"SELECT {self.columns} FROM {self.signals} WHERE run_id = {mark} AND "
            f"{where}{mark} ORDER BY seq{order} LIMIT {mark}"
        )


_HASH = 9
"""Where a row (:attr:`ChainSQL.columns`) has its hash."""


def seal_problem(fetch: Fetch, sql: ChainSQL, key: bytes | None, snapshot: Signal) -> str | None:
    """What is wrong with a snapshot's link in its run's chain, or ``None``.

    A snapshot stored in a chained log must carry its seal (its payload's ``hash``),
    and its entry must link from the signal before it, and the one after it from it:
    so a snapshot edited in the database is refused, whether its seal was deleted or
    recomputed, and (with ``REACTOR_AUDIT_KEY``) even when its own hash was recomputed
    too. A snapshot stored without a hash, after signals stored without one, was written
    before the log was chained: only its seal is checked (``reactor._recording.seals``).
    """
    run_id, seq = snapshot.run_id or "", snapshot.seq
    before = fetch(sql.rows(after=False), (run_id, seq, 1))
    rows = fetch(sql.rows(after=True), (run_id, seq - 1, 2))
    if not rows or rows[0][1] != seq:
        return None  # gone meanwhile: nothing to trust it with
    previous = before[0][_HASH] if before else None
    if rows[0][_HASH] is None:
        if previous is not None:
            return "it has no hash in its run's chain, though the signal before it has one"
        return None
    if not isinstance(snapshot.payload, dict) or HASH not in snapshot.payload:
        return "it has no seal (its hash key), though its run's log is chained"
    walk = Walk(key, since=None)
    walk.previous = previous
    for row in rows:
        problem = walk.step(row[_HASH], signal_entry(row[:_HASH]), None)
        if problem is not None:
            which = "its entry" if row[1] == seq else "the signal after it"
            return f"{which} fails its link in the run's chain ({problem})"
    return None


def verify_runs(
    fetch: Fetch, sql: ChainSQL, report: Report, key: bytes | None, run_id: str | None = None
) -> None:
    """Verify the chain of each run (or of ``run_id``) into ``report``; stop at a break.

    Raises:
        RunNotFoundError: ``run_id`` is not in the store.
    """
    found = fetch(f"SELECT since FROM {sql.since}", ())
    if not found:
        report.broken = Break(
            sql.since,
            None,
            None,
            None,
            "the record of when the store began to chain its signals was removed, so a "
            "signal without a hash cannot be told from one whose hash was removed",
        )
        return
    since = float(found[0][0])
    checked = report.table("signals")
    for run, last_seq in _runs(fetch, sql, run_id):
        walk = Walk(key, since)
        report.broken = _verify_run(fetch, sql, run, last_seq, walk)
        if report.broken is not None:
            return
        checked.add(walk)


def _runs(fetch: Fetch, sql: ChainSQL, run_id: str | None) -> Iterator[tuple[str, int]]:
    """The runs to verify, with the last seq each one's row says it reached."""
    mark = sql.mark
    if run_id is not None:
        rows = fetch(f"SELECT run_id, last_seq FROM {sql.runs} WHERE run_id = {mark}", (run_id,))
        if not rows:
            raise RunNotFoundError(f"No run {run_id!r} in this database (see `reactor runs`).")
        yield str(rows[0][0]), int(rows[0][1])
        return
    after = ""
    while True:
        page = fetch(
            f"SELECT run_id, last_seq FROM {sql.runs} WHERE run_id > {mark} "
            f"ORDER BY run_id LIMIT {mark}",
            (after, PAGE),
        )
        for run, last_seq in page:
            yield str(run), int(last_seq)
        if len(page) < PAGE:
            return
        after = str(page[-1][0])


def _verify_run(
    fetch: Fetch, sql: ChainSQL, run_id: str, last_seq: int, walk: Walk
) -> Break | None:
    """The first break of one run's chain, read a page at a time."""
    seq = 0
    query = sql.rows(after=True)
    while True:
        page = fetch(query, (run_id, seq, PAGE))
        for row in page:
            entry = signal_entry(row[:_HASH])
            problem = walk.step(row[_HASH], entry, float(row[5]))
            if problem is not None:
                return Break(sql.signals, row[2], row[1], run_id, problem)
            seq = row[1]
        if len(page) < PAGE:
            break
    if last_seq > seq:
        return Break(
            sql.signals,
            None,
            last_seq,
            run_id,
            f"the run's row says its log reaches seq {last_seq}, but the log ends at seq "
            f"{seq}: its newest signals were removed",
        )
    return None


SQLITE = ChainSQL("signals", "runs", "audit_chain", "?", "payload")
"""Where a SQLite store keeps its runs' hash chains."""
POSTGRES = ChainSQL("reactor_signals", "reactor_runs", "reactor_audit_chain", "%s", "payload::text")
"""Where a PostgreSQL store keeps its runs' hash chains."""


def tables_of(where: Path | str) -> set[str]:
    """The tables of a database (a SQLite file, a PostgreSQL URL), read without a change.

    Raises:
        RecordingError: There is no such file, or the database cannot be reached.
    """
    if isinstance(where, str):
        from reactor._backends.postgres_db import connect

        with connect(where) as conn:
            rows = conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"
            ).fetchall()
        return {str(row[0]) for row in rows}
    if not where.is_file():
        raise RecordingError(f"There is no database at {where}; check the path.")
    with contextlib.closing(
        sqlite3.connect(f"{where.resolve().as_uri()}?mode=ro", uri=True)
    ) as conn:
        try:
            rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
        except sqlite3.DatabaseError as exc:
            raise RecordingError(f"{where} is not a database reactor wrote ({exc}).") from exc
    return {str(row[0]) for row in rows}


def verify_store(
    where: Path | str, report: Report, key: bytes | None, run_id: str | None = None
) -> None:
    """Verify the runs of the signal store at ``where`` into ``report``, reading only.

    Raises:
        RecordingError: It is not a signal store, or one of an older schema (open it
            once with this reactor to upgrade it), or it cannot be read.
        RunNotFoundError: ``run_id`` is not in it.
    """
    if isinstance(where, str):
        _verify_postgres(where, report, key, run_id)
        return
    conn = connect_readonly(where)
    try:
        verify_runs(_fetch(conn), SQLITE, report, key, run_id)
    except sqlite3.DatabaseError as exc:
        raise RecordingError(f"{where} cannot be read ({exc}).") from exc
    finally:
        conn.close()


def _fetch(conn: Any) -> Fetch:
    def fetch(sql: str, params: Sequence[Any]) -> Sequence[Sequence[Any]]:
        rows: Sequence[Sequence[Any]] = conn.execute(sql, tuple(params)).fetchall()
        return rows

    return fetch


def _verify_postgres(dsn: str, report: Report, key: bytes | None, run_id: str | None) -> None:
    import psycopg

    from reactor._backends.dialect import SCHEMA_VERSION, describe
    from reactor._backends.postgres_db import connect, shown

    with connect(dsn) as conn:
        try:
            version = 0
            found = conn.execute("SELECT to_regclass('reactor_schema')").fetchone()
            if found is not None and found[0] is not None:
                row = conn.execute("SELECT max(version) FROM reactor_schema").fetchone()
                version = int(row[0]) if row is not None and row[0] is not None else 0
            if version < SCHEMA_VERSION:
                raise RecordingError(
                    f"The reactor tables in {shown(dsn)} are of schema {version}, older than "
                    f"this reactor's {SCHEMA_VERSION}; open a PostgresSignalStore on them once "
                    "(or record a run there) to upgrade them, then verify."
                )
            verify_runs(_fetch(conn), POSTGRES, report, key, run_id)
        except psycopg.Error as exc:
            raise RecordingError(f"Reading {shown(dsn)} failed ({describe(exc)}).") from exc
