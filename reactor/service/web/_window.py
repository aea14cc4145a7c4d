"""What a run's page shows without reading its log whole: its row, and a window of signals.

The page shows the tail of the log (the last :data:`~reactor.service._api.reads.TAIL`
signals) and brings the pages before it on demand (``/runs/{id}/signals?before=``).
Its details come from three reads, whatever the length of the log:

* the run's row: status, totals of tokens and cost (counters kept as it is written),
  its latest state (the state at an earlier signal is rebuilt from the snapshot
  before it);
* its questions and timers, read through the store's index of them: the prompts
  waiting for an answer, those answered and by whom, the timers pending;
* the window of signals shown: per-agent metrics, the causal tree and the agents
  active now are computed over it, and the page says so when the run has more.

The runs list shows each run's label (its tags, else its input): the input is in the
run's first signal, read once per run and remembered (it never changes).
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Mapping, Sequence
from typing import Any

from starlette.requests import Request

from reactor._recording.info import RunInfo
from reactor._recording.store import SignalStore
from reactor._signals.names import HARNESS_START
from reactor._signals.signal import Signal
from reactor.service._api.paging import open_prompts
from reactor.service._api.reads import (
    TAIL,
    earlier,
    forked_at,
    questions,
    state_at,
    store_of,
    tail,
    timers,
)
from reactor.service._api.resumes import with_blocks
from reactor.service.web._graphs import run_drawing
from reactor.service.web._render import service_of, web_of
from reactor.service.web._summary import (
    active_agents,
    agent_metrics,
    answered_prompts,
    causal_tree,
    label,
)

__all__ = ["REMEMBERED", "Window", "details", "earlier_page", "labels", "tail_window"]

REMEMBERED = 10_000
"""Runs whose label the list keeps (a label never changes; the oldest are forgotten)."""


@dataclasses.dataclass(frozen=True)
class Window:
    """Signals of a run's log shown on its page.

    Attributes:
        signals: The signals, in ``seq`` order.
        before: The cursor of the page before them (``None``: they begin the log).
    """

    signals: Sequence[Signal]
    before: int | None


async def tail_window(request: Request, info: RunInfo) -> Window:
    """The run's tail (none for a run still in the job queue: it has no log)."""
    if info.status == "queued":
        return Window((), None)
    signals, before = await tail(service_of(request), info)
    return Window(signals, before)


async def earlier_page(request: Request, run_id: str, before: int) -> Window:
    """The :data:`TAIL` signals before ``seq`` ``before``, and the cursor before them."""
    store = store_of(service_of(request))
    page = await asyncio.to_thread(store.signals, run_id, before=before, limit=TAIL)
    return Window(page, earlier(page, TAIL, after=0, backward=True))


async def details(
    request: Request, info: RunInfo, window: Window, at: int | None
) -> dict[str, Any]:
    """What the run's page shows besides its timeline (see the module)."""
    service = service_of(request)
    run_id = info.run_id
    [info] = await with_blocks(service, [info])
    last = info.last_seq
    chosen = at if at is not None and 0 < at <= last else last
    queued = info.status == "queued"
    asked = [] if queued else await questions(service, run_id)
    prompts = [] if queued else await open_prompts(service, run_id, asked)
    end = info.ended_at if info.ended_at is not None else time.time()
    signals = window.signals
    return {
        "run_id": run_id,
        "info": info,
        "forked_at": None if queued else await asyncio.to_thread(_forked_at, request, info),
        "duration": max(0.0, end - info.started_at) if info.started_at else None,
        "tokens": info.input_tokens + info.output_tokens,
        "cost": info.cost_usd,
        "live": run_id in service.live,
        "prompts": prompts,
        "prompts_key": ",".join(p["prompt_id"] for p in prompts) + f";{info.complete}",
        "timers": timers(info, asked),
        "scheduled": [] if info.complete or queued else await _scheduled(request, run_id),
        "answered": answered_prompts(asked),
        "metrics": agent_metrics(signals),
        "drawing": run_drawing(request, info),
        "active": set() if info.complete else active_agents(signals),
        "tree": causal_tree(signals),
        "window": len(signals),
        "partial": window.before is not None,
        "at": chosen,
        "last": last,
        "state": {} if queued or not last else await _state(request, run_id, chosen, last),
    }


def _forked_at(request: Request, info: RunInfo) -> int | None:
    return forked_at(store_of(service_of(request)), info)


async def _state(request: Request, run_id: str, at: int, last: int) -> dict[str, Any]:
    """The state right after signal ``at``: the row's for the last one, else rebuilt."""
    store: SignalStore = store_of(service_of(request))
    if at == last:
        return await asyncio.to_thread(store.state, run_id)
    return await asyncio.to_thread(state_at, store, run_id, at)


async def _scheduled(request: Request, run_id: str) -> list[Any]:
    """The messages posted to the run for later, not due yet."""
    store = store_of(service_of(request))
    return await asyncio.to_thread(store.scheduled, [run_id])


async def labels(request: Request, infos: Sequence[RunInfo]) -> dict[str, str]:
    """Each run's label: its tags, else its input (from its first signal, read once)."""
    known = web_of(request).labels
    missing = [info for info in infos if info.run_id not in known and info.status != "queued"]
    if missing:
        store = store_of(service_of(request))
        found = await asyncio.to_thread(_inputs, store, [info.run_id for info in missing])
        for info in missing:
            if info.run_id in found:
                if len(known) >= REMEMBERED:
                    del known[next(iter(known))]
                known[info.run_id] = label(info.tags, found[info.run_id])
    return {info.run_id: known.get(info.run_id) or label(info.tags, None) for info in infos}


def _inputs(store: SignalStore, run_ids: Sequence[str]) -> dict[str, Any]:
    """The input of each run whose first signal is written, by run id (blocking)."""
    found: dict[str, Any] = {}
    for run_id in run_ids:
        try:
            first = store.signals(run_id, limit=1)
        except LookupError:  # deleted (or pruned) since it was listed
            continue
        if first:
            payload = first[0].payload if first[0].name == HARNESS_START else None
            found[run_id] = payload.get("input") if isinstance(payload, Mapping) else None
    return found
