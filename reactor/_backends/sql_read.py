"""Reading a SQL signal store: the queries of the contract, and its rows checked as read.

Every read is one statement in autocommit on a connection of the dialect's, read to its
end at once, so no read transaction stays open and readers never hold what the writer
needs. A row that is not what the store wrote (edited by hand, damaged) is a
``RecordingError`` naming the run and the fault, never a value a caller trips on later.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from typing import Any

import pydantic_core

from reactor._backends.chained import ChainSQL, seal_problem
from reactor._backends.dialect import Dialect
from reactor._backends.paging import PageQuery, read_page
from reactor._backends.tally import ASKING_INDEX
from reactor._recording.chain import verifying_key
from reactor._recording.info import RunInfo
from reactor._recording.log import needed_seqs
from reactor._recording.recording import Recording
from reactor._signals.names import HARNESS_END, HARNESS_SNAPSHOT, HARNESS_START, parse_state_event
from reactor._signals.patterns import Pattern
from reactor._signals.signal import Signal
from reactor.exceptions import RecordingError, RunNotFoundError

__all__ = ["INFO", "STATUS", "Reads", "decode_info", "decode_signal"]

STATUS = (
    "COALESCE(r.status, CASE WHEN r.prompts > 0 "
    "OR EXISTS (SELECT 1 FROM {timers} t WHERE t.run_id = r.run_id) "
    "OR EXISTS (SELECT 1 FROM {inbox} i WHERE i.run_id = r.run_id AND i.delivered_seq IS NULL "
    "AND i.due_at IS NOT NULL) THEN 'waiting' ELSE 'running' END)"
)
"""A run's status: final once ended, else waiting while a question, a timer or a
scheduled message is pending."""

INFO = (
    "SELECT r.run_id, r.graph, r.target, r.target_hash, r.started_at, r.ended_at, "
    f"{STATUS}, r.reason, r.failures, r.signals, (SELECT {{tags_object}} "
    "FROM {run_tags} t WHERE t.run_id = r.run_id), r.parent_run_id, r.forked_from, r.last_seq, "
    "r.input_tokens, r.output_tokens, r.cost_usd, r.prompts FROM {runs} r "
)
"""The columns of a :class:`RunInfo` (:func:`decode_info`), from ``{runs} r``."""

Query = Callable[[str, Iterable[Any]], list[Any]]
"""Runs one statement (in the dialect's SQL) with its parameters; returns its rows."""


def _damaged(run_id: str, what: str) -> RecordingError:
    return RecordingError(
        f"The recording of {run_id!r} is damaged: {what}. Record the run again, or delete it."
    )


def decode_signal(run_id: str, row: Sequence[Any]) -> Signal:
    """One row of the signals table as a signal, checked for what readers rely on.

    Raises:
        RecordingError: The row is damaged (names the run, the signal and the fault).
    """
    seq, signal_id, name, payload, timestamp, source, caused_by, depth = row
    if not isinstance(seq, int) or not isinstance(name, str):
        raise _damaged(run_id, f"a signal has the seq {seq!r} and the name {name!r}")
    where = f"signal #{seq} ({name!r})"
    if type(timestamp) not in (int, float):
        raise _damaged(run_id, f"{where} has the timestamp {timestamp!r}, not a number")
    if not isinstance(depth, int):
        raise _damaged(run_id, f"{where} has the depth {depth!r}, not a whole number")
    for field, value in (("id", signal_id), ("source", source), ("caused_by", caused_by)):
        if value is not None and not isinstance(value, str):
            raise _damaged(run_id, f"{where} has the {field} {value!r}, not text")
    try:
        data = None if payload is None else pydantic_core.from_json(payload)
    except ValueError as exc:
        raise _damaged(run_id, f"{where} has a payload that is not JSON ({exc})") from exc
    state = parse_state_event(name)
    if name in (HARNESS_START, HARNESS_END) and not isinstance(data, dict):
        raise _damaged(run_id, f"{where} has a payload that is not an object")
    if (
        state is not None
        and state[1] == "changed"
        and not (isinstance(data, dict) and isinstance(data.get("key"), str) and "new" in data)
    ):
        raise _damaged(run_id, f"{where} has no key and new value in its payload")
    return Signal(
        name,
        data,
        id=signal_id,
        seq=seq,
        timestamp=float(timestamp),
        source=source,
        caused_by=caused_by,
        depth=depth,
        run_id=run_id,
    )


_INFO_COLUMNS = (
    "run_id",
    "graph",
    "target",
    "target_hash",
    "started_at",
    "ended_at",
    "status",
    "reason",
    "failures",
    "signals",
    "tags",
    "parent_run_id",
    "forked_from",
    "last_seq",
    "input_tokens",
    "output_tokens",
    "cost_usd",
    "prompts",
)
"""The columns of :data:`INFO`, named as :class:`RunInfo` names its fields."""
_TEXT = ("graph", "target", "target_hash", "status", "reason", "parent_run_id", "forked_from")
_COUNTS = ("failures", "signals", "last_seq", "input_tokens", "output_tokens", "prompts")


def decode_info(row: Sequence[Any]) -> RunInfo:
    """One row of the runs listing (:data:`INFO`) as a :class:`RunInfo`, checked.

    Raises:
        RecordingError: The row is damaged (names the run and the fault).
    """
    fields = dict(zip(_INFO_COLUMNS, row, strict=True))
    run_id = fields["run_id"]
    if not isinstance(run_id, str):
        raise RecordingError(f"A run has the id {run_id!r}, not text; the database is damaged.")
    for field in _TEXT:
        if fields[field] is not None and not isinstance(fields[field], str):
            raise _damaged(run_id, f"its {field} is {fields[field]!r}, not text")
    for field, optional in (("started_at", False), ("ended_at", True)):
        value = fields[field]
        if not (type(value) in (int, float) or (optional and value is None)):
            raise _damaged(run_id, f"its {field} is {value!r}, not a time in seconds")
        fields[field] = None if value is None else float(value)
    for field in _COUNTS:
        if not isinstance(fields[field], int):
            raise _damaged(run_id, f"its {field} count is {fields[field]!r}, not a whole number")
    cost = fields["cost_usd"]
    if cost is not None and type(cost) not in (int, float):
        raise _damaged(run_id, f"its cost is {cost!r}, not a number")
    fields["cost_usd"] = None if cost is None else round(float(cost), 6)
    fields["prompts"] = max(0, fields["prompts"])
    try:
        tags = pydantic_core.from_json(fields["tags"]) if fields["tags"] else {}
    except ValueError as exc:
        raise _damaged(run_id, f"its tags are not readable ({exc})") from exc
    fields["tags"] = {str(key): str(value) for key, value in tags.items()}
    return RunInfo(**fields)


def decode_requests(run_id: str, rows: Iterable[Sequence[Any]]) -> dict[str, Any]:
    """Rows of the requests table (hash, fingerprint) as the requests of a recording.

    Raises:
        RecordingError: A fingerprint is not a JSON object.
    """
    requests: dict[str, Any] = {}
    for digest, fingerprint in rows:
        try:
            found = pydantic_core.from_json(fingerprint)
        except (TypeError, ValueError) as exc:
            raise _damaged(run_id, f"the request {digest!r} is not JSON ({exc})") from exc
        if not isinstance(found, dict):
            raise _damaged(run_id, f"the request {digest!r} is not a JSON object")
        requests[str(digest)] = found
    return requests


class Reads:
    """The queries of a SQL signal store's reading half.

    Args:
        dialect: The database's dialect.
        query: Runs one statement (see :data:`Query`).
        shown: The store, as messages name it.
    """

    def __init__(self, dialect: Dialect, query: Query, shown: str) -> None:
        self.dialect, self.query, self.shown = dialect, query, shown
        columns = f"seq, id, name, {dialect.column('payload')}, timestamp, source, caused_by, depth"
        self.columns = columns
        self.pages = PageQuery(dialect.sql("{signals}"), columns, dialect.mark, ASKING_INDEX)
        self.chain = ChainSQL(
            dialect.sql("{signals}"),
            dialect.sql("{runs}"),
            dialect.sql("{audit_chain}"),
            dialect.mark,
            dialect.column("payload"),
        )

    def infos(self, clause: str, params: Iterable[Any]) -> list[RunInfo]:
        """The runs ``clause`` (on ``{runs} r``, in the dialect's SQL) selects."""
        return [decode_info(row) for row in self.query(self.dialect.sql(INFO) + clause, params)]

    def info(self, run_id: str) -> RunInfo:
        """One run's row.

        Raises:
            RunNotFoundError: No such run.
        """
        found = self.infos(self.dialect.sql("WHERE r.run_id = ?"), (run_id,))
        if not found:
            raise self.missing(run_id)
        return found[0]

    def missing(self, run_id: str) -> RunNotFoundError:
        """The error of a run not in the store."""
        return RunNotFoundError(f"No run {run_id!r} in {self.shown} (see `reactor runs`).")

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
            self.pages, self.query, run_id, after=after, before=before, limit=limit, names=names
        )
        if not rows:
            self.info(run_id)  # an empty page of a run, or no run at all
        return [decode_signal(run_id, row) for row in rows]

    def state(self, run_id: str) -> dict[str, Any] | None:
        """The state kept in the run's row (``None``: not kept, a run recorded before).

        Raises:
            RunNotFoundError: No such run.
        """
        query = f"SELECT {self.dialect.column('state')} FROM {{runs}} WHERE run_id = ?"
        rows = self.query(self.dialect.sql(query), (run_id,))
        if not rows:
            raise self.missing(run_id)
        if rows[0][0] is None:
            return None
        try:
            state = pydantic_core.from_json(rows[0][0])
        except ValueError as exc:
            raise RecordingError(
                f"The state of run {run_id!r} in {self.shown} is damaged ({exc}); it is "
                "kept again as the run goes on."
            ) from exc
        return state if isinstance(state, dict) else None

    def seal(self, snapshot: Signal) -> str | None:
        """What is wrong with a snapshot's link in its run's chain (see ``_backends.chained``)."""
        return seal_problem(self.query, self.chain, verifying_key(), snapshot)

    def load(self, run_id: str, *, tail: bool = False) -> Recording:
        """The whole run, or (``tail``) the run from its latest snapshot on.

        Raises:
            RunNotFoundError: No such run.
            RecordingError: A row of the run cannot be read (edited by hand, damaged).
        """
        sql, columns = self.dialect.sql, self.columns
        after, needs = 0, []
        if tail:
            found = self.query(
                sql(
                    "SELECT {snapshot} FROM {signals} WHERE run_id = ? AND name = "
                    f"'{HARNESS_SNAPSHOT}' ORDER BY seq DESC LIMIT 1"
                ),
                (run_id,),
            )
            if found and isinstance(found[0][0], int):
                after = found[0][0]
                needs = needed_seqs(pydantic_core.from_json(found[0][1])) if found[0][1] else []
        rows = self.query(
            sql(f"SELECT {columns} FROM {{signals}} WHERE run_id = ? AND seq > ? ORDER BY seq"),
            (run_id, after),
        )
        if needs:
            member = self.dialect.member("seq")
            rows[:0] = self.query(
                sql(
                    f"SELECT {columns} FROM {{signals}} WHERE run_id = ? AND {member} ORDER BY seq"
                ),
                (run_id, self.dialect.array(needs)),
            )
        info = self.infos(sql("WHERE r.run_id = ?"), (run_id,))
        if not rows and not info:
            raise self.missing(run_id)
        signals = tuple(decode_signal(run_id, row) for row in rows)
        fingerprint = self.dialect.column("fingerprint")
        requests = decode_requests(
            run_id,
            self.query(
                sql(f"SELECT request_hash, {fingerprint} FROM {{requests}} WHERE run_id = ?"),
                (run_id,),
            ),
        )
        return Recording(
            info=info[0] if info else RunInfo(run_id=run_id), signals=signals, requests=requests
        )
