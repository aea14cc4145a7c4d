"""What the API and the web UI read of a run: its row, pages of its log, never the whole log.

A run's log grows without bound (a run of 100,000 signals is some 57 MB of JSON), so
nothing that answers a request reads it whole. What a request needs comes from the
run's row (:meth:`~reactor.SignalStore.info`: status, counters; ``state``: its latest
state) and from pages of its log (:meth:`~reactor.SignalStore.signals`): its tail,
its questions and timers (found through the store's partial index of them), and the
state at a signal (from the latest ``harness:snapshot`` before it, and the state
changes after that).

The store's writer may be a batch behind a run executing in this process: a question
the run has just asked can be on its event stream before it is in the store. The run's
feed knows which questions are open (:attr:`RunFeed.asking`), so a read that misses
one of them makes the writer catch up (a flush, off the loop) and reads again.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

from reactor._recording.info import PendingTimer, RunInfo, pending_timers
from reactor._recording.seals import sound
from reactor._recording.store import PAGE, SignalStore
from reactor._signals.names import (
    HARNESS_END,
    HARNESS_ENDING,
    HARNESS_FORKED,
    HARNESS_SNAPSHOT,
    HARNESS_START,
    SESSION_PROMPT,
    SESSION_REPLY,
    SESSION_TIMEOUT,
    TIMER_FIRED,
    TIMER_SET,
    state_event,
)
from reactor._signals.patterns import Pattern
from reactor._signals.signal import Signal, to_jsonable
from reactor.exceptions import RunNotFoundError
from reactor.service._api.base import ApiError
from reactor.service._hosting.service import ReactionService

__all__ = [
    "QUESTIONS",
    "TAIL",
    "earlier",
    "ending_seq",
    "every",
    "first_signal",
    "forked_at",
    "pending_prompts",
    "questions",
    "run_info",
    "state_at",
    "store_of",
    "tail",
    "timers",
]

TAIL = 200
"""Signals of a run's tail: what ``GET /api/runs/{id}`` and a run's page show at first."""
QUESTIONS = (SESSION_PROMPT, SESSION_REPLY, SESSION_TIMEOUT, TIMER_SET, TIMER_FIRED)
"""The signals of questions and timers: a store finds them through an index."""
SLACK = 64
"""How far past the signal it was taken after a snapshot may come (it is queued behind
what was emitted): a search for the snapshot of a signal starts that far past it."""
_CHANGED = state_event("*", "changed")


def store_of(service: ReactionService) -> SignalStore:
    """The service's signal store (503 while the service is not running)."""
    if service.record is None:
        raise ApiError(503, "The service is not running; start it first.")
    return service.record


async def run_info(service: ReactionService, run_id: str) -> RunInfo:
    """The run's row: what the store knows of it, counters included (no log read).

    The writer may be behind a run executing here: one that began a moment ago may
    not be written yet, one whose end its followers have seen may not be written
    ended. Then the writer catches up, and the row is read again (a run that ended
    takes no more input, and says so at once). A run in the job queue that no worker
    has started has no row: it is its queued info (status ``queued``).

    Raises:
        RunNotFoundError: No such run (404).
    """
    store = store_of(service)
    live = service.live.get(run_id)
    try:
        info = await asyncio.to_thread(store.info, run_id)
    except RunNotFoundError:
        if live is not None:
            await asyncio.to_thread(store.flush)
            return await asyncio.to_thread(store.info, run_id)
        queued = await service.host.queued(run_id)
        if queued is None:
            raise
        return queued
    if live is not None and live.feed.ended and not info.complete:
        await asyncio.to_thread(store.flush)
        info = await asyncio.to_thread(store.info, run_id)
    return info


def every(store: SignalStore, run_id: str, names: Collection[Pattern]) -> list[Signal]:
    """Every signal of the run with these names, in ``seq`` order, read page by page.

    Blocking (call it off the loop). Meant for signals an index finds (questions,
    timers) or that are few; a run has as many of them as it asked.
    """
    found: list[Signal] = []
    after = 0
    while True:
        page = store.signals(run_id, after=after, limit=PAGE, names=names)
        found += page
        if len(page) < PAGE:
            return found
        after = page[-1].seq


async def questions(service: ReactionService, run_id: str, *, fresh: bool = False) -> list[Signal]:
    """The run's prompts, replies, timeouts and timers, in ``seq`` order (see the module).

    For a run executing here whose feed knows an open question the store does not
    show yet (or with ``fresh``), the writer catches up first.
    """
    store = store_of(service)
    found = await asyncio.to_thread(every, store, run_id, QUESTIONS)
    live = service.live.get(run_id)
    if live is not None and (fresh or not set(live.feed.asking) <= _opened(found)):
        await asyncio.to_thread(store.flush)
        found = await asyncio.to_thread(every, store, run_id, QUESTIONS)
    return found


def _opened(signals: Iterable[Signal]) -> set[Any]:
    """The ids of the prompts asked and the timers set among ``signals``."""
    ids: set[Any] = set()
    for signal in signals:
        payload = signal.payload if isinstance(signal.payload, Mapping) else {}
        if signal.name == SESSION_PROMPT:
            ids.add(payload.get("prompt_id"))
        elif signal.name == TIMER_SET:
            ids.add(payload.get("timer_id"))
    return ids


