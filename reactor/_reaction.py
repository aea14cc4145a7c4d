"""What a reaction agent reacts to, and what it may change: part of an agent's definition.

An agent with ``reaction=`` runs when typed objects in a database are created, updated
or deleted (see :mod:`reactor.service`, which dispatches the events). ``capabilities``
bound the changes it may make, and ``execution_mode`` says whether they are applied
at once or suggested for a person to approve. These are plain values checked when the
agent is defined; the service does the rest.
"""

from __future__ import annotations

from typing import Literal, get_args

import pydantic

__all__ = ["EVENTS", "Capabilities", "ExecutionMode", "ObjectEvent", "Reaction"]

ObjectEvent = Literal["created", "updated", "deleted"]
EVENTS: tuple[ObjectEvent, ...] = get_args(ObjectEvent)

ExecutionMode = Literal["execute", "suggest", "hybrid"]
"""``execute`` applies an agent's changes at once; ``suggest`` stores them for a person to
approve; ``hybrid`` lets each output choose (``Changes.mode``)."""


class Reaction(pydantic.BaseModel):
    """Which object events activate an agent.

    Attributes:
        types: Object types to react to; empty reacts to every type.
        events: ``created``, ``updated`` and/or ``deleted`` (all three by default).
        ignore_self: Skip events caused by this agent's own changes, so that it never
            re-triggers itself.
        concurrency: What an event for an object version already being processed by
            the agent does: ``skip`` drops it, ``queue`` processes one object's events in
            order, ``parallel`` does not wait.
    """

    model_config = pydantic.ConfigDict(frozen=True, extra="forbid")

    types: tuple[str, ...] = ()
    events: tuple[ObjectEvent, ...] = EVENTS
    ignore_self: bool = True
    concurrency: Literal["skip", "queue", "parallel"] = "skip"

    @pydantic.field_validator("events")
    @classmethod
    def _some_events(cls, events: tuple[ObjectEvent, ...]) -> tuple[ObjectEvent, ...]:
        if not events:
            raise ValueError(
                "no events: the agent would never run; list some of created, updated, deleted"
            )
        return tuple(dict.fromkeys(events))

    def matches(self, type: str, event: str, actor: str | None, agent: str) -> bool:
        """Whether an event on an object of ``type`` by ``actor`` activates ``agent``."""
        if self.types and type not in self.types:
            return False
        if event not in self.events:
            return False
        return not (self.ignore_self and actor == agent)


class Capabilities(pydantic.BaseModel):
    """What an agent may change in the object store.

    Attributes:
        can_create: It may create objects.
        can_update: It may update objects.
        can_delete: It may delete objects.
        allowed_types: The object types it may touch (``None``: any).
    """

    model_config = pydantic.ConfigDict(frozen=True, extra="forbid")

    can_create: bool = True
    can_update: bool = True
    can_delete: bool = True
    allowed_types: tuple[str, ...] | None = None

    def denies(self, operation: Literal["create", "update", "delete"], type: str) -> str | None:
        """Why ``operation`` on an object of ``type`` is not allowed, or ``None``."""
        allowed = {"create": self.can_create, "update": self.can_update, "delete": self.can_delete}
        if not allowed[operation]:
            return f"it may not {operation} objects (can_{operation}=False)"
        if self.allowed_types is not None and type not in self.allowed_types:
            return (
                f"it may not touch {type!r} objects (allowed types: "
                f"{', '.join(self.allowed_types) or 'none'})"
            )
        return None


MODES: tuple[ExecutionMode, ...] = get_args(ExecutionMode)
