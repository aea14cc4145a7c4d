"""What a signal store knows about a run, and the filters of its listings."""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Collection, Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from reactor._signals.door import check_text
from reactor._signals.names import (
    SESSION_PROMPT,
    SESSION_REPLY,
    SESSION_TIMEOUT,
    TIMER_FIRED,
    TIMER_SET,
)
from reactor._signals.settings import parse_duration
from reactor._signals.signal import iso_time

if TYPE_CHECKING:
    from reactor._signals.signal import Signal

__all__ = [
    "ENDED",
    "PendingTimer",
    "RunInfo",
    "matches_filters",
    "new_run_id",
    "normalize_tags",
    "open_status",
    "parse_duration",
    "parse_tag",
    "parse_until",
    "pending_timers",
    "prune_bounds",
    "retagged",
    "runs_filter",
    "sortable_id",
    "until_text",
]


def until_text(when: datetime) -> str:
    """``when`` as the ``until`` of ``timer:set``: ISO 8601 in UTC, to the microsecond."""
    return iso_time(when, "microseconds")


def parse_until(text: str) -> datetime:
    """The time an ``until`` says (aware, UTC).

    Raises:
        ValueError: ``text`` is not an ISO 8601 time.
    """
    when = datetime.fromisoformat(text)
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def new_run_id() -> str:
    """A fresh run id: ``run_``, 12 hex digits of the time, 16 random hex digits."""
    return sortable_id("run_", 16)


