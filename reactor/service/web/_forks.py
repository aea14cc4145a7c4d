"""Forking a run from the web UI, and resuming a blocked one.

Each signal of a run's timeline has "Fork from here": a form with the state right after
that signal (rebuilt from the snapshot before it and the state changes after that,
never from the whole log), as JSON, to edit (it says what is wrong as you type, and
again when sent); sending it starts the fork through the same function as ``POST
/api/runs/{id}/fork`` and opens the new run, whose page names its source. A run the
service blocked (its graph changed what its log says was done) has "Resume anyway" on
its page.
"""

from __future__ import annotations

import asyncio
import json
from typing import Annotated, Any

import fastapi
from starlette.requests import Request
from starlette.responses import Response

from reactor.exceptions import ReactorError
from reactor.service._api.base import MAX_CURSOR, ApiError
from reactor.service._api.reads import run_info, state_at, store_of
from reactor.service._api.resumes import fork_run, resume_run
from reactor.service.web._render import Forking, Operating, back, page, service_of

__all__ = ["router"]

router = fastapi.APIRouter(include_in_schema=False)

At = Annotated[int, fastapi.Query(ge=1, le=MAX_CURSOR)]
Field = Annotated[str, fastapi.Form()]


async def _fork_page(
    request: Request,
    session: Any,
    run_id: str,
    at: int,
    given: str | None = None,
    problem: str | None = None,
    code: int = 200,
) -> Response:
    service = service_of(request)
    try:
        info = await run_info(service, run_id)
    except (ApiError, ReactorError):
        return page(request, "missing.html", session, 404, what=f"run {run_id}")
    if not 1 <= at <= info.last_seq:
        return page(request, "missing.html", session, 404, what=f"signal #{at} of run {run_id}")
    store = store_of(service)
    found = await asyncio.to_thread(store.signals, run_id, after=at - 1, limit=1)
    signal = found[0] if found and found[0].seq == at else None
    current = await asyncio.to_thread(state_at, store, run_id, at)
    state = json.dumps(current, indent=2, ensure_ascii=False, default=str)
    return page(
        request,
        "fork.html",
        session,
        code,
        run_id=run_id,
        at=at,
        signal=signal,
        graph=info.graph,
        given=state if given is None else given,
        problem=problem,
    )


@router.get("/runs/{run_id}/fork")
async def fork_form(request: Request, run_id: str, session: Forking, at: At) -> Response:
    """The form that forks a run at signal ``at``: the state there, to edit as JSON."""
    return await _fork_page(request, session, run_id, at)


@router.post("/runs/{run_id}/fork")
async def fork_submit(
    request: Request, run_id: str, session: Operating, at: Field, state: Field = ""
) -> Response:
    """Start the fork, then open the new run (what is wrong is shown, and nothing starts)."""
    try:
        seq = int(at)
    except ValueError:
        return await _fork_page(request, session, run_id, 1, state, "Choose a signal.", 422)
    try:
        given = json.loads(state) if state.strip() else {}
    except json.JSONDecodeError as exc:
        problem = (
            f"The state is not JSON ({exc.msg} at line {exc.lineno}, column {exc.colno}). "
            'Write a JSON object of keys and values, e.g. {"limit": 5}.'
        )
        return await _fork_page(request, session, run_id, seq, state, problem, 422)
    if not isinstance(given, dict):
        problem = 'The state must be a JSON object of keys and values, e.g. {"limit": 5}.'
        return await _fork_page(request, session, run_id, seq, state, problem, 422)
    try:
        store = store_of(service_of(request))
        current = await asyncio.to_thread(state_at, store, run_id, seq)
        changed = {key: value for key, value in given.items() if current.get(key, ...) != value}
        new_id = await fork_run(service_of(request), run_id, seq, changed, session.user)
    except ApiError as exc:
        return await _fork_page(request, session, run_id, seq, state, exc.detail, exc.status)
    except (ReactorError, ValueError) as exc:
        return await _fork_page(request, session, run_id, seq, state, str(exc), 422)
    session.notify("ok", f"Run {new_id} was forked from {run_id} at signal #{seq}.")
    return back(request, f"/runs/{new_id}")


@router.post("/runs/{run_id}/resume")
async def resume_form(request: Request, run_id: str, session: Operating) -> Response:
    """Resume a blocked run anyway (its graph changed what its log says was done)."""
    try:
        await resume_run(service_of(request), run_id, force=True, user=session.user)
    except ApiError as exc:
        session.notify("error", exc.detail)
    except ReactorError as exc:
        session.notify("error", str(exc))
    else:
        session.notify("ok", "The run was resumed on the code as it is now.")
    return back(request, f"/runs/{run_id}")
