"""The values the object store hands out: actors, stored objects and their events.

All are frozen pydantic models: they serialize as the JSON the HTTP API and the
signals carry, and a value read once cannot change behind its reader's back.
"""

from __future__ import annotations

import contextvars
import dataclasses
from collections.abc import Mapping
from datetime import datetime
from typing import Annotated, Any, Literal

import pydantic

from reactor._agents.reaction import ObjectEvent as EventKind
from reactor._agents.sandbox import register_template_value
from reactor._signals.names import agent_actor, object_signal
from reactor._signals.payloads import ActorPayload, CausePayload, ObjectChanged

__all__ = [
    "CURRENT_CAUSE",
    "ID_LENGTH",
    "NAME_LENGTH",
    "ROLES",
    "TYPE_LENGTH",
    "Actor",
    "AgentActor",
    "Cause",
    "EventKind",
    "ObjectEvent",
    "Principal",
    "Role",
    "StoredObject",
    "User",
    "actor_from_context",
    "title_of",
]

NAME_LENGTH = 200
"""Most characters of a name the database keeps (an actor's id, an agent's name, a cron
schedule: ``String(200)`` columns in ``schema.py``), checked before it gets there."""
TYPE_LENGTH = 200
"""Most characters of an object type (``objects.type``)."""
ID_LENGTH = 64
"""Most characters of an object's id (``objects.id``)."""

SHORT_TEXT = 80
"""Most characters of a string field that may stand for its object (see :func:`title_of`)."""

_AGENT_PREFIX = agent_actor("")
_USER_PREFIX = "user:"


class _Actor(pydantic.BaseModel):
    """Who made a change; ``User("u1")`` and ``AgentActor("enrich")`` take the id first."""

    model_config = pydantic.ConfigDict(frozen=True, extra="forbid")

    type: str
    id: str = pydantic.Field(min_length=1, max_length=NAME_LENGTH)

    def payload(self) -> ActorPayload:
        """``{"type": ..., "id": ...}``, as in signals and the HTTP API."""
        return {"type": self.type, "id": self.id}

    def __str__(self) -> str:
        return f"{self.type}:{self.id}"


class User(_Actor):
    """A person (or a program acting for one), by id: ``User("u1")``."""

    type: Literal["user"] = "user"

    def __init__(self, id: str | None = None, /, **data: Any) -> None:
        if id is not None:
            data["id"] = id
        super().__init__(**data)


class AgentActor(_Actor):
    """An agent, by name: changes an agent makes are attributed to ``AgentActor(name)``."""

    type: Literal["agent"] = "agent"

    def __init__(self, id: str | None = None, /, **data: Any) -> None:
        if id is not None:
            data["id"] = id
        super().__init__(**data)


Actor = Annotated[User | AgentActor, pydantic.Field(discriminator="type")]
"""A user or an agent; stored and sent as ``{"type": "user" | "agent", "id": ...}``."""


Role = Literal["viewer", "operator", "approver", "admin"]
"""What a principal may do (DESIGN.md section 35): ``viewer`` reads everything and follows
streams; ``operator`` is a viewer that writes objects and starts, resumes, forks and
aborts runs and replies to prompts; ``approver`` is a viewer that decides on suggestions;
``admin`` does everything (agents, schedules, retries, pruning, the audit)."""

ROLES: tuple[Role, ...] = ("viewer", "operator", "approver", "admin")
"""Every role, least first."""


@dataclasses.dataclass(frozen=True)
class Principal:
    """Who a request comes from, as its authenticator vouched: an id and roles.

    The id is the actor (``user:<id>``) of everything the principal does. A principal
    may hold several roles; ``admin`` may do everything, and every role may read
    (``viewer``).

    Attributes:
        id: The user's id (from a token line, or a JWT's ``sub``).
        roles: The roles held.
        authenticator: Which authenticator vouched for it (``token``, ``jwt``, ``local``,
            or an application's own), recorded with every decision it makes.
    """

    id: str
    roles: frozenset[str] = frozenset({"operator"})
    authenticator: str = "token"

    def may(self, role: str) -> bool:
        """Whether the principal holds ``role`` (an admin holds all; everyone may view)."""
        return role == "viewer" or "admin" in self.roles or role in self.roles

    @property
    def user(self) -> User:
        """The actor of what it does."""
        return User(self.id)

    def __str__(self) -> str:
        return f"user:{self.id}"


def actor_from_context(actor: str) -> User | AgentActor:
    """The actor of a ``stores.current_actor()`` string.

    ``agent:<name>`` (what every activation runs as) is ``AgentActor(name)``;
    ``user:<id>`` is ``User(id)``; anything else (``"user"`` outside agents, or an
    ``acting_as("system")`` label) is a ``User`` of that id.
    """
    if actor.startswith(_AGENT_PREFIX) and len(actor) > len(_AGENT_PREFIX):
        return AgentActor(actor[len(_AGENT_PREFIX) :])
    if actor.startswith(_USER_PREFIX) and len(actor) > len(_USER_PREFIX):
        return User(actor[len(_USER_PREFIX) :])
    return User(actor)


