"""The runs pages: the list (``/runs``), a run (``/runs/{run_id}``), and its forms.

The list refreshes itself from ``/runs/rows`` (the table's rows alone); neither reads a
run's log (the counters of each run's row, and a label from its first signal). A run's
page shows its input (from its first signal) and tags at the top, then the tail of its
log as recorded when the page was made (its last 200 signals; "Show earlier signals"
fetches the page before them from ``/runs/{run_id}/signals?before=``), then follows it
over Server-Sent Events (``/runs/{run_id}/events``, the API's stream behind the session
cookie): the script adds each signal to the timeline and fetches
``/runs/{run_id}/details`` (the status, prompts, metrics, causal tree and state: see
:mod:`._window`) as they change. The forms go through the same functions as the API: a
reply, a signal, an abort are the signed-in user's.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Mapping
from typing import Annotated, Any

import fastapi
from starlette.requests import Request
from starlette.responses import Response

from reactor._recording.info import RunInfo
from reactor._signals.names import HARNESS_START
from reactor.exceptions import ReactorError, RunNotFoundError
from reactor.service._api.base import MAX_CURSOR, ApiError
from reactor.service._api.follow import known_run
from reactor.service._api.reads import pending_prompts, questions, run_info, store_of
from reactor.service._api.runs import abort_run, listed_runs, post_signal, reply
from reactor.service._api.stream import event_stream
from reactor.service._hosting.service import ReactionService
from reactor.service.web._render import Operating, Viewing, back, page, service_of
from reactor.service.web._summary import shown
from reactor.service.web._window import Window, details, earlier_page, labels, tail_window

__all__ = ["STATUSES", "router"]

router = fastapi.APIRouter(include_in_schema=False)

STATUSES = (
    "queued",
    "running",
    "waiting",
    "blocked",
    "completed",
    "ended",
    "failed",
    "aborted",
    "timeout",
)
"""The statuses the list filters by."""
LISTED = 100
"""Runs the list shows at most (newest first)."""


def _problem(exc: Exception) -> str:
    return exc.detail if isinstance(exc, ApiError) else str(exc)


async def _rows(
    request: Request, graph: str | None, status: str | None, tag: str | None
) -> list[dict[str, Any]]:
    service = service_of(request)
    if service.record is None:
        return []
    infos = await listed_runs(
        service, graph=graph or None, status=status or None, tag=tag or None, limit=LISTED
    )
    named = await labels(request, infos)
    rows = []
    for info in infos:
        end = info.ended_at if info.ended_at is not None else time.time()
        rows.append(
            {
                "info": info,
                "duration": max(0.0, end - info.started_at) if info.started_at else None,
                "tokens": info.input_tokens + info.output_tokens,
                "cost": info.cost_usd,
                "label": named[info.run_id],
                "by": info.tags.get("user"),
                "live": info.run_id in service.live,
            }
        )
    return rows


def _graphs(service: ReactionService, chosen: str | None) -> list[str]:
    names = set(service.runs.graphs) | set(service.catalog.agents)
    return sorted(names | ({chosen} if chosen else set()))


Filter = Annotated[str | None, fastapi.Query()]


@router.get("/runs")
async def runs(
    request: Request,
    session: Viewing,
    graph: Filter = None,
    status: Filter = None,
    tag: Filter = None,
) -> Response:
    """The runs, newest first, filtered by graph, status and tag (``key`` or ``key=value``)."""
    status = None if status == "any" else status  # the filter's own "any" is ""
    return page(
        request,
        "runs.html",
        session,
        rows=await _rows(request, graph, status, tag),
        graphs=_graphs(service_of(request), graph),
        statuses=STATUSES,
        graph=graph or "",
        status=status or "",
        tag=tag or "",
        filtered=bool(graph or status or tag),
    )


@router.get("/runs/rows")
async def run_rows(
    request: Request,
    session: Viewing,
    graph: Filter = None,
    status: Filter = None,
    tag: Filter = None,
) -> Response:
    """The rows of the list alone, for the script that keeps it up to date."""
    status = None if status == "any" else status
    rows = await _rows(request, graph, status, tag)
    filtered = bool(graph or status or tag)
    return page(request, "run_rows.html", session, fragment=True, rows=rows, filtered=filtered)


async def _recording(request: Request, run_id: str) -> RunInfo | None:
    """The run's row (``None`` when there is no such run): its log is not read."""
    try:
        return await run_info(service_of(request), run_id)
    except (ApiError, ReactorError):
        return None


async def _input(request: Request, info: RunInfo) -> tuple[bool, Any]:
    """Whether the run has begun, and its input (from its first signal, ``harness:start``).

    The page shows it above everything else: ``harness:start`` itself is mostly its
    agents' fingerprints.
    """
    if info.status == "queued":  # in the job queue: no log yet
        return False, None
    store = store_of(service_of(request))
    try:
        first = await asyncio.to_thread(store.signals, info.run_id, limit=1)
    except LookupError:  # deleted (or pruned) since its row was read
        return False, None
    if not first or first[0].name != HARNESS_START:
        return False, None
    payload = first[0].payload
    return True, payload.get("input") if isinstance(payload, Mapping) else None


At = Annotated[int | None, fastapi.Query(ge=0, le=MAX_CURSOR)]


def _timeline(window: Window) -> list[Any]:
    return [signal for signal in window.signals if shown(signal)]


