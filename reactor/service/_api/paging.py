"""``GET /api/runs/{id}`` and ``GET /api/runs/{id}/signals``: a run read in pages.

A run's answer is its row (info, state), its open questions and timers, and the tail
of its log: the last :data:`~reactor.service._api.reads.TAIL` signals, with the
``before`` cursor to page back from. ``/signals`` pages the log either way, 1 to
1,000 signals a page, filtered by names or patterns. Neither ever reads a whole log
(:mod:`reactor.service._api.reads`): a run of 100,000 signals answers as fast as a
run of ten.

Cursors are ``seq`` numbers: ``after`` (the last signal of a page) gets the page after
it, ``before`` (the first) the page before it; ``before`` is ``null`` when nothing
comes before the page.
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

import fastapi

from reactor._recording.store import PAGE
from reactor._signals.patterns import Pattern, compile_pattern
from reactor._signals.signal import Signal, iso_time
from reactor.exceptions import PatternError, RunNotFoundError
from reactor.service._api.base import CHECKS, MAX_CURSOR, VIEWS, ApiError, Service
from reactor.service._api.reads import (
    TAIL,
    earlier,
    pending_prompts,
    questions,
    run_info,
    store_of,
    tail,
    timers,
)
from reactor.service._api.resumes import with_blocks
from reactor.service._hosting.service import ReactionService
from reactor.service._objects.replies import PromptReplies

__all__ = ["open_prompts", "router"]

router = fastapi.APIRouter(tags=["runs"], dependencies=CHECKS)

MAX_NAMES = 32
"""Names and patterns a page may be filtered by at most."""


async def open_prompts(
    service: ReactionService, run_id: str, signals: list[Signal]
) -> list[dict[str, Any]]:
    """The pending prompts, less those whose reply is decided and on its way to the run."""
    prompts = pending_prompts(signals)
    decided = await PromptReplies(service.db).of_run(run_id, [p["prompt_id"] for p in prompts])
    return [prompt for prompt in prompts if prompt["prompt_id"] not in decided]


@router.get("/{run_id}", dependencies=[VIEWS])
async def get_run(run_id: str, service: Service) -> dict[str, Any]:
    """A run: its info, its state, its pending prompts and timers, and its last 200 signals.

    ``signals`` are the tail of the log, in ``seq`` order; ``before`` is the cursor of
    the page before them (``GET /api/runs/{id}/signals?before=...``), ``null`` when
    they begin with the run's first signal. A run in the job queue has no log yet.
    """
    info = await run_info(service, run_id)
    [shown] = await with_blocks(service, [info])
    answer: dict[str, Any] = {
        "info": {**shown.to_dict(), "live": run_id in service.live},
        "state": {},
        "prompts": [],
        "timers": [],
        "signals": [],
        "before": None,
    }
    if info.status == "queued":  # in the job queue: no log yet
        return answer
    store = store_of(service)
    asked = await questions(service, run_id)
    if run_id in service.live:  # the writer may have caught up for the questions: read again
        info = await asyncio.to_thread(store.info, run_id)
        [shown] = await with_blocks(service, [info])
        answer["info"] = {**shown.to_dict(), "live": run_id in service.live}
    signals, before = await tail(service, info)
    answer.update(
        state=await asyncio.to_thread(store.state, run_id),
        prompts=await open_prompts(service, run_id, asked),
        timers=[
            {"timer_id": timer.timer_id, "agent": timer.agent, "until": iso_time(timer.until)}
            for timer in timers(info, asked)
        ],
        signals=[signal.to_dict() for signal in signals],
        before=before,
    )
    return answer


def _names(given: list[str] | None) -> list[Pattern] | None:
    """The names and patterns of ``names=`` (repeated, or comma-separated), checked."""
    if not given:
        return None
    names = [name.strip() for value in given for name in value.split(",") if name.strip()]
    if len(names) > MAX_NAMES:
        raise ApiError(422, f"names: at most {MAX_NAMES} names or patterns, got {len(names)}.")
    for name in names:
        try:
            compile_pattern(name)
        except PatternError as exc:
            raise ApiError(422, f"names: {exc}") from None
    return list(dict.fromkeys(names)) or None


After = Annotated[int, fastapi.Query(ge=0, le=MAX_CURSOR, description="signals after this seq")]
Before = Annotated[
    int | None, fastapi.Query(ge=1, le=MAX_CURSOR, description="signals before this seq")
]
Limit = Annotated[int, fastapi.Query(ge=1, le=PAGE, description="signals at most (1 to 1,000)")]
Names = Annotated[
    list[str] | None,
    fastapi.Query(
        description="names or patterns (agent:*:completed, harness:**): repeat "
        "it, or separate them with commas"
    ),
]


@router.get("/{run_id}/signals", dependencies=[VIEWS])
async def signals_page(
    run_id: str,
    service: Service,
    after: After = 0,
    before: Before = None,
    limit: Limit = TAIL,
    names: Names = None,
) -> dict[str, Any]:
    """One page of the run's log, in ``seq`` order.

    Without ``before``: the first ``limit`` signals after ``after`` (paging forward).
    With ``before``: the last ``limit`` signals between ``after`` and ``before``
    (paging back; the tail is ``before`` = ``info.last_seq + 1``). ``names`` keeps the
    signals with these names or matching these patterns.

    Answers ``{"signals": [...], "after": ..., "before": ...}``: ``after`` is the seq
    of the last signal of the page (the ``after`` given when it is empty), to pass as
    ``after`` for the next page; ``before`` the seq of the first, to pass as
    ``before`` for the page before it, ``null`` when nothing comes before it. Paging
    forward, a page shorter than ``limit`` is the end of what is recorded so far.
    """
    if before is not None and before <= after:
        raise ApiError(422, f"before ({before}) must be greater than after ({after}).")
    chosen = _names(names)
    store = store_of(service)
    try:
        page = await asyncio.to_thread(
            store.signals, run_id, after=after, before=before, limit=limit, names=chosen
        )
    except RunNotFoundError:
        await run_info(service, run_id)  # a queued run has an empty log; else 404
        page = []
    return {
        "signals": [signal.to_dict() for signal in page],
        "after": page[-1].seq if page else after,
        "before": earlier(page, limit, after=after, backward=before is not None),
    }