class StoredObject(pydantic.BaseModel):
    """An object as stored: its type, data and version, and who changed it last.

    Attributes:
        id: Its id (``obj_...``), given by the store.
        type: Its type name (``"Person"``).
        version: 1 when created, one more at each update.
        data: Its fields, as JSON data (validated by the type's model when the type
            was registered).
        actor: Who made this version.
        created_at: When it was created (UTC).
        updated_at: When this version was made (UTC).
    """

    model_config = pydantic.ConfigDict(frozen=True)

    id: str
    type: str
    version: int
    data: dict[str, Any]
    actor: Actor
    created_at: datetime
    updated_at: datetime

    @property
    def title(self) -> str | None:
        """What a person calls it: see :func:`title_of`."""
        return title_of(self.data)


def title_of(data: Mapping[str, Any]) -> str | None:
    """What an object's data is called: its ``title`` field, else its first short string.

    A short string has 1 to :data:`SHORT_TEXT` characters (not only spaces); ``None``
    when the data has neither (a title longer than that is cut, with ``…``).
    """
    title = data.get("title")
    if isinstance(title, str) and title.strip():
        return title if len(title) <= SHORT_TEXT else title[: SHORT_TEXT - 1] + "…"
    for value in data.values():
        if isinstance(value, str) and value.strip() and len(value) <= SHORT_TEXT:
            return value
    return None


class Cause(pydantic.BaseModel):
    """The run that made an object change: which run of which agent, how deep.

    Attributes:
        run_id: The agent's recorded run (a reaction's, or another run of the service).
        agent: The agent.
        depth: How many reactions lead to this change (1: a reaction to a change
            nobody's reaction made; 0: no reaction: a change made by a graph's, a cron
            or a manual agent's run, or an approved suggestion).
        chain: The agents of those reactions, first to last.
        suggestion_id: The suggestion whose approval made the change, if one did.
    """

    model_config = pydantic.ConfigDict(frozen=True)

    run_id: str
    agent: str
    depth: int
    chain: tuple[str, ...] = ()
    suggestion_id: str | None = None

    def payload(self) -> CausePayload:
        """``{run_id, agent, depth, chain}`` (and ``suggestion_id``), as stored and in signals."""
        payload: CausePayload = {
            "run_id": self.run_id,
            "agent": self.agent,
            "depth": self.depth,
            "chain": list(self.chain),
        }
        if self.suggestion_id is not None:
            payload["suggestion_id"] = self.suggestion_id
        return payload

    def spelled(self) -> str:
        """The chain as it reads: ``a -> b -> a``."""
        return " -> ".join(self.chain or (self.agent,))

    @classmethod
    def after(cls, event: ObjectEvent | None, run_id: str, agent: str) -> Cause:
        """The cause of what ``agent``'s run ``run_id`` changes, reacting to ``event``."""
        before = event.cause if event is not None else None
        depth = 1 if before is None else before.depth + 1
        chain = (*(before.chain if before is not None else ()), agent)
        return cls(run_id=run_id, agent=agent, depth=depth, chain=chain[-_CHAIN_KEPT:])


_CHAIN_KEPT = 64
"""Agents of a chain kept (a chain longer than any depth limit needs no more)."""

CURRENT_CAUSE: contextvars.ContextVar[Cause | None] = contextvars.ContextVar(
    "reactor_reaction_cause", default=None
)
"""The reaction running in this context: what it changes records it as its cause."""


class ObjectEvent(pydantic.BaseModel):
    """One stored change of an object; dispatched as ``object:<Type>:<event>``.

    Attributes:
        event_id: Its position in the store's log of changes (increasing).
        id: The object's id.
        type: The object's type.
        version: The object's version after the change (a ``deleted`` event carries
            the version that was deleted).
        event: ``created``, ``updated`` or ``deleted``.
        data: The object's data after the change (for ``deleted``, its last data).
        changes: Each top-level field that changed: ``{"old": ..., "new": ...}``.
        actor: Who made the change.
        approved_by: Who approved it, when it was an agent's suggestion.
        timestamp: When it was stored (UTC).
        object_created_at: When the object was created (UTC).
    """

    model_config = pydantic.ConfigDict(frozen=True)

    event_id: int
    id: str
    type: str
    version: int
    event: EventKind
    data: dict[str, Any]
    changes: dict[str, Any]
    actor: Actor
    approved_by: Actor | None = None
    timestamp: datetime
    object_created_at: datetime
    cause: Cause | None = None

    @property
    def object(self) -> StoredObject:
        """The object as this event left it (for ``deleted``: as it was deleted)."""
        return StoredObject(
            id=self.id,
            type=self.type,
            version=self.version,
            data=self.data,
            actor=self.actor,
            created_at=self.object_created_at,
            updated_at=self.timestamp,
        )

    @property
    def name(self) -> str:
        """The signal name: ``object:<type>:<event>``."""
        return object_signal(self.type, self.event)

    def payload(self) -> ObjectChanged:
        """The signal payload: ``{id, type, version, event, data, changes, actor}``."""
        return {
            "id": self.id,
            "type": self.type,
            "version": self.version,
            "event": self.event,
            "data": self.data,
            "changes": self.changes,
            "actor": self.actor.payload(),
            "cause": None if self.cause is None else self.cause.payload(),
        }


def _plain(value: pydantic.BaseModel) -> dict[str, Any]:
    return value.model_dump(mode="json")


register_template_value(StoredObject, _plain)
register_template_value(ObjectEvent, _plain)
