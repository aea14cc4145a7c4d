"""Reading a SQLite signal store: a small pool of connections, and the queries of the contract.

Readers never take a lock the writer needs: every statement runs in autocommit and is
read to its end at once, so no read transaction stays open (and in WAL mode readers
and the writer do not block each other). Each reading thread takes a connection of
the pool for the time of one call, so reads from several threads run side by side.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import threading
from collections.abc import Collection, Iterable, Iterator
from pathlib import Path
from typing import Any

from reactor._backends.chained import SQLITE, seal_problem
from reactor._backends.paging import PageQuery, read_page
from reactor._backends.sqlite_db import (
    ASKING_INDEX,
    INFO,
    connect,
    connect_readonly,
    decode_info,
    decode_signal,
    migrate,
)
from reactor._recording.chain import verifying_key
from reactor._recording.info import RunInfo
from reactor._recording.log import needed_seqs
from reactor._recording.recording import Recording
from reactor._signals.names import HARNESS_SNAPSHOT
from reactor._signals.patterns import Pattern
from reactor._signals.signal import Signal
from reactor.exceptions import RecordingError, RunNotFoundError

__all__ = ["Connections", "Reads"]

_COLUMNS = "seq, id, name, payload, timestamp, source, caused_by, depth"
_PAGES = PageQuery("signals", _COLUMNS, "?", ASKING_INDEX)
_IDLE = 4
"""Connections the pool keeps open when nobody uses them."""


class Connections:
    """The store's connections outside its writer thread (reads, posts, deletes), pooled.

    Args:
        path: The database file.
        timeout: SQLite's busy wait, in seconds.
        readonly: Open the file read-only (it must exist; nothing is migrated).

    Raises:
        RecordingError: The file is not a reactor database (or, read-only, is missing
            or of another schema).
    """

    def __init__(self, path: Path, timeout: float, *, readonly: bool) -> None:
        self.path, self.timeout, self.readonly = path, timeout, readonly
        self._idle: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._closed = False
        first = self._open()
        if not readonly:
            try:
                migrate(first, path)
            except BaseException:
                first.close()
                raise
        self._idle.append(first)

    def _open(self) -> sqlite3.Connection:
        if self.readonly:
            return connect_readonly(self.path)
        return connect(self.path, self.timeout)

    @contextlib.contextmanager
    def connection(self) -> Iterator[sqlite3.Connection]:
        """A connection of the pool for this thread, for the time of the block."""
        with self._lock:
            if self._closed:
                raise RecordingError(f"The signal store {self.path} is closed.")
            conn = self._idle.pop() if self._idle else None
        if conn is None:
            conn = self._open()
        try:
            yield conn
        finally:
            if conn.in_transaction:  # a failed statement inside BEGIN ... COMMIT
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
            with self._lock:
                keep = not self._closed and len(self._idle) < _IDLE
                if keep:
                    self._idle.append(conn)
            if not keep:
                conn.close()

    def query(self, sql: str, params: Iterable[Any] = ()) -> list[Any]:
        """Rows of one statement, read whole.

        Raises:
            RecordingError: The database cannot be read.
        """
        with self.connection() as conn:
            try:
                return conn.execute(sql, tuple(params)).fetchall()
            except sqlite3.DatabaseError as exc:
                raise RecordingError(f"{self.path} cannot be read ({exc}).") from exc

    def close(self) -> None:
        """Close the idle connections; those in use close when they come back."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()


