"""The runs pages: the list (``/runs``), a run (``/runs/{run_id}``), and its forms.

The list refreshes itself from ``/runs/rows`` (the table's rows alone). A run's page
shows its log as recorded when the page was made, then follows it over Server-Sent
Events (``/runs/{run_id}/events``, the API's stream behind the session cookie): the
script adds each signal to the timeline and fetches ``/runs/{run_id}/details`` (the
status, prompts, metrics, causal tree and state) as they change. The forms go through
the same functions as the API: a reply, a signal, an abort are the signed-in user's.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Annotated, Any

import fastapi
from starlette.requests import Request
from starlette.responses import Response

from reactor._recording.inbox import Posted
from reactor._recording.info import pending_timers
from reactor._recording.recording import Recording
from reactor._signals.names import HARNESS_FORKED
from reactor.exceptions import ReactorError
from reactor.service._api.base import ApiError
from reactor.service._api.follow import known_run
from reactor.service._api.resumes import with_blocks
from reactor.service._api.runs import (
    abort_run,
    listed_runs,
    load_run,
    pending_prompts,
    post_signal,
    reply,
)
from reactor.service._api.stream import event_stream
from reactor.service._hosting.service import ReactionService
from reactor.service.web._graphs import run_drawing
from reactor.service.web._render import Checked, SignedIn, back, page, service_of, web_of
from reactor.service.web._summary import (
    active_agents,
    agent_metrics,
    answered_prompts,
    causal_tree,
    label,
    shown,
    totals,
)

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
REMEMBERED = 10_000
"""Ended runs whose tokens and cost the list keeps rather than reading their log again."""


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
    known = web_of(request).totals
    rows = []
    for info in infos:
        counted = known.get(info.run_id)
        if counted is None:
            try:
                recording = await load_run(service, info.run_id)
                counted = (*totals(recording.signals), label(info.tags, recording.input))
            except ReactorError:
                counted = (0, None, label(info.tags, None))
            if info.complete:
                if len(known) >= REMEMBERED:
                    del known[next(iter(known))]
                known[info.run_id] = counted
        end = info.ended_at if info.ended_at is not None else time.time()
        rows.append(
            {
                "info": info,
                "duration": max(0.0, end - info.started_at) if info.started_at else None,
                "tokens": counted[0],
                "cost": counted[1],
                "label": counted[2],
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
    session: SignedIn,
    graph: Filter = None,
    status: Filter = None,
    tag: Filter = None,
) -> Response:
    """The runs, newest first, filtered by graph, status and tag (``key`` or ``key=value``)."""
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
    session: SignedIn,
    graph: Filter = None,
    status: Filter = None,
    tag: Filter = None,
) -> Response:
    """The rows of the list alone, for the script that keeps it up to date."""
    rows = await _rows(request, graph, status, tag)
    filtered = bool(graph or status or tag)
    return page(request, "run_rows.html", session, fragment=True, rows=rows, filtered=filtered)


async def _details(request: Request, recording: Recording, at: int | None) -> dict[str, Any]:
    signals = recording.signals
    last = signals[-1].seq if signals else 0
    chosen = at if at is not None and 0 < at <= last else last
    prompts = pending_prompts(signals)
    [info] = await with_blocks(service_of(request), [recording.info])
    forked = next((s for s in signals if s.name == HARNESS_FORKED), None)
    end = info.ended_at if info.ended_at is not None else time.time()
    tokens, cost = totals(signals)
    return {
        "run_id": recording.run_id,
        "info": info,
        "forked_at": forked.payload.get("at") if forked is not None else None,
        "duration": max(0.0, end - info.started_at) if info.started_at else None,
        "tokens": tokens,
        "cost": cost,
        "live": recording.run_id in service_of(request).live,
        "prompts": prompts,
        "prompts_key": ",".join(p["prompt_id"] for p in prompts) + f";{info.complete}",
        "timers": [] if info.complete else pending_timers(signals),
        "scheduled": [] if info.complete else await _scheduled(request, recording.run_id),
        "answered": answered_prompts(signals),
        "metrics": agent_metrics(signals),
        "drawing": run_drawing(request, info),
        "active": active_agents(signals),
        "tree": causal_tree(signals),
        "at": chosen,
        "last": last,
        "state": recording.state_at(chosen) if signals else {},
    }


async def _scheduled(request: Request, run_id: str) -> list[Posted]:
    """The messages posted to the run for later, not due yet."""
    record = service_of(request).record
    if record is None:
        return []
    return await asyncio.to_thread(record.scheduled, [run_id])


async def _recording(request: Request, run_id: str) -> Recording | None:
    try:
        return await load_run(service_of(request), run_id)
    except (ApiError, ReactorError):
        return None


At = Annotated[int | None, fastapi.Query(ge=0)]


@router.get("/runs/{run_id}")
async def run(request: Request, run_id: str, session: SignedIn, at: At = None) -> Response:
    """A run: its timeline, status, prompts, metrics, causal tree and state."""
    recording = await _recording(request, run_id)
    if recording is None:
        return page(request, "missing.html", session, 404, what=f"run {run_id}")
    timeline = [signal for signal in recording.signals if shown(signal)]
    details = await _details(request, recording, at)
    return page(request, "run.html", session, timeline=timeline, **details)


@router.get("/runs/{run_id}/details")
async def run_details(request: Request, run_id: str, session: SignedIn, at: At = None) -> Response:
    """The parts of a run's page that change as it goes, for the page's script."""
    recording = await _recording(request, run_id)
    if recording is None:
        return page(request, "missing.html", session, 404, what=f"run {run_id}")
    details = await _details(request, recording, at)
    return page(request, "run_details.html", session, fragment=True, **details)


@router.get("/runs/{run_id}/events")
async def run_events(
    request: Request, run_id: str, session: SignedIn, after: At = None
) -> Response:
    """The run's signals after ``seq`` ``after`` as Server-Sent Events, until it ends.

    The stream is the API's (bounded, under the same cap); whether the run exists is
    asked of the store's counters, its log is not read.
    """
    if not await known_run(service_of(request), run_id):
        return Response(f"There is no run {run_id}.", 404, media_type="text/plain")
    last = request.headers.get("last-event-id", "")
    start = int(last) if last.isdigit() else after or 0
    return event_stream(request, run_id, start)


Field = Annotated[str, fastapi.Form()]


@router.post("/runs/{run_id}/reply")
async def reply_form(
    request: Request, run_id: str, session: Checked, prompt_id: Field, answer: Field = ""
) -> Response:
    """Answer a pending prompt (a JSON object when the prompt has a schema).

    A prompt with choices takes one of them: a form sent without a choice is refused
    (nothing is sent to the run), so no answer is ever given by default.
    """
    service = service_of(request)
    try:
        recording = await load_run(service, run_id)
        prompt = next(
            (p for p in pending_prompts(recording.signals) if p["prompt_id"] == prompt_id), {}
        )
        if prompt.get("choices") and not answer:
            session.notify("error", "Choose an answer before replying; nothing was sent.")
            return back(request, f"/runs/{run_id}")
        given: Any = json.loads(answer) if prompt.get("schema") is not None else answer
        await reply(service, run_id, prompt_id, given, session.user)
    except ValueError:
        session.notify("error", 'This prompt asks for a JSON object; write one, e.g. {"ok": true}.')
    except (ApiError, ReactorError) as exc:
        session.notify("error", _problem(exc))
    else:
        session.notify("ok", "Your answer was sent; the run takes it within moments.")
    return back(request, f"/runs/{run_id}")


@router.post("/runs/{run_id}/signals")
async def signal_form(
    request: Request, run_id: str, session: Checked, name: Field, payload: Field = ""
) -> Response:
    """Send a signal to a run (its payload is JSON, or empty for none)."""
    try:
        data = json.loads(payload) if payload.strip() else None
        await post_signal(service_of(request), run_id, name.strip(), data, session.user)
    except ValueError:
        session.notify("error", 'The payload is not JSON; write e.g. {"n": 1} or leave it empty.')
    except (ApiError, ReactorError) as exc:
        session.notify("error", _problem(exc))
    else:
        session.notify("ok", f"Signal {name.strip()} was sent.")
    return back(request, f"/runs/{run_id}")


@router.post("/runs/{run_id}/abort")
async def abort_form(
    request: Request, run_id: str, session: Checked, reason: Field = ""
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
