"""Two runs side by side (``/runs/{a}/compare/{b}``), and an evaluation's cases (``/evals/{id}``).

The comparison is :mod:`reactor.service._api.compare`'s, as ``GET /api/runs/{a}/compare/{b}``
answers it: the runs' rows, inputs and final states, and the first divergence of their
logs, found a page at a time (never a whole log) off the event loop. An evaluation
(``graph.evaluate(runs, store=...)``) records each new run with the tags ``eval=<id>``
and ``eval_of=<recorded run>``: its page lists those runs (the rows of the store's
listing, and the row of each recorded run), each with a link to its comparison; a new
run's page links to it too.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence

import fastapi
from starlette.requests import Request
from starlette.responses import Response

from reactor._recording.info import RunInfo
from reactor._recording.store import SignalStore
from reactor.exceptions import ReactorError, RunNotFoundError
from reactor.service._api.base import ApiError
from reactor.service._api.compare import CAP, compare
from reactor.service._api.reads import run_info, store_of
from reactor.service._api.runs import listed_runs
from reactor.service.web._render import Viewing, page, service_of

__all__ = ["CASES", "router"]

router = fastapi.APIRouter(include_in_schema=False)

CASES = 1_000
"""Cases an evaluation's page lists at most."""


@router.get("/runs/{a}/compare/{b}")
async def compare_page(request: Request, a: str, b: str, session: Viewing) -> Response:
    """Runs ``a`` and ``b`` side by side: their input, state, divergence, tokens and cost."""
    left, right = await _row(request, a), await _row(request, b)
    if left is None or right is None:
        missing = a if left is None else b
        return page(request, "missing.html", session, 404, what=f"run {missing}")
    try:
        comparison = await compare(service_of(request), left, right)
    except RunNotFoundError:  # deleted since its row was read
        return page(request, "missing.html", session, 404, what=f"run {a} or {b}")
    return page(
        request,
        "compare.html",
        session,
        comparison=comparison,
        left=comparison.left,
        right=comparison.right,
        divergence=comparison.divergence,
        cap=CAP,
        evaluated=right.tags.get("eval_of") == left.run_id,
    )


@router.get("/evals/{eval_id}")
async def evaluation(request: Request, eval_id: str, session: Viewing) -> Response:
    """An evaluation's cases: each recorded run, the new run, its status, and a comparison."""
    service = service_of(request)
    made = (
        []
        if service.record is None
        else await listed_runs(service, tag=f"eval={eval_id}", limit=CASES)
    )
    if not made:
        return page(request, "missing.html", session, 404, what=f"evaluation {eval_id}")
    made = sorted(made, key=lambda info: (info.started_at, info.run_id))
    wanted = [info.tags.get("eval_of", "") for info in made]
    recorded = await asyncio.to_thread(_rows, store_of(service), wanted)
    cases = [{"new": info, "old": recorded.get(wanted[i])} for i, info in enumerate(made)]
    statuses: dict[str, int] = {}
    for info in made:
        statuses[info.status or "running"] = statuses.get(info.status or "running", 0) + 1
    return page(
        request,
        "evaluation.html",
        session,
        eval_id=eval_id,
        cases=cases,
        statuses=statuses,
        more=len(made) >= CASES,
        tokens=(_tokens(recorded.values()), _tokens(made)),
        cost=(_cost(recorded.values()), _cost(made)),
    )


async def _row(request: Request, run_id: str) -> RunInfo | None:
    """The run's row (``None`` when there is no such run): its log is not read."""
    try:
        return await run_info(service_of(request), run_id)
    except (ApiError, ReactorError):
        return None


def _rows(store: SignalStore, run_ids: Sequence[str]) -> dict[str, RunInfo]:
    """The row of each run still recorded, by id (blocking: one row read each)."""
    found: dict[str, RunInfo] = {}
    for run_id in dict.fromkeys(run_ids):
        if not run_id:
            continue
        try:
            found[run_id] = store.info(run_id)
        except RunNotFoundError:  # deleted (or pruned) since it was evaluated
            continue
    return found


def _tokens(infos: Iterable[RunInfo]) -> int:
    return sum(info.input_tokens + info.output_tokens for info in infos)


def _cost(infos: Iterable[RunInfo]) -> float | None:
    total = 0.0
    for info in infos:
        if info.cost_usd is None:
            return None  # a price unknown: the total is unknown too
        total += info.cost_usd
    return total
