"""``/api/runs/{id}/resume`` and ``/api/runs/{id}/fork``: runs that go on, and runs that branch.

A run whose graph changed what its log says was done (a deploy changed an agent that
had acted) is not resumed by the service on its own: it is ``blocked``, with the
reason, in the runs list and on its page, until someone resumes it anyway
(``POST /api/runs/{id}/resume?force=true``) or code that can resume it is deployed.
Without ``force``, a resume is checked first: a refusal is a ``409`` naming each agent
and what changed, and the run is blocked.

A fork starts a new run of the same graph from the run's log up to a signal (``at``),
with ``state`` written over it, and answers with the new run's id (``202``).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Mapping, Sequence
from typing import Annotated, Any

import fastapi
import pydantic

from reactor._graph.compat import resume_plan
from reactor._recording.info import RunInfo
from reactor._recording.store import SignalStore
from reactor.service._api.agents import RunStarted
from reactor.service._api.base import CHECKS, MAX_CURSOR, ApiError, Operator, Service
from reactor.service._api.reads import ending_seq, state_at
from reactor.service._hosting.hosting import blocked_reason
from reactor.service._hosting.launch import RunRequest
from reactor.service._hosting.service import ReactionService
from reactor.service._objects.blocks import BlockedRuns
from reactor.service._objects.values import User
from stores import create_store

__all__ = ["fork_run", "resume_run", "router", "with_blocks"]

router = fastapi.APIRouter(prefix="/api/runs", tags=["runs"], dependencies=CHECKS)


class Fork(pydantic.BaseModel):
    """Where to fork a run: a signal of it, and the state to write over it there."""

    model_config = pydantic.ConfigDict(extra="forbid")

    at: int = pydantic.Field(ge=1, le=MAX_CURSOR, description="the seq of the signal to fork at")
    state: dict[str, Any] = pydantic.Field(
        default_factory=dict, description="state keys and their new values (actor: user)"
    )


def _store(service: ReactionService) -> SignalStore:
    if service.record is None:
        raise ApiError(503, "The service is not running; start it first.")
    return service.record


def _request(service: ReactionService, info: RunInfo, what: str) -> RunRequest:
    """The request that goes on with a recorded run (409 when the service did not start it)."""
    request = RunRequest.resuming(info)
    if request is None:
        raise ApiError(
            409,
            f"Run {info.run_id} was not started by this service (it has no service tag), so "
            f"the service does not know its graph; {what} it with the reactor command.",
        )
    service.runs.graph(request)  # 404 or 422 when the graph or agent is not here (any more)
    return request


async def with_blocks(service: ReactionService, infos: Sequence[RunInfo]) -> list[RunInfo]:
    """``infos`` with the unfinished runs the service blocked shown ``blocked``, and why.

    A run that ended while its store could not write it (a full disk) is shown
    ``failed``, with its ``RecordingError``, until its end is written (see
    :class:`~reactor.service._hosting.record.ServiceRecord`): never ``running`` forever.
    """
    open_ids = [info.run_id for info in infos if not info.complete]
    if not open_ids:
        return list(infos)
    fenced = service.host.fenced
    unended = fenced.unended if fenced is not None else {}
    blocked = await BlockedRuns(service.db).reasons(open_ids)
    shown = []
    for info in infos:
        end = unended.get(info.run_id)
        if end is not None and not info.complete:
            info = dataclasses.replace(info, status="failed", reason=end.payload["reason"])
        elif info.run_id in blocked and not info.complete:
            info = dataclasses.replace(info, status="blocked", reason=blocked[info.run_id])
        shown.append(info)
    return shown


async def resume_run(service: ReactionService, run_id: str, *, force: bool, user: User) -> str:
    """Resume an unfinished run now; its id once it has begun (or is queued for a worker).

    Raises:
        ApiError: 409 when it has ended, runs here already, or (without ``force``) its
            graph changed what its log says was done (it is then blocked).
    """
    store = _store(service)
    if run_id in service.live:
        raise ApiError(409, f"Run {run_id} is running in this service; it needs no resume.")
    recording = await asyncio.to_thread(store.load_tail, run_id)
    if recording.complete:
        raise ApiError(409, f"Run {run_id} has ended ({recording.status}); it cannot resume.")
    request = _request(service, recording.info, "resume")
    blocks = BlockedRuns(service.db)
    if not force:
        graph = service.runs.graph(request)
        _, verdict = await asyncio.to_thread(resume_plan, graph, store, run_id)
        if not verdict.compatible:
            error = verdict.error()
            await blocks.block(run_id, blocked_reason(error))
            raise error
    started = await service.host.submit(dataclasses.replace(request, force=force), "resume")
    await blocks.unblock(run_id)
    return started


async def fork_run(
    service: ReactionService, run_id: str, at: int, state: Mapping[str, Any], user: User
) -> str:
    """Start a fork of ``run_id`` at signal ``at`` with ``state``; the new run's id.

    Checked from the run's row and pages of its log (the state at ``at``), never the
    whole log.

    Raises:
        ApiError: 422 when ``at`` is not a signal of the run or ``state`` does not fit
            the graph's state; 409 when the service did not start the run.
    """
    store = _store(service)
    source = await asyncio.to_thread(store.info, run_id)
    request = _request(service, source, "fork")
    last = source.last_seq
    if not 1 <= at <= last:
        raise ApiError(422, f"Run {run_id} has signals 1 to {last}: fork it at one of them.")
    if state:
        graph = service.runs.graph(request)
        ending = await asyncio.to_thread(ending_seq, store, source)
        seq = min(at, ending - 1) if ending else at
        scratch = create_store(graph.state)
        scratch.restore(await asyncio.to_thread(state_at, store, run_id, seq))
        scratch.update(dict(state), actor="user")  # a StateValidationError is a 422
    fork = RunRequest(
        request.kind,
        request.name,
        trigger="fork",
        user=user.id,
        fork={"run_id": run_id, "at": at, "state": dict(state)},
    )
    return await service.host.submit(fork, "fork")


Force = Annotated[bool, fastapi.Query(description="resume even if the graph changed")]


@router.post("/{run_id}/resume", status_code=202)
async def resume(
    run_id: str, service: Service, principal: Operator, force: Force = False
) -> RunStarted:
    """Resume an unfinished run now (a blocked one with ``force=true``).

    409 when it has ended, runs here already, or (without ``force``) its graph changed
    what its log says was done: the answer names each agent and what changed, and the
    run is ``blocked`` until it is resumed with ``force=true``.
    """
    started = await resume_run(service, run_id, force=force, user=principal.user)
    return RunStarted(run_id=started)


@router.post("/{run_id}/fork", status_code=202)
async def fork(run_id: str, body: Fork, service: Service, principal: Operator) -> RunStarted:
    """Start a new run from this run's log up to signal ``at``, with ``state`` written over it.

    The new run (``RunInfo.forked_from`` names this one) goes on live; its id comes back
    at once.
    """
    started = await fork_run(service, run_id, body.at, body.state, principal.user)
    return RunStarted(run_id=started)