def sortable_id(prefix: str, digits: int) -> str:
    """``prefix``, 12 hex digits of the time, then ``digits`` random hex digits.

    The time (milliseconds since the UNIX epoch) comes first, so that ids sort by when
    they were made, as UUIDv7s do: a database's indexes on them take new rows at their
    end, a few pages a transaction, instead of one page per row anywhere in the index
    (a third more reactions a second on SQLite, where runs, objects and suggestions are
    keyed by such ids). The random digits are the operating system's randomness, as
    :func:`secrets.token_hex`'s, drawn for 256 ids at a time (one ``os.urandom`` call
    instead of one per id); a forked child forgets what its parent had drawn, so no two
    processes share them.
    """
    tails = _tails.get(digits)
    if tails is None:
        tails = _tails.setdefault(digits, [])
    while True:
        try:
            tail = tails.pop()  # atomic: threads never get the same digits
            break
        except IndexError:
            drawn = os.urandom(digits * _ID_BATCH // 2 + 1).hex()
            tails.extend(drawn[i : i + digits] for i in range(0, digits * _ID_BATCH, digits))
    return f"{prefix}{time.time_ns() // 1_000_000:012x}{tail}"


_ID_BATCH = 256  # ids whose random digits are drawn from the OS at once
_tails: dict[int, list[str]] = {}  # drawn digits, by how many an id takes

os.register_at_fork(after_in_child=_tails.clear)


def parse_tag(tag: str) -> tuple[str, str]:
    """Split ``"key=value"`` into ``("key", "value")``; a bare ``"key"`` has value ``""``."""
    key, _, value = tag.partition("=")
    return key, value


def runs_filter(
    status_sql: str,
    tags: str,
    mark: str,
    *,
    graph: str | None,
    tag: str | None,
    status: str | None,
    limit: int | None,
) -> tuple[str, list[Any]]:
    """The ``WHERE``/``ORDER``/``LIMIT`` of a runs listing (newest first), and its parameters.

    For the SQL stores: ``r`` is the runs table, ``status_sql`` the expression of a
    run's status, ``tags`` the tags table, ``mark`` the driver's placeholder.

    Raises:
        PayloadError: A filter holds a NUL character (or a lone surrogate): PostgreSQL
            cannot compare it, so SQLite refuses it too (an API answers 422).
    """
    for name, text in (("graph", graph), ("tag", tag), ("status", status)):
        if text is not None:
            check_text(text, name)
    where: list[str] = []
    params: list[Any] = []
    if status is not None:
        where.append(f"{status_sql} = {mark}")
        params.append(status)
    if graph is not None:
        where.append(f"r.graph = {mark}")
        params.append(graph)
    if tag is not None:
        key, value = parse_tag(tag)
        clause = f"EXISTS (SELECT 1 FROM {tags} t WHERE t.run_id = r.run_id AND t.key = {mark}"
        params.append(key)
        if "=" in tag:
            clause += f" AND t.value = {mark}"
            params.append(value)
        where.append(clause + ")")
    sql = ("WHERE " + " AND ".join(where)) if where else ""
    sql += " ORDER BY r.started_at DESC, r.run_id DESC"
    if limit is not None:
        sql += f" LIMIT {mark}"
        params.append(limit)
    return sql, params


def normalize_tags(tags: Mapping[str, str] | Iterable[str] | str | None) -> dict[str, str]:
    """Tags as a dict: ``["nightly", "env=prod"]`` is ``{"nightly": "", "env": "prod"}``."""
    if not tags:
        return {}
    if isinstance(tags, Mapping):
        return {str(k): str(v) for k, v in tags.items()}
    if isinstance(tags, str):
        tags = [tags]
    return dict(parse_tag(str(tag)) for tag in tags)


def retagged(
    tags: Mapping[str, str], add: Mapping[str, str] | None, remove: Collection[str]
) -> dict[str, str]:
    """``tags`` with ``add`` set and the keys in ``remove`` dropped (a store's ``tag``).

    Raises:
        ValueError: A key is empty or not text.
        PayloadError: A key or value holds a NUL character (no database compares it).
    """
    changes = dict(add or {})
    for key, value in [*changes.items(), *((key, "") for key in remove)]:
        if not isinstance(key, str) or not key or not isinstance(value, str):
            raise ValueError(
                f"A tag is a non-empty text key and a text value, got {key!r}={value!r} "
                '(e.g. {"dataset": "golden"}).'
            )
        check_text(key, "tag")
        check_text(value, "tag")
    kept = {key: value for key, value in tags.items() if key not in remove}
    return {**kept, **changes}


@dataclasses.dataclass(frozen=True)
class RunInfo:
    """What a signal store knows about a run, for listings.

    Attributes:
        run_id: The run.
        graph: The graph's name.
        tags: User tags (``{"nightly": ""}``, ``{"env": "prod"}``).
        started_at: UNIX seconds.
        ended_at: UNIX seconds, once ``harness:end`` was recorded.
        status: ``running`` until ``harness:end`` is recorded (``waiting`` while a
            question to a person is pending), then the final status from it; a
            service shows a run still in its job queue as ``queued``, and one it will
            not resume by itself (its graph changed what its log says was done) as
            ``blocked``, with the ``reason``.
        reason: Why it ended.
        signals: How many signals are recorded.
        last_seq: The ``seq`` of the last signal recorded (``0`` before any): the end
            of the log, to page back from.
        input_tokens: Input tokens of the run's model calls, as their usage said.
        output_tokens: Output tokens of the run's model calls.
        cost_usd: What the run's model calls cost in USD (``None`` when a price was
            not known).
        prompts: Questions to people asked and not answered yet.
        target: Where the graph came from (``module:attribute`` or
            ``path/to/file.py:attribute``), when known.
        failures: How many activations failed (a run with ``fail_fast=False`` may
            complete with failures).
        target_hash: SHA-256 of the target's source file when the run started: a
            recorded target is imported again only if its file still has this hash.
        parent_run_id: The run that started this one with ``ctx.spawn``, if any.
        forked_from: The run whose log this one began with (``graph.fork``), if any.
    """

    run_id: str
    graph: str | None = None
    tags: Mapping[str, str] = dataclasses.field(default_factory=dict)
    started_at: float = 0.0
    ended_at: float | None = None
    status: str | None = None
    reason: str | None = None
    signals: int = 0
    last_seq: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = 0.0
    prompts: int = 0
    target: str | None = None
    target_hash: str | None = None
    failures: int = 0
    parent_run_id: str | None = None
    forked_from: str | None = None

    @property
    def complete(self) -> bool:
        """Whether the run's ``harness:end`` was recorded."""
        return self.status not in (None, "queued", "running", "waiting", "blocked")

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form; times in ISO 8601, UTC (as a serialized signal's)."""
        return {
            **dataclasses.asdict(self),
            "tags": dict(self.tags),
            "started_at": iso_time(self.started_at),
            "ended_at": None if self.ended_at is None else iso_time(self.ended_at),
            "complete": self.complete,
        }


def open_status(signals: Iterable[Any]) -> str:
    """The status of a run not ended: ``waiting`` while a prompt or a timer is pending."""
    pending: set[Any] = set()
    for signal in signals:
        name = signal.name
        if name in _OPENING and isinstance(signal.payload, Mapping):
            pending.add(signal.payload.get(_OPENING[name]))
        elif name in _CLOSING and isinstance(signal.payload, Mapping):
            pending.discard(signal.payload.get(_CLOSING[name]))
    return "waiting" if pending else "running"


_OPENING = {SESSION_PROMPT: "prompt_id", TIMER_SET: "timer_id"}
_CLOSING = {SESSION_REPLY: "prompt_id", SESSION_TIMEOUT: "prompt_id", TIMER_FIRED: "timer_id"}


def matches_filters(
    info: RunInfo, *, graph: str | None, tag: str | None, status: str | None = None
) -> bool:
    """Whether ``info`` passes the ``runs()`` filters (graph, ``key[=value]`` tag, status)."""
    if graph is not None and info.graph != graph:
        return False
    if status is not None and info.status != status:
        return False
    if tag is not None:
        key, value = parse_tag(tag)
        if key not in info.tags or ("=" in tag and info.tags[key] != value):
            return False
    return True


ENDED = ("completed", "ended", "failed", "aborted", "timeout", "loop_limit")
"""The statuses a run ends with: only runs with one of them may be pruned."""


def prune_bounds(
    older_than: timedelta, status: Collection[str] | str | None, keep_last: int
) -> tuple[float, tuple[str, ...] | None]:
    """What ``prune`` was asked, checked: the cutoff (UNIX seconds) and the statuses.

    Raises:
        ValueError: ``older_than`` is not a duration >= 0, ``keep_last`` not a whole
            number >= 0, or a status is not one a run ends with.
    """
    if not isinstance(older_than, timedelta) or older_than < timedelta(0):
        raise ValueError(
            f"older_than must be a duration (datetime.timedelta(days=30)), got {older_than!r}."
        )
    if not isinstance(keep_last, int) or isinstance(keep_last, bool) or keep_last < 0:
        raise ValueError(f"keep_last must be a whole number >= 0, got {keep_last!r}.")
    statuses = None if status is None else (status,) if isinstance(status, str) else tuple(status)
    for given in statuses or ():
        if given not in ENDED:
            raise ValueError(
                f"Cannot prune runs with status {given!r}: only ended runs are pruned "
                f"(statuses {', '.join(ENDED)}); a run that has not ended never is."
            )
    return time.time() - older_than.total_seconds(), statuses


@dataclasses.dataclass(frozen=True)
class PendingTimer:
    """A timer set and not fired yet: its agent sleeps until ``until``.

    Attributes:
        timer_id: Its id (``timer_...``).
        agent: The agent that sleeps.
        until: When it fires (aware, UTC).
    """

    timer_id: str
    agent: str
    until: datetime


_CLOSING_ACTIVATION = frozenset({"completed", "failed", "cancelled"})


def pending_timers(signals: Iterable[Signal]) -> list[PendingTimer]:
    """The timers of a log (in ``seq`` order) set and not fired, soonest first.

    A timer of an activation that finished (or was cancelled when its run stopped) is
    not pending.
    """
    set_: dict[str, Signal] = {}
    activations: dict[str, str] = {}  # a timer's cause -> its activation
    closed: set[str] = set()
    for signal in signals:
        name = signal.name
        if name == TIMER_SET and isinstance(signal.payload, Mapping):
            set_[str(signal.payload.get("timer_id"))] = signal
        elif name == TIMER_FIRED and isinstance(signal.payload, Mapping):
            set_.pop(str(signal.payload.get("timer_id")), None)
        elif name.startswith("agent:"):
            event = name.rpartition(":")[2]
            if event == "activated":
                activations[signal.id] = signal.id
                continue
            if event in _CLOSING_ACTIVATION and signal.caused_by is not None:
                closed.add(signal.caused_by)
        cause = signal.caused_by
        if cause is not None:
            activations[signal.id] = activations.get(cause, cause)
    found = []
    for timer_id, signal in set_.items():
        if activations.get(signal.id) in closed:
            continue
        payload = signal.payload
        found.append(PendingTimer(timer_id, str(payload["agent"]), parse_until(payload["until"])))
    return sorted(found, key=lambda timer: timer.until)


_CLOSING_ACTIVATION = frozenset({"completed", "failed", "cancelled"})
