"""``/api/runs``: recorded runs, starting graphs, and commands to a run (signals, replies, abort).

Commands go through the run's durable inbox (``store.post``), so they reach it wherever
it executes: live in this process (within a poll interval), or when it is resumed.
None of them reads the run's log: the run's row says whether it has ended, and a reply
is checked against the run's questions (read through the store's index of them). Every
answer is decided before it is given: a reply is checked against the prompts the
log shows (an unknown prompt is a 404, an answer outside the prompt's choices a 422),
then the first reply to a prompt wins in the database (``prompt_replies``), across
processes: it gets 200 with the accepted answer, every later one 409 naming who
answered. A signal whose name the run could never take is a 422 at once.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Collection, Iterable, Mapping
from datetime import datetime
from typing import Annotated, Any, Literal

import fastapi
import pydantic

from reactor._recording.inbox import check_posted
from reactor._recording.info import RunInfo, matches_filters
from reactor._signals.door import check_length, check_payload
from reactor._signals.names import SESSION_ABORT, SESSION_REPLY, SESSION_TIMEOUT
from reactor._signals.patterns import validate_name
from reactor._signals.settings import settings
from reactor._signals.signal import Signal, iso_time
from reactor.exceptions import BackpressureError
from reactor.service._api.agents import RunStarted
from reactor.service._api.base import CHECKS, VIEWS, ApiError, Operator, Service
from reactor.service._api.paging import router as paging_router
from reactor.service._api.reads import pending_prompts, questions, run_info, store_of
from reactor.service._api.resumes import with_blocks
from reactor.service._hosting.service import ReactionService
from reactor.service._objects.replies import PromptReplies, ReplyDecision
from reactor.service._objects.values import User

__all__ = [
    "abort_run",
    "listed_runs",
    "post_signal",
    "reply",
    "router",
]

router = fastapi.APIRouter(prefix="/api/runs", tags=["runs"], dependencies=CHECKS)
router.include_router(paging_router)  # GET /api/runs/{id} and its pages: see .paging


class StartRun(pydantic.BaseModel):
    """A registered graph to start, and its input (omitted or null: the graph's default)."""

    model_config = pydantic.ConfigDict(extra="forbid")

    graph: str = pydantic.Field(min_length=1)
    input: Any = None


class SendSignal(pydantic.BaseModel):
    """A signal for a run (names of the runtime's namespaces are refused)."""

    model_config = pydantic.ConfigDict(extra="forbid")

    name: str = pydantic.Field(min_length=1)
    payload: Any = None
    at: pydantic.AwareDatetime | None = None
    """Deliver it at or after this time (ISO 8601 with a time zone), not at once."""


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


class Answered(pydantic.BaseModel):
    """The reply was accepted: it is the prompt's answer, on its way to the run."""

    run_id: str
    prompt_id: str
    answer: Any
    answered_by: str
    answered_at: str
    message_id: str | None = None


class Aborted(pydantic.BaseModel):
    """What was decided: the run was aborted here, or the abort was posted to its inbox.

    ``status`` ``aborted``: it executed in this process and has ended ``aborted`` with
    ``reason``, ``session:abort`` from the caller in its log. ``posted``: it executes
    elsewhere (a worker) or not at all; ``session:abort`` is in its inbox
    (``message_id``), and it ends ``aborted`` where it executes, or when it resumes.
    """

    run_id: str
    reason: str
    status: Literal["aborted", "posted"]
    message_id: str | None = None


async def _open_run(service: ReactionService, run_id: str) -> RunInfo:
    """The run's row, if it takes input still (404 for no run, 409 once it has ended)."""
    info = await run_info(service, run_id)
    if info.complete:
        raise ApiError(409, f"Run {run_id} has ended ({info.status}); it takes no more input.")
    return info


async def post_signal(
    service: ReactionService,
    run_id: str,
    name: str,
    payload: Any,
    user: User,
    at: datetime | None = None,
) -> str:
    """Queue a signal for a run; return the message's id.

    Raises:
        SignalNameError: The name is not a signal name, or one only the runtime emits
            (422, before anything is queued).
        BackpressureError: The store's writer is behind (503 with ``Retry-After``).
    """
    validate_name(name)
    check_posted(name)
    await _open_run(service, run_id)
    store = store_of(service)
    full = store.room() if at is None else None
    if full is not None:  # the store's writer is behind: the client sends again later
        full.cancel()
        raise BackpressureError(
            f"Run {run_id} takes no outside input for a moment: the store has the most "
            "signals not yet written it queues. Nothing was queued; send it again shortly.",
            run_id=run_id,
        )
    later = {} if at is None else {"at": at}  # scheduled: delivered at or after ``at``
    return await asyncio.to_thread(store.post, run_id, name, payload, source=str(user), **later)


def _answered(run_id: str, prompt_id: str, signals: Iterable[Signal]) -> str | None:
    """Who the log says answered the prompt (``None`` while it is pending)."""
    for signal in signals:
        payload = signal.payload if isinstance(signal.payload, Mapping) else {}
        if payload.get("prompt_id") != prompt_id:
            continue
        if signal.name == SESSION_REPLY:
            return f"answered by {signal.source or 'someone'} at {signal.to_dict()['timestamp']}"
        if signal.name == SESSION_TIMEOUT:
            return "timed out"
    return None


async def reply(
    service: ReactionService, run_id: str, prompt_id: str, answer: Any, user: User
) -> ReplyDecision:
    """Answer a pending prompt of a run, as ``user``; the accepted reply (see the module).

    An answer longer than ``REACTOR_MAX_REASON`` bytes (as JSON) is a 422. The prompts
    are read from the run's questions (an index), never its whole log; a
    prompt asked (or timed out) a moment ago by a run executing here is seen too: the
    store's writer catches up first when the run's feed knows more than the store.
    """
    check_length(answer, "answer", settings().max_reason, "REACTOR_MAX_REASON")
    info = await run_info(service, run_id)
    signals = [] if info.status == "queued" else await questions(service, run_id)
    live = service.live.get(run_id)
    if live is not None and _behind(run_id, prompt_id, signals, live.feed.asking):
        signals = await questions(service, run_id, fresh=True)
        info = await run_info(service, run_id)
    prompt = _asked(signals, prompt_id)
    if prompt is None and info.complete:
        raise ApiError(409, f"Run {run_id} has ended ({info.status}); it takes no more input.")
    if prompt is None:
        raise ApiError(
            404,
            f"Run {run_id} has no prompt {prompt_id!r}; see GET /api/runs/{run_id} for its "
            "pending prompts.",
        )
    replies = PromptReplies(service.db)
    decided = (await replies.of_run(run_id, [prompt_id])).get(prompt_id)
    if decided is not None:
        raise ApiError(409, _taken(decided))
    how = _answered(run_id, prompt_id, signals)
    if how is not None:
        raise ApiError(409, f"Prompt {prompt_id!r} of run {run_id} was {how}; it takes one answer.")
    if info.complete:
        raise ApiError(409, f"Run {run_id} has ended ({info.status}); it takes no more input.")
    choices = prompt.get("choices")
    if choices and answer not in choices:
        listed = ", ".join(map(repr, choices))
        raise ApiError(422, f"The answer {answer!r} is not one of the choices: {listed}.")
    if prompt.get("schema") is not None and not isinstance(answer, dict):
        raise ApiError(
            422, "This prompt asks for an object matching its schema; send a JSON object."
        )
    store = store_of(service)
    decision = await replies.decide(run_id, prompt_id, answer, user.id)
    if not decision.accepted:
        raise ApiError(409, _taken(decision))
    message = {"prompt_id": prompt_id, "answer": answer}
    try:
        posted = await asyncio.to_thread(
            store.post, run_id, SESSION_REPLY, message, source=str(user)
        )
    except BaseException:
        await replies.withdraw(run_id, prompt_id)  # not given after all: the prompt is open
        raise
    await replies.delivered(run_id, prompt_id, posted)
    return dataclasses.replace(decision, message_id=posted)


def _asked(signals: Iterable[Signal], prompt_id: str) -> dict[str, Any] | None:
    """The prompt ``prompt_id`` among the run's questions, answered or not."""
    asked = pending_prompts(signals, keep_answered=True)
    return next((prompt for prompt in asked if prompt["prompt_id"] == prompt_id), None)


def _behind(run_id: str, prompt_id: str, signals: list[Signal], asking: Collection[Any]) -> bool:
    """Whether the store may not show yet what a live run's feed knows of the prompt.

    The store's writer may be a batch behind: the prompt may be asked, or answered
    (a timeout), in the feed and not written yet.
    """
    if _asked(signals, prompt_id) is None:
        return True
    return prompt_id not in asking and _answered(run_id, prompt_id, signals) is None


def _taken(decision: ReplyDecision) -> str:
    return (
        f"Prompt {decision.prompt_id!r} of run {decision.run_id} was answered by "
        f"{decision.answered_by} at {iso_time(decision.answered_at)} with "
        f"{decision.answer!r}; it takes one answer."
    )


async def abort_run(service: ReactionService, run_id: str, reason: str, user: User) -> str | None:
    """Abort a run as ``user``: here when it executes here, else through its inbox.

    Returns None once a run executing here has ended ``aborted`` (its log has
    ``session:abort {reason}`` from ``user``), else the posted message's id: the process
    executing it (a worker) aborts it within moments, or it is aborted when it resumes.

    Raises:
        PayloadError: The log cannot hold ``reason``, or it is longer than
            ``REACTOR_MAX_REASON`` bytes (422: nothing is aborted).
        ApiError: 404 for no such run, 409 once it has ended.
    """
    check_payload(reason, "reason")
    check_length(reason, "reason", settings().max_reason, "REACTOR_MAX_REASON")
    result = await service.host.abort(run_id, reason, str(user))
    if result is not None and result.status != "aborted":
        raise ApiError(409, f"Run {run_id} has ended ({result.status}); it takes no more input.")
    if result is not None:
        return None
    await _open_run(service, run_id)
    store = store_of(service)
    return await asyncio.to_thread(
        store.post, run_id, SESSION_ABORT, {"reason": reason}, source=str(user)
    )


Limit = Annotated[int, fastapi.Query(ge=1, le=10_000)]


@router.get("", dependencies=[VIEWS])
async def list_runs(
    service: Service,
    graph: str | None = None,
    status: str | None = None,
    tag: Annotated[str | None, fastapi.Query(description="key or key=value")] = None,
    limit: Limit = 100,
) -> list[dict[str, Any]]:
    """Runs newest first (queued ones too), filtered by graph, status and tag.

    ``status=any`` (as no ``status``) lists runs of every status. A run the service
    will not resume by itself (its graph changed what its log says was done) is
    ``blocked``, its ``reason`` says why.
    """
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
    """The recorded runs and those queued for a worker, newest first, filtered.

    Blocked runs are shown ``blocked`` (``status="blocked"`` lists them alone), runs
    that ended while their store could not write it ``failed`` (see ``with_blocks``);
    ``status="any"`` is no filter.
    """
    status = None if status == "any" else status
    store = store_of(service)
    if status in ("blocked", "running", "waiting") or (status == "failed" and _unended(service)):
        found: list[RunInfo] = []
        unfinished_ones = ("running", "waiting") if status in ("blocked", "failed") else (status,)
        if status == "failed":
            found += await asyncio.to_thread(
                store.runs, graph=graph, tag=tag, status=status, limit=limit
            )
        for unfinished in unfinished_ones:
            found += await asyncio.to_thread(
                store.runs, graph=graph, tag=tag, status=unfinished, limit=None
            )
        found = [i for i in await with_blocks(service, found) if i.status == status]
        return sorted(found, key=lambda info: info.started_at, reverse=True)[:limit]
    infos = await asyncio.to_thread(store.runs, graph=graph, tag=tag, status=status, limit=limit)
    infos = await with_blocks(service, infos)
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


def _unended(service: ReactionService) -> bool:
    """Whether some run ended while its store could not write it (it is shown ``failed``)."""
    return service.host.fenced is not None and bool(service.host.fenced.unended)


@router.post("", status_code=202)
async def start_run(body: StartRun, service: Service, principal: Operator) -> RunStarted:
    """Start a registered graph; answers at once with the run's id."""
    if body.graph not in service.runs.graphs:
        known = ", ".join(sorted(service.runs.graphs)) or "none"
        raise ApiError(404, f"No graph named {body.graph!r}; the service has: {known}.")
    run_id = await service.submit(body.graph, body.input, user=principal.id)
    return RunStarted(run_id=run_id)


@router.post("/{run_id}/signals", status_code=202)
async def send_signal(
    run_id: str, body: SendSignal, service: Service, principal: Operator
) -> Posted:
    """Send a signal to a run (through its inbox; 409 once it has ended); ``at``: later."""
    user = principal.user
    posted = await post_signal(service, run_id, body.name, body.payload, user, body.at)
    return Posted(message_id=posted)


@router.post("/{run_id}/prompts/{prompt_id}/reply")
async def reply_to_prompt(
    run_id: str, prompt_id: str, body: Reply, service: Service, principal: Operator
) -> Answered:
    """Answer a pending prompt as the calling user.

    200 with the accepted answer for the first valid reply; 409 naming who answered
    for every later one (also one a moment later, on another process); 404 for a
    prompt the run never asked.
    """
    decision = await reply(service, run_id, prompt_id, body.answer, principal.user)
    return Answered(
        run_id=run_id,
        prompt_id=prompt_id,
        answer=decision.answer,
        answered_by=decision.answered_by,
        answered_at=iso_time(decision.answered_at),
        message_id=decision.message_id,
    )


@router.post("/{run_id}/abort")
async def abort(
    run_id: str, service: Service, principal: Operator, body: Abort | None = None
) -> Aborted:
    """Abort a run as the calling user (it ends ``aborted``); 409 once it has ended.

    A run executing in this process is aborted before the answer (``status``
    ``aborted``); one executing elsewhere (a worker) or not at all (it resumes later)
    gets ``session:abort`` through its inbox (``posted``). A reason the log cannot hold
    is a 422, and nothing is aborted.
    """
    reason = body.reason if body is not None else Abort().reason
    message_id = await abort_run(service, run_id, reason, principal.user)
    status: Literal["aborted", "posted"] = "aborted" if message_id is None else "posted"
    return Aborted(run_id=run_id, reason=reason, status=status, message_id=message_id)
