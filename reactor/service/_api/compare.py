"""``GET /api/runs/{a}/compare/{b}``: two runs side by side, and where their logs part.

A comparison shows each run's input, status, tokens, cost and duration (from its row),
its final state (its latest, from the row too: the keys that differ, old and new, and
those that do not), and the first divergence of the two logs, as
:meth:`reactor.Recording.diff` finds it (:func:`~reactor._recording.diff.first_divergence`,
fed pages).

The logs are never read whole. They are compared a page of :data:`PAGE` signals from
each at a time, in ``seq`` order, up to the ``last_seq`` each row showed, and the
comparison stops at the first page that differs, or after :data:`CAP` signals of each:
then it says only that these are equal (``complete`` is false). Where they differ, the
divergence is explained from that page, the page before it and the page after it: the
answer of a provider call that spans more is cut there; the causal path is read back
further, a signal at a time. A request that differs (kind ``prompt``) is named by its
``request_hash``: the text of requests is kept beside a recording, not in its log
(``reactor diff A B`` loads both and shows it). Every read is made off the event loop.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Mapping, Sequence
from typing import Any

import fastapi

from reactor._recording.diff import Divergence, first_divergence
from reactor._recording.info import RunInfo
from reactor._recording.store import SignalStore
from reactor._signals.names import HARNESS_START
from reactor._signals.signal import Signal, to_jsonable
from reactor.service._api.base import CHECKS, VIEWS, Service
from reactor.service._api.reads import run_info, store_of
from reactor.service._hosting.service import ReactionService

__all__ = ["CAP", "PAGE", "Comparison", "Side", "compare", "compare_logs", "router"]

router = fastapi.APIRouter(prefix="/api/runs", tags=["runs"], dependencies=CHECKS)

PAGE = 500
"""Signals read from each log at a time."""
CAP = 10_000
"""Signals of each log compared at most: a comparison reads some ``2 * (CAP + PAGE)``."""
DEPTH = 64
"""Causes of the divergence read back at most, one signal each, to name its causal path."""


@dataclasses.dataclass(frozen=True)
class Side:
    """One of the two runs compared.

    Attributes:
        info: Its row: status, tags, tokens, cost, times.
        input: Its input (from its ``harness:start``; ``None`` before it is written).
        state: Its latest state (its final state once it has ended).
    """

    info: RunInfo
    input: Any
    state: Mapping[str, Any]

    @property
    def tokens(self) -> int:
        """Input and output tokens of its model calls."""
        return self.info.input_tokens + self.info.output_tokens

    @property
    def duration(self) -> float | None:
        """Seconds from its start to its end (to now while it goes); ``None`` if unknown."""
        if not self.info.started_at:
            return None
        end = self.info.ended_at if self.info.ended_at is not None else time.time()
        return max(0.0, end - self.info.started_at)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form."""
        return {
            "info": self.info.to_dict(),
            "input": to_jsonable(self.input),
            "state": to_jsonable(dict(self.state)),
            "tokens": self.tokens,
            "duration_s": self.duration,
        }


