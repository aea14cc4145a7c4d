"""Reading a PostgreSQL signal store: the queries of the contract, on the store's pool.

Each read takes a connection of the pool (autocommit) for one statement, with a short
wait: while the database is away a read fails in seconds (a ``RecordingError`` naming
it), not after a pool's 30 s.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Any

import psycopg
import pydantic_core
from psycopg_pool import ConnectionPool

from reactor._backends.chained import POSTGRES, seal_problem
from reactor._backends.paging import PageQuery, read_page
from reactor._backends.postgres_db import (
    ASKING_INDEX,
    INFO,
    Damaged,
    describe,
    info_of,
    requests_of,
    signals_of,
)
from reactor._recording.chain import verifying_key
from reactor._recording.info import RunInfo
from reactor._recording.log import needed_seqs
from reactor._recording.recording import Recording
from reactor._signals.names import HARNESS_SNAPSHOT
from reactor._signals.patterns import Pattern
from reactor._signals.signal import Signal
from reactor.exceptions import RecordingError, RunNotFoundError

__all__ = ["Reads"]

_COLUMNS = "seq, id, name, payload::text, timestamp, source, caused_by, depth"
_PAGES = PageQuery("reactor_signals", _COLUMNS, "%s", ASKING_INDEX)


class Reads:
    """The queries of a PostgreSQL signal store's reading half.

    Args:
        pool: The store's connections.
        shown: The database, as messages name it.
    """

    def __init__(self, pool: ConnectionPool[Any], shown: str) -> None:
        self.pool, self.shown = pool, shown
        self.closed = False

    def query(self, sql: str, params: Iterable[Any] = ()) -> list[Any]:
        """Rows of one statement.

        Raises:
            RecordingError: The store is closed, or the database cannot be read.
        """
        if self.closed:
            raise RecordingError(f"The signal store PostgresSignalStore({self.shown!r}) is closed.")
        try:
            with self.pool.connection(timeout=10.0) as conn:  # away: say so soon
                rows: list[Any] = conn.execute(sql, tuple(params)).fetchall()
        except psycopg.Error as exc:
            raise RecordingError(
                f"Reading from {self.shown} failed ({describe(exc)}); check that the "
                "database is reachable."
            ) from exc
        return rows

    def infos(self, clause: str, params: Iterable[Any]) -> list[RunInfo]:
        """The runs ``clause`` (on ``reactor_runs r``) selects."""
        return [info_of(row) for row in self.query(INFO + clause, params)]

    def info(self, run_id: str) -> RunInfo:
        """One run's row.

        Raises:
            RunNotFoundError: No such run.
        """
        found = self.infos("WHERE r.run_id = %s", (run_id,))
        if not found:
            raise self._missing(run_id)
        return found[0]

    def _missing(self, run_id: str) -> RunNotFoundError:
        return RunNotFoundError(
            f"No run {run_id!r} in PostgresSignalStore({self.shown!r}) (see `reactor runs`)."
        )

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
            RecordingError: A row cannot be read.
        """
        rows = read_page(
            _PAGES, self.query, run_id, after=after, before=before, limit=limit, names=names
        )
        if not rows:
            self.info(run_id)  # an empty page of a run, or no run at all
        try:
            return list(signals_of(run_id, rows))
        except Damaged as exc:
            raise self._damaged(run_id, exc.what, exc.problem) from exc.__cause__

    def state(self, run_id: str) -> dict[str, Any] | None:
        """The state kept in the run's row (``None``: not kept, a run recorded before).

        Raises:
            RunNotFoundError: No such run.
        """
        rows = self.query("SELECT state::text FROM reactor_runs WHERE run_id = %s", (run_id,))
        if not rows:
            raise self._missing(run_id)
        if rows[0][0] is None:
            return None
        try:
            state = pydantic_core.from_json(rows[0][0])
        except ValueError as exc:
            raise self._damaged(run_id, "its state", exc) from exc
        return state if isinstance(state, dict) else None

    def seal(self, snapshot: Signal) -> str | None:
        """What is wrong with a snapshot's link in its run's chain (see ``_backends.chained``)."""
        return seal_problem(self.query, POSTGRES, verifying_key(), snapshot)

    def load(self, run_id: str, *, tail: bool = False) -> Recording:
        """The whole run, or (``tail``) the run from its latest snapshot on.

        Raises:
            RunNotFoundError: No such run.
            RecordingError: A row of the run cannot be read (edited by hand, damaged).
        """
        after, needs = 0, []
        if tail:
            found = self.query(
                "SELECT (payload->>'seq')::bigint, (payload->'needs')::text FROM reactor_signals "
                f"WHERE run_id = %s AND name = '{HARNESS_SNAPSHOT}' ORDER BY seq DESC LIMIT 1",
                (run_id,),
            )
            if found and found[0][0] is not None:
                after = int(found[0][0])
                needs = needed_seqs(pydantic_core.from_json(found[0][1])) if found[0][1] else []
        rows = self.query(
            f"SELECT {_COLUMNS} FROM reactor_signals WHERE run_id = %s AND seq > %s ORDER BY seq",
            (run_id, after),
        )
        if needs:
            rows[:0] = self.query(
                f"SELECT {_COLUMNS} FROM reactor_signals WHERE run_id = %s AND seq = ANY(%s) "
                "ORDER BY seq",
                (run_id, needs),
            )
        info = self.infos("WHERE r.run_id = %s", (run_id,))
        if not rows and not info:
            raise self._missing(run_id)
        try:
            signals = signals_of(run_id, rows)
            requests = requests_of(
                self.query(
                    "SELECT request_hash, fingerprint::text FROM reactor_requests "
                    "WHERE run_id = %s",
                    (run_id,),
                )
            )
        except Damaged as exc:
            raise self._damaged(run_id, exc.what, exc.problem) from exc.__cause__
        return Recording(
            info=info[0] if info else RunInfo(run_id=run_id), signals=signals, requests=requests
        )

    def _damaged(self, run_id: str, what: str, problem: object) -> RecordingError:
        return RecordingError(
            f"Run {run_id!r} in {self.shown} cannot be loaded: {what} is damaged "
            f"({problem}); delete the run or repair the row."
        )