@router.get("/runs/{run_id}")
async def run(request: Request, run_id: str, session: Viewing, at: At = None) -> Response:
    """A run: its input and tags, timeline (its log's tail), status, prompts and state."""
    info = await _recording(request, run_id)
    if info is None:
        return page(request, "missing.html", session, 404, what=f"run {run_id}")
    window = await tail_window(request, info)
    shown_details = await details(request, info, window, at)
    begun, given = await _input(request, info)
    return page(
        request,
        "run.html",
        session,
        begun=begun,
        given=given,
        timeline=_timeline(window),
        before=window.before,
        reacted=(await labels(request, [info]))[run_id],  # a reaction's: its object
        **shown_details,
    )


@router.get("/runs/{run_id}/details")
async def run_details(request: Request, run_id: str, session: Viewing, at: At = None) -> Response:
    """The parts of a run's page that change as it goes, for the page's script."""
    info = await _recording(request, run_id)
    if info is None:
        return page(request, "missing.html", session, 404, what=f"run {run_id}")
    window = await tail_window(request, info)
    shown_details = await details(request, info, window, at)
    return page(request, "run_details.html", session, fragment=True, **shown_details)


Before = Annotated[int, fastapi.Query(ge=1)]


@router.get("/runs/{run_id}/signals")
async def run_signals(request: Request, run_id: str, session: Viewing, before: Before) -> Response:
    """The signals of the timeline before ``seq`` ``before``: the page's "Show earlier"."""
    info = await _recording(request, run_id)
    if info is None or info.status == "queued":
        return page(request, "missing.html", session, 404, what=f"run {run_id}")
    window = await earlier_page(request, run_id, before)
    return page(
        request,
        "run_signals.html",
        session,
        fragment=True,
        run_id=run_id,
        timeline=_timeline(window),
        earlier=window.before,
    )


@router.get("/runs/{run_id}/events")
async def run_events(request: Request, run_id: str, session: Viewing, after: At = None) -> Response:
    """The run's signals after ``seq`` ``after`` as Server-Sent Events, until it ends.

    The stream is the API's (bounded, under the same cap); whether the run exists is
    asked of the store's counters, its log is not read.
    """
    if not await known_run(service_of(request), run_id):
        return Response(f"There is no run {run_id}.", 404, media_type="text/plain")
    last = request.headers.get("last-event-id", "")
    start = int(last) if last.isdigit() and int(last) <= MAX_CURSOR else after or 0
    return event_stream(request, run_id, start, who=session.principal.id)


Field = Annotated[str, fastapi.Form()]


@router.post("/runs/{run_id}/reply")
async def reply_form(
    request: Request, run_id: str, session: Operating, prompt_id: Field, answer: Field = ""
) -> Response:
    """Answer a pending prompt (a JSON object when the prompt has a schema).

    A prompt with choices takes one of them: a form sent without a choice is refused
    (nothing is sent to the run), so no answer is ever given by default.
    """
    service = service_of(request)
    try:
        try:
            asked = pending_prompts(await questions(service, run_id))
        except RunNotFoundError:  # queued, no log yet: reply() says what is wrong
            asked = []
        prompt = next((p for p in asked if p["prompt_id"] == prompt_id), {})
        if prompt.get("choices") and not answer:
            session.notify("error", "Choose an answer before replying; nothing was sent.")
            return back(request, f"/runs/{run_id}")
        try:
            given: Any = json.loads(answer) if prompt.get("schema") is not None else answer
        except ValueError:
            notice = 'This prompt asks for a JSON object; write one, e.g. {"ok": true}.'
            session.notify("error", notice)
            return back(request, f"/runs/{run_id}")
        await reply(service, run_id, prompt_id, given, session.user)
    except (ApiError, ReactorError) as exc:
        session.notify("error", _problem(exc))
    else:
        session.notify("ok", "Your answer was sent; the run takes it within moments.")
    return back(request, f"/runs/{run_id}")


@router.post("/runs/{run_id}/signals")
async def signal_form(
    request: Request, run_id: str, session: Operating, name: Field, payload: Field = ""
) -> Response:
    """Send a signal to a run (its payload is JSON, or empty for none).

    A payload that is not JSON and a name the run refuses are each said as such.
    """
    try:
        data = json.loads(payload) if payload.strip() else None
    except ValueError:
        session.notify("error", 'The payload is not JSON; write e.g. {"n": 1} or leave it empty.')
        return back(request, f"/runs/{run_id}")
    try:
        await post_signal(service_of(request), run_id, name.strip(), data, session.user)
    except (ApiError, ReactorError) as exc:
        session.notify("error", _problem(exc))
    else:
        session.notify("ok", f"Signal {name.strip()} was sent.")
    return back(request, f"/runs/{run_id}")


@router.post("/runs/{run_id}/abort")
async def abort_form(
    request: Request, run_id: str, session: Operating, reason: Field = ""
) -> Response:
    """Stop a run (where it executes: here at once, elsewhere within moments)."""
    why = reason.strip() or f"aborted by {session.user.id} in the web UI"
    try:
        posted = await abort_run(service_of(request), run_id, why, session.user)
    except (ApiError, ReactorError) as exc:
        session.notify("error", _problem(exc))
    else:
        done = "The run was stopped." if posted is None else "The run was asked to stop."
        session.notify("ok", done)
    return back(request, f"/runs/{run_id}")
