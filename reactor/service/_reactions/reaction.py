"""One reaction: one object event processed by one agent, as a recorded run.

:func:`react` is the unit of work that a dispatcher (this process's, or a queue's
worker) calls once it has claimed a processing-log entry: it has the service run the
agent's one-agent graph with the object in scope (:class:`Launcher`: the way every run
of the service starts, recorded to its store), then applies or suggests the changes
the agent proposed, according to its execution mode. It never raises for the agent's
own failures: they are the returned :class:`Finished`'s error.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Protocol

import pydantic

from reactor._agents.reaction import Capabilities
from reactor._engine.result import RunResult
from reactor._graph.reactive import Reactive
from reactor._recording.info import new_run_id
from reactor._recording.store import SignalStore
from reactor._signals.diagnostics import log
from reactor._signals.frozen import freeze_payload
from reactor._signals.names import (
    HARNESS_END,
    SUGGESTION_CREATED,
    SUGGESTION_SUPERSEDED,
    agent_actor,
    agent_event,
)
from reactor._signals.payloads import HarnessEnd, SuggestionPayload
from reactor._signals.signal import new_signal
from reactor.exceptions import (
    CapabilityError,
    ObjectNotFoundError,
    ObjectValidationError,
    RunNotFoundError,
)
from reactor.service._objects.changes import (
    Changes,
    Create,
    Delete,
    EntryStatus,
    Operation,
    ProcessingEntry,
    Suggestion,
    Update,
)
from reactor.service._objects.objects import ObjectStore
from reactor.service._objects.processing import Finished, ProcessingLog, Taken
from reactor.service._objects.suggestions import Suggestions
from reactor.service._objects.values import CURRENT_CAUSE, AgentActor, Cause, ObjectEvent, User
from reactor.service._reactions.registry import ReactionAgent
from reactor.service._reactions.view import AgentObjects, check_capability

__all__ = [
    "Launcher",
    "ReactionRun",
    "ReactionServices",
    "announce",
    "basis_of",
    "check_all",
    "close_run",
    "react",
    "run_of",
    "suggestion_payload",
    "taken_over",
]

_REFUSED = (CapabilityError, ObjectNotFoundError, ObjectValidationError)
"""Errors of applying an agent's changes: the entry fails, the service goes on."""


class Launcher(Protocol):
    """How a reaction's run starts: as every run of the service (``RunHost.react``)."""

    async def react(
        self,
        graph: Reactive,
        *,
        input: Any,
        scope: Mapping[str, Any],
        tags: Mapping[str, str],
        run_id: str,
        resume: bool = False,
        fresh: bool = False,
    ) -> RunResult | None:
        """Run ``graph`` as ``run_id``, recorded to the service's store; its result.

        ``resume``: go on with that recorded run. ``fresh``: ``run_id`` was made just
        now, nothing was posted to it (its inbox is not read at its start). ``None``:
        suspended, not ended here.
        """
        ...


@dataclasses.dataclass(frozen=True)
class ReactionRun:
    """The run a reaction goes on as: its id (its entry's), and whether it is resumed.

    ``resume``: an earlier attempt recorded it and did not end it (its process died):
    the retry goes on with it, so it never stays ``running`` for a dead process.
    ``fresh``: its id was made for this attempt (an entry's first take, or a new run
    for a retry), so no message can have been posted to it before it starts: its
    inbox is not read then (what is posted while it runs is delivered as to any run).
    A retry of a run the store never got is not fresh: its id was known before.
    """

    run_id: str
    resume: bool = False
    fresh: bool = False


@dataclasses.dataclass(frozen=True)
class ReactionServices:
    """What reactions need: the objects, the suggestions, the runs' launcher and store.

    ``record`` is the store the launcher records to: the dispatcher makes it durable
    once for a batch of reactions, before their entries are completed.
    """

    objects: ObjectStore
    suggestions: Suggestions
    launcher: Launcher
    record: SignalStore | None


async def react(
    services: ReactionServices,
    target: ReactionAgent,
    entry_id: int,
    event: ObjectEvent,
    run: ReactionRun | None = None,
    batch: Sequence[ObjectEvent] = (),
) -> Finished:
    """Run ``target`` on ``event`` (as a recorded run) and settle its proposed changes.

    ``run``: the run it goes on as (its entry's; a new one by default). ``batch``: the
    events admission merged into this one, and it last, in arrival order: the agent's
    ``ctx.batch`` (also in its run's input, ``batch``, so that an evaluation sees them).

    Raises:
        GraphChangedError: ``run`` is resumed, and the agent changed what its log
            says was done.
    """
    agent = target.agent
    view = AgentObjects(services.objects, target.name, agent.capabilities, agent.execution_mode)
    started = datetime.now(UTC)
    run = run if run is not None else ReactionRun(new_run_id(), fresh=True)
    run_id = run.run_id
    # What this reaction changes (through ctx.objects or its output) names it as its
    # cause, one step deeper than the event it reacts to: loops are cut at a depth.
    caused = CURRENT_CAUSE.set(Cause.after(event, run_id, target.name))
    try:
        return await _react(services, target, entry_id, event, view, started, run, batch)
    finally:
        CURRENT_CAUSE.reset(caused)