@dataclasses.dataclass(frozen=True)
class Comparison:
    """Two runs side by side (see the module).

    Attributes:
        left: The first run (in an evaluation, the recorded one).
        right: The second run (the new one).
        divergence: Where the logs first differ (``None``: not within what was compared).
        equal: Signals at the start of both logs found equal (before the divergence).
        complete: Whether the logs were compared to their ends (false when :data:`CAP`
            stopped the comparison first, or a run has no log yet).
    """

    left: Side
    right: Side
    divergence: Divergence | None
    equal: int
    complete: bool

    @property
    def same(self) -> bool:
        """Whether the logs are equal, end to end (ids, times and timings aside)."""
        return self.divergence is None and self.complete

    @property
    def changed(self) -> dict[str, tuple[Any, Any]]:
        """The state's keys whose values differ: key -> (left's, right's)."""
        old, new = self.left.state, self.right.state
        keys = dict.fromkeys([*old, *new])
        return {key: (old.get(key), new.get(key)) for key in keys if old.get(key) != new.get(key)}

    @property
    def unchanged(self) -> dict[str, Any]:
        """The state's keys with the same value in both runs."""
        changed = self.changed
        return {key: value for key, value in self.left.state.items() if key not in changed}

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form: what ``GET /api/runs/{a}/compare/{b}`` answers."""
        return {
            "left": self.left.to_dict(),
            "right": self.right.to_dict(),
            "same": self.same,
            "complete": self.complete,
            "equal": self.equal,
            "state_diff": {
                key: {"old": to_jsonable(old), "new": to_jsonable(new)}
                for key, (old, new) in self.changed.items()
            },
            "unchanged": sorted(self.unchanged),
            "divergence": divergence_dict(self.divergence),
        }


def divergence_dict(found: Divergence | None) -> dict[str, Any] | None:
    """A divergence as JSON data: where (``step``, each side's ``seq``), what, both signals."""
    if found is None:
        return None
    return {
        "step": found.step,
        "left_seq": found.left.seq if found.left is not None else None,
        "right_seq": found.right.seq if found.right is not None else None,
        "path": list(found.path),
        "field": found.field,
        "kind": found.kind,
        "agent": found.agent,
        "left": found.left.to_dict() if found.left is not None else None,
        "right": found.right.to_dict() if found.right is not None else None,
        "left_text": found.left_text,
        "right_text": found.right_text,
        "text": str(found),
    }


def compare_logs(
    store: SignalStore, left: RunInfo, right: RunInfo, *, cap: int = CAP, page: int = PAGE
) -> tuple[Divergence | None, int, bool]:
    """The first divergence of two logs, the signals equal before it, and whether complete.

    Blocking (call it off the loop). Reads each log a page at a time, up to the
    ``last_seq`` of its row, and stops at the first page that differs or after ``cap``
    signals of each (see the module). Complete: the logs were compared to their ends,
    or to the divergence.
    """
    runs = (left.run_id, right.run_id)
    ends = (left.last_seq, right.last_seq)
    cursors: tuple[int, ...] = (0, 0)
    before: tuple[list[Signal], ...] = ([], [])
    equal = 0
    while equal < cap:
        size = min(page, cap - equal)
        pages = tuple(_page(store, runs[i], cursors[i], ends[i], size) for i in (0, 1))
        found = _divergence(pages[0], pages[1])
        if found is not None:
            cursors = tuple(_last(pages[i], cursors[i]) for i in (0, 1))
            after = tuple(_page(store, runs[i], cursors[i], ends[i], page) for i in (0, 1))
            context = tuple(before[i] + pages[i] + after[i] for i in (0, 1))
            explained = _explained(context, equal - len(before[0]))
            return _traced(store, runs[0], explained, context[0]), equal + found.step, True
        equal += len(pages[0])
        if len(pages[0]) < size:  # both ended here, equal
            return None, equal, True
        cursors = tuple(_last(pages[i], cursors[i]) for i in (0, 1))
        before = pages
    return None, equal, cursors[0] >= ends[0] and cursors[1] >= ends[1]


def _page(store: SignalStore, run_id: str, after: int, end: int, size: int) -> list[Signal]:
    """The ``size`` signals after ``seq`` ``after``, up to ``end`` (the row's last)."""
    if after >= end:
        return []
    return [
        signal for signal in store.signals(run_id, after=after, limit=size) if signal.seq <= end
    ]


def _last(page: Sequence[Signal], after: int) -> int:
    return page[-1].seq if page else after


def _divergence(left: Sequence[Signal], right: Sequence[Signal]) -> Divergence | None:
    return first_divergence(left, right, left_requests={}, right_requests={})


def _explained(context: tuple[list[Signal], ...], offset: int) -> Divergence:
    """The divergence found in the pages of ``context``, explained with the pages around them.

    ``offset`` is the step of ``context``'s first signals: the equal ones before them.
    """
    found = _divergence(context[0], context[1])
    assert found is not None  # the pages differ, and are part of these
    step = offset + found.step
    if found.kind == "prompt":  # the text of requests is not in the log
        return dataclasses.replace(
            found, step=step, left_text=_request(found.left), right_text=_request(found.right)
        )
    return dataclasses.replace(found, step=step)


def _traced(
    store: SignalStore, run_id: str, found: Divergence, known: Sequence[Signal]
) -> Divergence:
    """``found`` with the whole causal path of its first run's signal, read back if need be.

    The path begins in the pages around the divergence; a cause before them is read by
    the ``seq`` its id names (``sig_<seq>``, as the bus numbers signals), one signal a
    read, :data:`DEPTH` at most.
    """
    if found.left is None:
        return found
    by_id = {signal.id: signal for signal in known}
    names: list[str] = []
    seen = {found.left.id}
    cause = found.left.caused_by
    while cause is not None and len(names) < DEPTH:
        parent = by_id.get(cause) or _numbered(store, run_id, cause)
        if parent is None or parent.id in seen:
            break
        seen.add(parent.id)
        names.append(parent.name)
        cause = parent.caused_by
    return dataclasses.replace(found, path=tuple(reversed(names)))


def _numbered(store: SignalStore, run_id: str, signal_id: str) -> Signal | None:
    number = signal_id.removeprefix("sig_")
    if not number.isdigit() or int(number) < 1:
        return None
    found = store.signals(run_id, after=int(number) - 1, limit=1)
    return found[0] if found and found[0].id == signal_id else None


def _request(start: Signal | None) -> str | None:
    payload = start.payload if start is not None else None
    digest = payload.get("request_hash") if isinstance(payload, Mapping) else None
    return None if digest is None else f"request {digest}"


def _side(store: SignalStore, info: RunInfo) -> Side:
    """A run's input and latest state (blocking; none for a run with no log yet)."""
    if info.status == "queued" or info.last_seq < 1:
        return Side(info, None, {})
    first = store.signals(info.run_id, limit=1)
    payload = first[0].payload if first and first[0].name == HARNESS_START else None
    given = payload.get("input") if isinstance(payload, Mapping) else None
    return Side(info, given, store.state(info.run_id))


def _compared(store: SignalStore, left: RunInfo, right: RunInfo) -> Comparison:
    sides = _side(store, left), _side(store, right)
    if left.status == "queued" or right.status == "queued":
        return Comparison(*sides, divergence=None, equal=0, complete=False)
    divergence, equal, complete = compare_logs(store, left, right)
    return Comparison(*sides, divergence=divergence, equal=equal, complete=complete)


async def compare(service: ReactionService, left: RunInfo, right: RunInfo) -> Comparison:
    """The runs of rows ``left`` and ``right`` side by side (see the module), read off the loop."""
    return await asyncio.to_thread(_compared, store_of(service), left, right)


@router.get("/{a}/compare/{b}", dependencies=[VIEWS])
async def compare_runs(a: str, b: str, service: Service) -> dict[str, Any]:
    """Runs ``a`` and ``b`` side by side, and where their logs first differ.

    Answers ``left`` and ``right`` (each run's ``info``, ``input``, latest ``state``,
    ``tokens`` and ``duration_s``), ``state_diff`` (``{key: {old, new}}`` for the keys
    that differ; ``unchanged`` names the others), and ``divergence``: the first signal
    that differs (``step``, ``left_seq``, ``right_seq``, ``field``, ``kind``,
    ``agent``, both signals and texts), or ``null``. The logs are compared a page at a
    time, up to 10,000 signals of each: ``equal`` says how many signals of each are
    equal before the divergence, ``complete`` whether the logs were compared to their
    ends (or to the divergence), and ``same`` is true when they were and are equal.
    """
    left, right = await run_info(service, a), await run_info(service, b)
    return (await compare(service, left, right)).to_dict()
