"""``/api/runs``: recorded runs, starting graphs, and commands to a run (signals, replies, abort).

Commands go through the run's durable inbox (``store.post``), so they reach it wherever
it executes: live in this process (within a poll interval), or when it is resumed. A
reply is checked against the prompts the log shows pending first: an unknown or
answered prompt is a 404, an answer outside the prompt's choices a 422.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from typing import Annotated, Any

import fastapi
import pydantic

from reactor._recording.info import RunInfo, matches_filters
from reactor._recording.recording import Recording
from reactor._recording.store import SignalStore
from reactor._signals.names import SESSION_ABORT, SESSION_PROMPT, SESSION_REPLY, SESSION_TIMEOUT
from reactor._signals.signal import Signal
from reactor.exceptions import RunNotFoundError
from reactor.service._api.agents import RunStarted
from reactor.service._api.base import ApiError, Caller, Service, authenticate
from reactor.service._hosting.service import ReactionService
from reactor.service._objects.values import User

__all__ = [
    "abort_run",
    "listed_runs",
    "load_run",
    "pending_prompts",
    "post_signal",
    "reply",
    "router",
]

router = fastapi.APIRouter(
    prefix="/api/runs", tags=["runs"], dependencies=[fastapi.Depends(authenticate)]
)


class StartRun(pydantic.BaseModel):
    """A registered graph to start, and its input."""

    model_config = pydantic.ConfigDict(extra="forbid")

    graph: str = pydantic.Field(min_length=1)
    input: Any = None


class SendSignal(pydantic.BaseModel):
    """A signal for a run (names of the runtime's namespaces are refused)."""

    model_config = pydantic.ConfigDict(extra="forbid")

    name: str = pydantic.Field(min_length=1)
    payload: Any = None


class Reply(pydantic.BaseModel):
    """The answer to a pending prompt."""

    model_config = pydantic.ConfigDict(extra="forbid")

    answer: Any


class Abort(pydantic.BaseModel):
    """Why the run is stopped."""

    reason: str = "aborted through the API"


class Posted(pydantic.BaseModel):
    """A message was queued in the run's inbox; the run takes it within moments."""

    message_id: str


class Aborted(pydantic.BaseModel):
    """The run was stopped, or (``message_id``) asked to stop where it executes."""

    run_id: str
    reason: str
    message_id: str | None = None


def _store(service: ReactionService) -> SignalStore:
    if service.record is None:
        raise ApiError(503, "The service is not running; start it first.")
    return service.record


async def load_run(service: ReactionService, run_id: str) -> Recording:
    """A recorded run (404 when there is none).

    A run in the job queue that no worker has started yet has no log: it is an empty
    recording whose status is ``queued`` (followed, answered and aborted like any
    other: what is posted to its inbox waits for it).
    """
    try:
        return await asyncio.to_thread(_store(service).load, run_id)
    except RunNotFoundError:
        queued = await service.host.queued(run_id)
        if queued is None:
            raise
        return Recording(queued, ())


def pending_prompts(signals: Iterable[Signal]) -> list[dict[str, Any]]:
    """The prompts the log shows asked and not yet answered, in asking order."""
    pending: dict[str, dict[str, Any]] = {}
    for signal in signals:
        payload = signal.payload if isinstance(signal.payload, Mapping) else {}
        prompt_id = payload.get("prompt_id")
        if signal.name == SESSION_PROMPT and isinstance(prompt_id, str):
            pending[prompt_id] = {**payload, "asked_at": signal.to_dict()["timestamp"]}
        elif signal.name in (SESSION_REPLY, SESSION_TIMEOUT):
            pending.pop(str(prompt_id), None)
    return list(pending.values())


async def _open_run(service: ReactionService, run_id: str) -> Recording:
    recording = await load_run(service, run_id)
    if recording.complete:
        raise ApiError(409, f"Run {run_id} has ended ({recording.status}); it takes no more input.")
    return recording


async def post_signal(
    service: ReactionService, run_id: str, name: str, payload: Any, user: User
) -> str:
    """Queue a signal for a run; return the message's id."""
    await _open_run(service, run_id)
    store = _store(service)
    return await asyncio.to_thread(store.post, run_id, name, payload, source=str(user))


async def reply(
    service: ReactionService, run_id: str, prompt_id: str, answer: Any, user: User
) -> str:
    """Answer a pending prompt of a run, as ``user``; return the message's id."""
    recording = await _open_run(service, run_id)
    prompt = next(
        (p for p in pending_prompts(recording.signals) if p["prompt_id"] == prompt_id), None
    )
    if prompt is None:
        raise ApiError(
            404,
            f"Run {run_id} has no pending prompt {prompt_id!r} (unknown, or answered "
            f"already); see GET /api/runs/{run_id} for its pending prompts.",
        )
    choices = prompt.get("choices")
    if choices and answer not in choices:
        listed = ", ".join(map(repr, choices))
        raise ApiError(422, f"The answer {answer!r} is not one of the choices: {listed}.")
    if prompt.get("schema") is not None and not isinstance(answer, dict):
        raise ApiError(
            422, "This prompt asks for an object matching its schema; send a JSON object."
        )
    store = _store(service)
    message = {"prompt_id": prompt_id, "answer": answer}
    return await asyncio.to_thread(store.post, run_id, SESSION_REPLY, message, source=str(user))


async def abort_run(service: ReactionService, run_id: str, reason: str, user: User) -> str | None:
    """Stop a run: at once when it executes here, else through its inbox.

    Returns None when it was stopped here, else the posted message's id: the process
    executing it (a worker) stops it within moments, or it stops when it is resumed.
    """
    if service.host.abort(run_id, reason, user.id):
        return None
    await _open_run(service, run_id)
    store = _store(service)
    return await asyncio.to_thread(
        store.post, run_id, SESSION_ABORT, {"reason": reason}, source=str(user)
    )


Limit = Annotated[int, fastapi.Query(ge=1, le=10_000)]


@router.get("")
async def list_runs(
    service: Service,
    graph: str | None = None,
    status: str | None = None,
    tag: Annotated[str | None, fastapi.Query(description="key or key=value")] = None,
    limit: Limit = 100,
) -> list[dict[str, Any]]:
    """Runs newest first (queued ones too), filtered by graph, status and tag."""
    infos = await listed_runs(service, graph=graph, status=status, tag=tag, limit=limit)
    return [{**info.to_dict(), "live": info.run_id in service.live} for info in infos]


async def listed_runs(
    service: ReactionService,
    *,
    graph: str | None = None,
    status: str | None = None,
    tag: str | None = None,
    limit: int = 100,
) -> list[RunInfo]:
    """The recorded runs and those queued for a worker, newest first, filtered."""
    store = _store(service)
    infos = await asyncio.to_thread(store.runs, graph=graph, tag=tag, status=status, limit=limit)
    if status not in (None, "queued"):
        return infos
    recorded = {info.run_id for info in infos}
    queued = [
        info
        for info in await service.host.queued_runs(limit)
        if info.run_id not in recorded and matches_filters(info, graph=graph, tag=tag)
    ]
    if not queued:
        return infos
    return sorted([*queued, *infos], key=lambda info: info.started_at, reverse=True)[:limit]


@router.post("", status_code=202)
async def start_run(body: StartRun, service: Service, user: Caller) -> RunStarted:
    """Start a registered graph; answers at once with the run's id."""
    if body.graph not in service.runs.graphs:
        known = ", ".join(sorted(service.runs.graphs)) or "none"
        raise ApiError(404, f"No graph named {body.graph!r}; the service has: {known}.")
    return RunStarted(run_id=await service.submit(body.graph, body.input, user=user.id))


@router.get("/{run_id}")
async def get_run(run_id: str, service: Service) -> dict[str, Any]:
    """A run: its info, its last state, its signals and its pending prompts."""
    recording = await load_run(service, run_id)
    return {
        "info": {**recording.info.to_dict(), "live": run_id in service.live},
        "state": recording.state,
        "prompts": pending_prompts(recording.signals),
        "signals": [signal.to_dict() for signal in recording.signals],
    }


@router.post("/{run_id}/signals", status_code=202)
async def send_signal(run_id: str, body: SendSignal, service: Service, user: Caller) -> Posted:
    """Send a signal to a run (through its inbox; 409 once it has ended)."""
    return Posted(message_id=await post_signal(service, run_id, body.name, body.payload, user))


@router.post("/{run_id}/prompts/{prompt_id}/reply", status_code=202)
async def reply_to_prompt(
    run_id: str, prompt_id: str, body: Reply, service: Service, user: Caller
) -> Posted:
    """Answer a pending prompt as the calling user."""
    return Posted(message_id=await reply(service, run_id, prompt_id, body.answer, user))


@router.post("/{run_id}/abort")
async def abort(run_id: str, service: Service, user: Caller, body: Abort | None = None) -> Aborted:
    """Stop a run (it ends ``aborted``); 409 once it has ended.

    A run executing in this process stops at once; one executing elsewhere (a worker)
    or not at all (it resumes later) gets ``session:abort`` through its inbox.
    """
    reason = body.reason if body is not None else Abort().reason
    message_id = await abort_run(service, run_id, reason, user)
    return Aborted(run_id=run_id, reason=reason, message_id=message_id)