class Reads:
    """The queries of a SQLite signal store's reading half, on its :class:`Connections`."""

    def __init__(self, connections: Connections, shown: str) -> None:
        self.connections = connections
        self.query = connections.query
        self.shown = shown

    def infos(self, clause: str, params: Iterable[Any]) -> list[RunInfo]:
        """The runs ``clause`` (on ``runs r``) selects."""
        return [decode_info(tuple(row)) for row in self.query(INFO + clause, params)]

    def info(self, run_id: str) -> RunInfo:
        """One run's row.

        Raises:
            RunNotFoundError: No such run.
        """
        found = self.infos("WHERE r.run_id = ?", (run_id,))
        if not found:
            raise RunNotFoundError(f"No run {run_id!r} in {self.shown} (see `reactor runs`).")
        return found[0]

    def page(
        self,
        run_id: str,
        *,
        after: int,
        before: int | None,
        limit: int,
        names: Collection[Pattern] | None,
    ) -> list[Signal]:
        """One page of the run's log (see :meth:`reactor.SignalStoreBase.signals`).

        Raises:
            RunNotFoundError: No such run.
        """
        rows = read_page(
            _PAGES, self.query, run_id, after=after, before=before, limit=limit, names=names
        )
        if not rows:
            self.info(run_id)  # an empty page of a run, or no run at all
        return [decode_signal(run_id, tuple(row)) for row in rows]

    def state(self, run_id: str) -> dict[str, Any] | None:
        """The state kept in the run's row (``None``: not kept, a run recorded before).

        Raises:
            RunNotFoundError: No such run.
        """
        rows = self.query("SELECT state FROM runs WHERE run_id = ?", (run_id,))
        if not rows:
            raise RunNotFoundError(f"No run {run_id!r} in {self.shown} (see `reactor runs`).")
        if rows[0][0] is None:
            return None
        try:
            state = json.loads(rows[0][0])
        except ValueError as exc:
            raise RecordingError(
                f"The state of run {run_id!r} in {self.shown} is damaged ({exc}); it is "
                "kept again as the run goes on."
            ) from exc
        return state if isinstance(state, dict) else None

    def seal(self, snapshot: Signal) -> str | None:
        """What is wrong with a snapshot's link in its run's chain (see ``_backends.chained``)."""
        return seal_problem(self.query, SQLITE, verifying_key(), snapshot)

    def load(self, run_id: str, *, tail: bool = False) -> Recording:
        """The whole run, or (``tail``) the run from its latest snapshot on.

        Raises:
            RunNotFoundError: No such run.
        """
        after, needs = 0, []
        if tail:
            found = self.query(
                "SELECT json_extract(payload, '$.seq'), json_extract(payload, '$.needs') "
                f"FROM signals WHERE run_id = ? AND name = '{HARNESS_SNAPSHOT}' "
                "ORDER BY seq DESC LIMIT 1",
                (run_id,),
            )
            if found and isinstance(found[0][0], int):
                after = found[0][0]
                needs = needed_seqs(json.loads(found[0][1])) if found[0][1] else []
        rows = self.query(
            f"SELECT {_COLUMNS} FROM signals WHERE run_id = ? AND seq > ? ORDER BY seq",
            (run_id, after),
        )
        if needs:
            rows[:0] = self.query(
                f"SELECT {_COLUMNS} FROM signals WHERE run_id = ? AND seq IN "
                "(SELECT value FROM json_each(?)) ORDER BY seq",
                (run_id, json.dumps(needs)),
            )
        info = self.infos("WHERE r.run_id = ?", (run_id,))
        if not rows and not info:
            raise RunNotFoundError(f"No run {run_id!r} in {self.shown} (see `reactor runs`).")
        signals = tuple(decode_signal(run_id, row) for row in rows)
        requests: dict[str, Any] = {}
        for digest, fingerprint in self.query(
            "SELECT request_hash, fingerprint FROM requests WHERE run_id = ?", (run_id,)
        ):
            try:
                requests[str(digest)] = json.loads(fingerprint)
            except (TypeError, ValueError) as exc:
                raise RecordingError(
                    f"The recording of {run_id!r} is damaged: the request {digest!r} is not "
                    "JSON. Record the run again, or delete it."
                ) from exc
        return Recording(
            info=info[0] if info else RunInfo(run_id=run_id), signals=signals, requests=requests
        )