async def _react(
    services: ReactionServices,
    target: ReactionAgent,
    entry_id: int,
    event: ObjectEvent,
    view: AgentObjects,
    started: datetime,
    run: ReactionRun,
    batch: Sequence[ObjectEvent],
) -> Finished:
    run_id = run.run_id
    given: Any = event.payload()
    scope: dict[str, Any] = {"object": event.object, "objects": view, "event": event}
    if batch:
        given = {**given, "batch": [item.payload() for item in batch]}
        scope["batch"] = list(batch)
    tags = {"reaction": target.name, "object": event.id, "event": event.name}
    if target.agent.when is not None:  # evaluated once, when the event was logged
        tags["guard"] = "passed"
    result = await services.launcher.react(
        target.graph,
        input=given,
        scope=scope,
        tags=tags,
        run_id=run_id,
        resume=run.resume,
        fresh=run.fresh,
    )
    if result is None:  # suspended (the service stops): not settled here
        return Finished(
            entry_id=entry_id,
            agent=target.name,
            status="failed",
            error=f"its run {run_id} was stopped before it ended",
            run_id=run_id,
            started_at=started,
        )

    def finished(status: EntryStatus, error: BaseException | None) -> Finished:
        return Finished(
            entry_id=entry_id,
            agent=target.name,
            status=status,
            error=None if error is None else f"{type(error).__name__}: {error}",
            run_id=result.run_id,
            started_at=started,
            cost_usd=result.metrics.cost_usd,
        )

    failure = result.error or (result.failures[0].error if result.failures else None)
    if failure is not None:
        return finished("failed", failure)
    try:
        await _settle(services, target, view, _output(result, target.name), event, result.run_id)
    except _REFUSED as exc:
        log(
            "reactor.service",
            "warning",
            "reaction changes refused",
            agent=target.name,
            object_id=event.id,
            error=str(exc),
        )
        return finished("failed", exc)
    return finished("completed", None)


def _output(result: RunResult, agent: str) -> Any:
    """The agent's last output (its ``agent:<name>:completed`` payload).

    A resumed run may have it from its log, as JSON: changes are read back as such.
    """
    completed = agent_event(agent, "completed")
    for signal in reversed(result.signals):
        if signal.name == completed and isinstance(signal.payload, Mapping):
            output = signal.payload.get("output")
            if isinstance(output, Mapping) and "operations" in output:
                with contextlib.suppress(pydantic.ValidationError):
                    return Changes.model_validate(dict(output))
            return output
    return None


async def run_of(log: ProcessingLog, record: SignalStore | None, taken: Taken) -> ReactionRun:
    """The run a taken entry's reaction goes on as: its own, resumed if unfinished.

    A first take starts the run the entry names. A later one (the process of an
    earlier attempt died, or the entry is retried by hand) resumes that run when the
    store has it unfinished, so that it never stays ``running`` for a dead process;
    starts it when the store never got it; and starts a new run, named in the entry
    first, when it had ended.
    """
    entry = taken.entry
    assert entry.run_id is not None  # taken entries name their run
    if not taken.earlier:
        return ReactionRun(entry.run_id, fresh=True)
    if record is None:
        return ReactionRun(entry.run_id)
    try:
        info = await asyncio.to_thread(record.info, entry.run_id)
    except RunNotFoundError:
        return ReactionRun(entry.run_id)
    if not info.complete:
        return ReactionRun(entry.run_id, resume=True)
    run_id = new_run_id()
    await log.set_run(entry.id, run_id)
    return ReactionRun(run_id, fresh=True)


async def taken_over(
    log: ProcessingLog, record: SignalStore | None, entry: ProcessingEntry, earlier: str
) -> ReactionRun:
    """A new run for an entry whose earlier run cannot be resumed; that one is closed.

    It ends ``failed``, its reason naming the run that took its work over.
    """
    run_id = new_run_id()
    await log.set_run(entry.id, run_id)
    why = (
        f"its process died mid-reaction and the agent {entry.agent!r} changed since, so "
        f"processing-log entry {entry.id} was retried as run {run_id}"
    )
    if record is not None:
        await asyncio.to_thread(close_run, record, earlier, why)
    return ReactionRun(run_id, fresh=True)