def pending_prompts(
    signals: Iterable[Signal], *, keep_answered: bool = False
) -> list[dict[str, Any]]:
    """The prompts the log shows asked and not yet answered, in asking order.

    With ``keep_answered``, every prompt asked (answered ones too).
    """
    pending: dict[str, dict[str, Any]] = {}
    for signal in signals:
        payload = signal.payload if isinstance(signal.payload, Mapping) else {}
        prompt_id = payload.get("prompt_id")
        if signal.name == SESSION_PROMPT and isinstance(prompt_id, str):
            pending[prompt_id] = {**payload, "asked_at": signal.to_dict()["timestamp"]}
        elif signal.name in (SESSION_REPLY, SESSION_TIMEOUT) and not keep_answered:
            pending.pop(str(prompt_id), None)
    return list(pending.values())


def timers(info: RunInfo, signals: Iterable[Signal]) -> list[PendingTimer]:
    """The timers set and not fired among the run's questions (none once it has ended)."""
    return [] if info.complete else pending_timers(signals)


async def tail(
    service: ReactionService, info: RunInfo, limit: int = TAIL
) -> tuple[list[Signal], int | None]:
    """The run's last ``limit`` signals up to ``info.last_seq``, and the cursor before them.

    The cursor is the ``seq`` to page back from (``before=``), ``None`` when the
    signals begin with the run's first.
    """
    if info.last_seq < 1:
        return [], None
    store = store_of(service)
    page = await asyncio.to_thread(
        store.signals, info.run_id, before=info.last_seq + 1, limit=limit
    )
    return page, earlier(page, limit, after=0, backward=True)


def earlier(page: Sequence[Signal], limit: int, *, after: int, backward: bool) -> int | None:
    """The cursor of the page before ``page`` (its first ``seq``); ``None`` when none is.

    Paging back (``backward``), a page shorter than ``limit``, or one that begins right
    after ``after``, has nothing before it. Paging forward, only a page from the start
    (``after`` 0) has nothing before it; an empty page's cursor is ``after + 1``.
    """
    if backward:
        if len(page) < limit or page[0].seq <= after + 1:
            return None
        return page[0].seq
    if after == 0:
        return None
    return page[0].seq if page else after + 1


def first_signal(store: SignalStore, run_id: str, name: str) -> Signal | None:
    """The run's first signal named ``name`` (blocking; for signals early in a log)."""
    found = store.signals(run_id, limit=1, names=(name,))
    return found[0] if found else None


def forked_at(store: SignalStore, info: RunInfo) -> int | None:
    """The signal of its source a forked run began after (``None`` for other runs)."""
    if info.forked_from is None:
        return None
    forked = first_signal(store, info.run_id, HARNESS_FORKED)
    payload = forked.payload if forked is not None else None
    at = payload.get("at") if isinstance(payload, Mapping) else None
    return at if isinstance(at, int) else None


def ending_seq(store: SignalStore, info: RunInfo) -> int:
    """Where an ended run began to end (its ``harness:ending``, else ``harness:end``); 0 if open.

    Read back from the end of the log, where these signals are.
    """
    if not info.complete:
        return 0
    names = (HARNESS_ENDING, HARNESS_END)
    found = store.signals(info.run_id, before=info.last_seq + 1, limit=8, names=names)
    return found[0].seq if found else 0


def state_at(store: SignalStore, run_id: str, seq: int) -> dict[str, Any]:
    """The run's state right after signal ``seq``, as :meth:`reactor.Recording.state_at` says.

    From the latest sound ``harness:snapshot`` taken at or before ``seq`` (else the
    state in ``harness:start``), with the ``new`` value of every ``state:<key>:changed``
    after it, up to ``seq``: pages read, never the whole log. A snapshot that fails its
    check (changed since it was taken) is skipped, with a warning. Blocking.
    """
    snapshot = _snapshot(store, run_id, seq)
    if snapshot is not None:
        initial, after = snapshot.payload["state"], int(snapshot.payload["seq"])
    else:
        start = first_signal(store, run_id, HARNESS_START)
        payload = start.payload if start is not None else None
        initial = payload.get("state") if isinstance(payload, Mapping) else None
        after = 0
    state: dict[str, Any] = copy.deepcopy(to_jsonable(initial or {}))
    while after < seq:
        page = store.signals(run_id, after=after, before=seq + 1, limit=PAGE, names=(_CHANGED,))
        for signal in page:
            payload = signal.payload
            if isinstance(payload, Mapping) and "key" in payload:
                state[payload["key"]] = copy.deepcopy(to_jsonable(payload.get("new")))
        if len(page) < PAGE:
            break
        after = page[-1].seq
    return state


def _snapshot(store: SignalStore, run_id: str, seq: int) -> Signal | None:
    """The latest sound ``harness:snapshot`` holding the run as it was at ``seq`` or before."""
    before = seq + SLACK + 1
    while True:
        page = store.signals(run_id, before=before, limit=8, names=(HARNESS_SNAPSHOT,))
        for snapshot in reversed(page):
            payload = snapshot.payload
            covered = payload.get("seq") if isinstance(payload, Mapping) else None
            if snapshot.seq > seq and (not isinstance(covered, int) or covered > seq):
                continue  # after ``seq`` in the log, and not holding the run at ``seq``
            if sound(snapshot):
                return snapshot
        if len(page) < 8:
            return None
        before = page[0].seq
