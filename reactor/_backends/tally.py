"""What a batch of signals adds to the rows of its runs: the counters kept as a log is written.

Both writer threads (SQLite, PostgreSQL) put each signal of a batch through
:meth:`Tally.add`; the batch's transaction then updates each run's row with what the
tally gathered, so that listing runs, showing one, or answering a reply never reads
a log: how many signals (and the last ``seq``), tokens and cost of its model calls,
questions pending, its end (status, reason, failures), its timers, and its latest
state (set by ``harness:start``, changed by ``state:<key>:changed``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pydantic_core

from reactor._recording.info import parse_until
from reactor._signals.names import (
    HARNESS_END,
    HARNESS_START,
    PROVIDER_END,
    SESSION_PROMPT,
    SESSION_REPLY,
    SESSION_TIMEOUT,
    STATE_PREFIX,
    TIMER_FIRED,
    TIMER_SET,
    parse_state_event,
)
from reactor._signals.payloads import input_tokens
from reactor._signals.signal import Signal, json_fallback

__all__ = ["ASKING", "ASKING_INDEX", "Tally", "Timers", "merged_state"]

ASKING = (SESSION_PROMPT, SESSION_REPLY, SESSION_TIMEOUT, TIMER_SET, TIMER_FIRED)

ASKING_INDEX = f"name IN ({', '.join(repr(name) for name in ASKING)})"
"""The predicate of the partial index of questions and timers (a query repeats it to use it)."""
"""The signals a partial index finds without reading a log: questions and timers."""

_NOTED = frozenset((HARNESS_START, HARNESS_END, PROVIDER_END, *ASKING))
_PER_RUN = ("counts", "firsts", "last", "prompts", "ends", "spent", "started", "changes")
"""The attributes of a :class:`Tally` that map run ids to what the batch adds."""


class Timers:
    """The timers a batch sets, fires, or forgets with the end of their run (the ``timers`` table).

    Rows of (run id, timer id, agent, due in UNIX seconds) to insert, (run id, timer
    id) to delete, (run id,) whose timers go.
    """

    __slots__ = ("ended", "fired", "set")

    def __init__(self) -> None:
        self.set: list[tuple[str, str, str, float]] = []
        self.fired: list[tuple[str, str]] = []
        self.ended: list[tuple[str]] = []

    def __bool__(self) -> bool:
        return bool(self.set or self.fired or self.ended)

    def note(self, run_id: str, name: str, payload: Any) -> None:
        """Take a ``timer:set`` or a ``timer:fired``."""
        if not isinstance(payload, Mapping):
            return
        timer_id = str(payload.get("timer_id"))
        if name == TIMER_FIRED:
            self.fired.append((run_id, timer_id))
            return
        try:
            due = parse_until(str(payload.get("until"))).timestamp()
        except ValueError:
            return  # not a time: nothing to wake the run for
        self.set.append((run_id, timer_id, str(payload.get("agent")), due))

    def drop(self, runs: set[str]) -> None:
        """Leave out everything of ``runs``."""
        self.set = [row for row in self.set if row[0] not in runs]
        self.fired = [row for row in self.fired if row[0] not in runs]
        self.ended = [row for row in self.ended if row[0] not in runs]

    def only(self, run_id: str) -> Timers:
        """The timers of ``run_id`` alone."""
        one = Timers()
        one.set = [row for row in self.set if row[0] == run_id]
        one.fired = [row for row in self.fired if row[0] == run_id]
        one.ended = [row for row in self.ended if row[0] == run_id]
        return one


class Tally:
    """What one batch adds to each run's row (see the module's docstring).

    Attributes:
        counts: Signals per run.
        firsts: Each run's first signal time (the start of a run never registered).
        last: Each run's highest ``seq``.
        prompts: Change of each run's pending questions.
        ends: Each run's ``harness:end``: (ended_at, status, reason, failures).
        spent: Each run's [input tokens, output tokens, cost] (cost ``None``: unknown).
        started: Runs whose state the batch sets anew (their ``harness:start``).
        changes: Each run's state keys changed in the batch, and their new values.
        timers: The timers set, fired and ended.
    """

    __slots__ = (
        "changes",
        "counts",
        "ends",
        "firsts",
        "last",
        "prompts",
        "spent",
        "started",
        "timers",
    )

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.firsts: dict[str, float] = {}
        self.last: dict[str, int] = {}
        self.prompts: dict[str, int] = {}
        self.ends: dict[str, tuple[float, Any, Any, int]] = {}
        self.spent: dict[str, list[Any]] = {}
        self.started: dict[str, Any] = {}
        self.changes: dict[str, dict[str, Any]] = {}
        self.timers = Timers()

    def add(self, signal: Signal, run_id: str) -> None:
        """Count one signal written for ``run_id`` (the writer's hot path: keep it lean)."""
        counts = self.counts
        if run_id in counts:
            counts[run_id] += 1
        else:
            counts[run_id] = 1
            self.firsts[run_id] = signal.timestamp
        self.last[run_id] = signal.seq
        name = signal.name
        if name in _NOTED:
            self._note(signal, run_id, name, signal.payload)
        elif name.startswith(STATE_PREFIX):
            parsed = parse_state_event(name)
            payload = signal.payload
            if parsed is not None and parsed[1] == "changed" and isinstance(payload, Mapping):
                self.changes.setdefault(run_id, {})[str(payload.get("key"))] = payload.get("new")

    def _note(self, signal: Signal, run_id: str, name: str, payload: Any) -> None:
        if name == SESSION_PROMPT:
            self.prompts[run_id] = self.prompts.get(run_id, 0) + 1
        elif name in (SESSION_REPLY, SESSION_TIMEOUT):
            self.prompts[run_id] = self.prompts.get(run_id, 0) - 1
        elif name in (TIMER_SET, TIMER_FIRED):
            self.timers.note(run_id, name, payload)
        elif not isinstance(payload, Mapping):
            return
        elif name == PROVIDER_END:
            usage = payload.get("usage")
            usage = usage if isinstance(usage, Mapping) else {}
            spent = self.spent.setdefault(run_id, [0, 0, 0.0])
            spent[0] += input_tokens(usage)
            spent[1] += _whole(usage.get("output_tokens"))
            cost = payload.get("cost_usd")
            known = spent[2] is not None and isinstance(cost, int | float)
            spent[2] = spent[2] + cost if known else None
        elif name == HARNESS_START:
            self.started[run_id] = payload.get("state")
            self.changes.pop(run_id, None)  # what came before the start is not the state
        else:  # harness:end
            failed = payload.get("failures")
            self.ends[run_id] = (
                signal.timestamp,
                payload.get("status"),
                payload.get("reason"),
                failed if isinstance(failed, int) else 0,
            )
            self.timers.ended.append((run_id,))

    def drop(self, runs: set[str]) -> None:
        """Leave out everything of ``runs`` (a fence refused them)."""
        for rows in (
            self.counts,
            self.firsts,
            self.last,
            self.prompts,
            self.ends,
            self.spent,
            self.started,
            self.changes,
        ):
            for run_id in runs:
                rows.pop(run_id, None)
        self.timers.drop(runs)

    def only(self, run_id: str) -> Tally:
        """What the batch adds to ``run_id``'s row alone (the batch is written run by run)."""
        one = Tally()
        for name in _PER_RUN:
            rows = getattr(self, name)
            if run_id in rows:
                getattr(one, name)[run_id] = rows[run_id]
        one.timers = self.timers.only(run_id)
        return one

    def stateful(self) -> set[str]:
        """Runs whose state the batch changes without setting it anew (their row is read first)."""
        return set(self.changes) - set(self.started)

    def states(self, current: Mapping[str, str | None]) -> list[tuple[str | None, str]]:
        """(state as JSON, run id) of each run whose state the batch sets or changes.

        ``current``: the state rows of :meth:`stateful` runs as stored (``None``: not
        known, a run recorded before the store kept it: it stays unknown).
        """
        rows: list[tuple[str | None, str]] = []
        for run_id in {*self.started, *self.changes}:
            if run_id in self.started:
                base: Any = self.started[run_id]
            else:
                stored = current.get(run_id)
                if stored is None:
                    continue
                base = json.loads(stored)
            rows.append((merged_state(base, self.changes.get(run_id, {})), run_id))
        return rows


def merged_state(base: Any, changes: Mapping[str, Any]) -> str:
    """``base`` (a state as JSON data) with ``changes`` applied, as JSON text."""
    state = dict(base) if isinstance(base, Mapping) else {}
    state.update(changes)
    return pydantic_core.to_json(state, fallback=json_fallback).decode()


def _whole(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