def close_run(store: SignalStore, run_id: str, reason: str) -> bool:
    """End a run nobody will resume ``failed``, with ``reason``, after its last signal.

    For a reaction's run left unfinished by a process that died, when its work was
    taken over by another run or given up: its row then says ``failed`` and why (the
    run that took over, or how to retry), never ``running`` forever. Blocking. Returns
    whether it closed it (not when the store lacks it, or it has ended).
    """
    try:
        info = store.info(run_id)
    except RunNotFoundError:
        return False
    if info.complete:
        return False
    seq = info.last_seq + 1
    payload: HarnessEnd = {
        "status": "failed",
        "reason": reason,
        "duration_ms": round(max(0.0, time.time() - (info.started_at or 0)) * 1000, 3),
        "activations": 0,
        "failures": 0,
    }
    end = new_signal(
        HARNESS_END, payload, f"sig_{seq}", seq, time.time(), "harness", None, 0, run_id
    )
    store.append(end)
    store.flush()
    return store.recording_error(run_id) is None


async def _settle(
    services: ReactionServices,
    target: ReactionAgent,
    view: AgentObjects,
    output: Any,
    event: ObjectEvent,
    run_id: str,
) -> None:
    """Apply or suggest what the agent proposed: the changes it held and its output."""
    operations: list[Operation] = list(view.held)
    reasoning = ""
    mode = target.agent.execution_mode
    if isinstance(output, Changes):
        operations += output.operations
        reasoning = output.reasoning
    if mode == "hybrid":
        mode = output.mode if isinstance(output, Changes) else "suggest"
    if not operations:
        return
    await check_all(services.objects, target.name, target.agent.capabilities, operations)
    if mode == "execute":
        await services.objects.apply(operations, actor=AgentActor(target.name))
        return
    reaction = target.agent.reaction
    proposed = await services.suggestions.add(
        agent=target.name,
        object_id=event.id,
        object_version=event.version,
        operations=operations,
        reasoning=reasoning,
        run_id=run_id,
        proposer=event.actor,
        basis=basis_of(operations, event, reaction.depends_on if reaction else ()),
    )
    for old, line in zip(proposed.superseded, proposed.lines, strict=True):
        log("reactor.service", "info", SUGGESTION_SUPERSEDED, **line)
        announce(services.objects, SUGGESTION_SUPERSEDED, old, AgentActor(target.name))
    announce(services.objects, SUGGESTION_CREATED, proposed.suggestion, None)


def basis_of(
    operations: Sequence[Operation], event: ObjectEvent, depends_on: Iterable[str]
) -> dict[str, Any] | None:
    """What a suggestion made on ``event`` depends on: fields of its object, as seen.

    The fields its operations change on that object (every field, for a delete) and
    those its reaction's ``depends_on`` names, with their values in the event's data
    (``None`` for a field the object lacked). ``None`` for an event that deleted the
    object: such a suggestion is judged by the object's version, as before.
    """
    if event.event == "deleted":
        return None
    data = event.data
    fields = dict.fromkeys(depends_on)
    for op in operations:
        if isinstance(op, Update) and op.id == event.id:
            fields.update(dict.fromkeys(op.data))
        elif isinstance(op, Delete) and op.id == event.id:
            fields.update(dict.fromkeys(data))
    return {field: data.get(field) for field in sorted(fields)}


async def check_all(
    objects: ObjectStore, agent: str, capabilities: Capabilities, operations: list[Operation]
) -> None:
    """Check every operation before any is applied or suggested.

    Updates and deletes of objects that an earlier operation creates take its type.

    Raises:
        CapabilityError: One of them is outside the agent's capabilities.
        ObjectNotFoundError: An update or delete names an unknown object.
    """
    created: dict[str, str] = {}
    for op in operations:
        if isinstance(op, Create):
            check_capability(objects, agent, capabilities, "create", op.type)
            if op.id is not None:
                created[op.id] = op.type
            continue
        type = created.get(op.id) or (await objects.get(op.id)).type
        check_capability(objects, agent, capabilities, op.op, type, op.id)


def suggestion_payload(
    suggestion: Suggestion, actor: User | AgentActor | None
) -> SuggestionPayload:
    """The payload of ``suggestion:*`` signals."""
    return {
        "id": suggestion.id,
        "agent": suggestion.agent,
        "object_id": suggestion.object_id,
        "status": suggestion.status,
        "reasoning": suggestion.reasoning,
        "operations": len(suggestion.operations),
        "actor": None if actor is None else actor.payload(),
    }


def announce(
    objects: ObjectStore, name: str, suggestion: Suggestion, actor: User | AgentActor | None
) -> None:
    """Emit a ``suggestion:*`` signal on the store's bus."""
    source = str(actor) if actor is not None else agent_actor(suggestion.agent)
    objects.bus.publish(
        name, freeze_payload(suggestion_payload(suggestion, actor)), source, None, 0
    )
