"""A reaction's recorded run as an evaluation case: the object it saw, and nothing changed.

A reaction is a run of its agent's one-agent graph whose input is the object event's
payload and whose scope holds the object, the event and ``ctx.objects``. Its
recording keeps the input, so :func:`reaction_scope` makes the scope again from it:
the object as the event left it (``object`` in templates), the event, and the store
as the agent sees it, its changes held and never applied, whatever the agent's
execution mode: an evaluation reads the service's objects and changes none of them.
The agent's decision (its changes or suggestion) is its output, which the evaluation
compares with the recorded one. A reaction that admission gave a batch of events
(``Reaction(admit=Debounce(..., deliver="batch"))``) recorded them in its input
(``batch``), so its case sees the same ``ctx.batch``: admission is reproduced from
what it decided, not from timing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

import pydantic

from reactor import Recording
from reactor.exceptions import RecordingError
from reactor.service._objects.objects import ObjectStore
from reactor.service._objects.values import ObjectEvent
from reactor.service._reactions.registry import ReactionAgent
from reactor.service._reactions.view import AgentObjects

__all__ = ["reaction_scope", "recorded_batch", "recorded_event"]


def recorded_event(recording: Recording) -> ObjectEvent:
    """The object event a reaction's run reacted to, from its recorded input.

    What the input does not keep (the event's place in the store's log, when the
    object was created) is the run's start.

    Raises:
        RecordingError: The input is not an object event's payload.
    """
    payload = recording.input
    try:
        if not isinstance(payload, Mapping):
            raise TypeError(f"it is {type(payload).__name__}")
        return _event(recording, {key: value for key, value in payload.items() if key != "batch"})
    except (pydantic.ValidationError, TypeError) as exc:
        first = exc.errors()[0] if isinstance(exc, pydantic.ValidationError) else None
        why = (
            f"{'.'.join(map(str, first['loc']))}: {first['msg']}" if first is not None else str(exc)
        )
        raise RecordingError(
            f"The recording of {recording.run_id!r} is damaged: its input is not the object "
            f"event of a reaction ({why}). Record the run again, or delete it."
        ) from None


def recorded_batch(recording: Recording) -> list[ObjectEvent] | None:
    """The events admission delivered with the reaction's event (its ``ctx.batch``).

    ``None`` when it went alone.

    Raises:
        RecordingError: The batch is not a list of object events' payloads.
    """
    payload = recording.input
    batch = payload.get("batch") if isinstance(payload, Mapping) else None
    if batch is None:
        return None
    try:
        if not isinstance(batch, list) or not all(isinstance(item, Mapping) for item in batch):
            raise TypeError("it is not a list of events")
        return [_event(recording, item) for item in batch]
    except (pydantic.ValidationError, TypeError) as exc:
        raise RecordingError(
            f"The recording of {recording.run_id!r} is damaged: the batch in its input is "
            f"not the object events admission delivered ({exc}). Record the run again, or "
            "delete it."
        ) from None


def _event(recording: Recording, payload: Mapping[str, Any]) -> ObjectEvent:
    """An event's payload as an event; what it does not keep is the run's start."""
    started = datetime.fromtimestamp(recording.info.started_at, UTC)
    return ObjectEvent.model_validate(
        {**payload, "event_id": 0, "timestamp": started, "object_created_at": started}
    )


def reaction_scope(
    objects: ObjectStore, target: ReactionAgent
) -> Callable[[Recording], Mapping[str, Any]]:
    """What ``target``'s agent saw in each recorded reaction, for an evaluation's cases."""
    capabilities = target.agent.capabilities

    def scope(recording: Recording) -> Mapping[str, Any]:
        event = recorded_event(recording)
        held = AgentObjects(objects, target.name, capabilities, "suggest")  # never applied
        scope: dict[str, Any] = {"object": event.object, "objects": held, "event": event}
        batch = recorded_batch(recording)
        if batch is not None:
            scope["batch"] = batch
        return scope

    return scope
