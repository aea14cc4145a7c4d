"""What a reaction agent reacts to, and what it may change: part of an agent's definition.

An agent with ``reaction=`` runs when typed objects in a database are created, updated
or deleted (see :mod:`reactor.service`, which dispatches the events). ``capabilities``
bound the changes it may make, and ``execution_mode`` says whether they are applied
at once or suggested for a person to approve. These are plain values checked when
they are made: a bad one raises :class:`~reactor.exceptions.AgentConfigError` at once,
saying what to write instead; the service does the rest.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from datetime import timedelta
from typing import Any, ClassVar, Literal, Never, get_args

import pydantic

from reactor._agents.admission import admission, policy_config
from reactor._agents.check import Checked

__all__ = [
    "EVENTS",
    "Approval",
    "Capabilities",
    "ExecutionMode",
    "ObjectEvent",
    "Reaction",
    "type_name_problem",
]

ObjectEvent = Literal["created", "updated", "deleted"]
EVENTS: tuple[ObjectEvent, ...] = get_args(ObjectEvent)

ExecutionMode = Literal["execute", "suggest", "hybrid"]
"""``execute`` applies an agent's changes at once; ``suggest`` stores them for a person to
approve; ``hybrid`` lets each output choose (``Changes.mode``)."""

ReactionConcurrency = Literal["skip", "queue", "parallel"]
_CONCURRENCY: tuple[str, ...] = get_args(ReactionConcurrency)
_TYPE_NAME = re.compile(r"^[^\s:*]+$")
_FIELD_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")


def type_name_problem(name: object) -> str | None:
    """Why ``name`` cannot be an object type (it appears in ``object:<Type>:created``)."""
    if not isinstance(name, str) or not _TYPE_NAME.match(name):
        return (
            f"{name!r} is not an object type name: types appear in signal names "
            "(object:<Type>:created), so use a non-empty name without ':', '*' or whitespace"
        )
    return None


class Reaction(Checked):
    """Which object events activate an agent.

    Attributes:
        types: Object types to react to; empty reacts to every type.
        events: ``created``, ``updated`` and/or ``deleted`` (all three by default).
        ignore_self: Skip events caused by this agent's own changes, so that it never
            re-triggers itself.
        concurrency: What an event for an object version already being processed by
            the agent does: ``skip`` drops it, ``queue`` processes one object's events in
            order, ``parallel`` does not wait.
        admit: Which events the agent is given when they come faster than it answers
            (:mod:`reactor._agents.admission`): ``Latest()`` per object by default key,
            ``Debounce``, ``Throttle``, ``Batch``, ``SpendCap``, one or a tuple.
        depends_on: Fields of the object (top-level names of its data) that the
            agent's suggestions depend on besides those they change: a suggestion is
            stale once one of these, or one it changes, has changed since the agent
            saw the object; other fields may change (a quote's ``price`` moving leaves
            a suggestion about its ``notes`` fresh unless ``depends_on=["price"]``).

    Raises:
        AgentConfigError: An unknown event or concurrency, no events at all, a type
            that cannot be an object type name, something in ``admit`` that is not a
            policy, or a ``depends_on`` entry that is not a field name.
    """

    CHOICES: ClassVar[Mapping[str, tuple[str, str]]] = {
        "events": ("event", "created, updated or deleted"),
        "concurrency": ("concurrency", "skip, queue, parallel"),
    }

    types: tuple[str, ...] = ()
    events: tuple[ObjectEvent, ...] = EVENTS
    ignore_self: bool = True
    concurrency: ReactionConcurrency = "skip"
    admit: tuple[Any, ...] = ()
    depends_on: tuple[str, ...] = ()

    def __init__(
        self,
        *,
        types: Iterable[str] | str = (),
        events: Iterable[ObjectEvent] | ObjectEvent = EVENTS,
        ignore_self: bool = True,
        concurrency: ReactionConcurrency = "skip",
        admit: Any = None,
        depends_on: Iterable[str] | str = (),
        **unknown: Never,
    ) -> None:
        super().__init__(
            types=types,
            events=events,
            ignore_self=ignore_self,
            concurrency=concurrency,
            admit=admission(admit, where="Reaction(admit=...)") if admit is not None else (),
            depends_on=depends_on,
            **unknown,
        )

    @pydantic.field_serializer("admit")
    def _admit_config(self, admit: tuple[Any, ...]) -> list[dict[str, Any]]:
        return [policy_config(policy) for policy in admit]

    @pydantic.field_validator("types", "events", "depends_on", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return (value,) if isinstance(value, str) else value

    @pydantic.field_validator("depends_on")
    @classmethod
    def _field_names(cls, fields: tuple[str, ...]) -> tuple[str, ...]:
        for name in fields:
            if not _FIELD_NAME.match(name):
                raise ValueError(
                    f"{name!r} is not a field name: name a top-level field of the object's "
                    "data (a letter or '_', then letters, digits or '_', at most 64)"
                )
        return tuple(dict.fromkeys(fields))

    @pydantic.field_validator("types")
    @classmethod
    def _type_names(cls, types: tuple[str, ...]) -> tuple[str, ...]:
        for name in types:
            problem = type_name_problem(name)
            if problem is not None:
                raise ValueError(problem)
        return tuple(dict.fromkeys(types))

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


class Capabilities(Checked):
    """What an agent may change in the object store.

    Attributes:
        can_create: It may create objects.
        can_update: It may update objects.
        can_delete: It may delete objects.
        allowed_types: The object types it may touch (``None``: any).

    Raises:
        AgentConfigError: A field has the wrong kind of value.
    """

    can_create: bool = True
    can_update: bool = True
    can_delete: bool = True
    allowed_types: tuple[str, ...] | None = None

    def __init__(
        self,
        *,
        can_create: bool = True,
        can_update: bool = True,
        can_delete: bool = True,
        allowed_types: Iterable[str] | str | None = None,
        **unknown: Never,
    ) -> None:
        super().__init__(
            can_create=can_create,
            can_update=can_update,
            can_delete=can_delete,
            allowed_types=allowed_types,
            **unknown,
        )

    @pydantic.field_validator("allowed_types", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return (value,) if isinstance(value, str) else value

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


Justification = Literal["override", "always", "never"]
"""When a decision on a suggestion must say why: only to approve a stale one with
``force`` (``override``), for every decision (``always``), or never."""

_APPROVER = re.compile(r"^(viewer|operator|approver|admin|user:[^\s:]{1,200})$")


class Approval(Checked):
    """Who may decide on an agent's suggestions, and what a decision must carry.

    ``Approval()`` (every agent's default): one principal with the ``approver`` role
    (or an ``admin``) decides, and may not be the one whose write caused the
    suggestion. Four eyes: ``Approval(count=2)``.

    Attributes:
        by: Roles (``approver``) or users (``user:alice``) allowed to decide; an
            ``admin`` may always decide.
        count: How many distinct principals must approve before the changes apply.
        distinct_from_proposer: Refuse the principal whose write caused the suggestion
            (the actor of the triggering object event).
        expires_after: A suggestion older than this can no longer be approved (it
            becomes ``expired``); ``None`` keeps it until someone decides.
        justification: When a decision must give a reason: ``override`` (approving a
            stale suggestion with ``force``), ``always`` or ``never``.

    Raises:
        AgentConfigError: An entry of ``by`` is neither a role nor ``user:<id>``, or
            ``count`` is not at least 1.
    """

    by: tuple[str, ...] = ("approver",)
    count: int = pydantic.Field(default=1, ge=1, le=20)
    distinct_from_proposer: bool = True
    expires_after: timedelta | None = None
    justification: Justification = "override"

    def __init__(
        self,
        *,
        by: Iterable[str] | str = ("approver",),
        count: int = 1,
        distinct_from_proposer: bool = True,
        expires_after: timedelta | float | None = None,
        justification: Justification = "override",
        **unknown: Never,
    ) -> None:
        super().__init__(
            by=by,
            count=count,
            distinct_from_proposer=distinct_from_proposer,
            expires_after=expires_after,
            justification=justification,
            **unknown,
        )

    @pydantic.field_validator("by", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return (value,) if isinstance(value, str) else value

    @pydantic.field_validator("by")
    @classmethod
    def _deciders(cls, by: tuple[str, ...]) -> tuple[str, ...]:
        for entry in by:
            if not _APPROVER.match(entry):
                raise ValueError(
                    f"{entry!r} is neither a role (viewer, operator, approver, admin) nor "
                    "a user written user:<id>"
                )
        return tuple(dict.fromkeys(by))

    @pydantic.field_validator("expires_after")
    @classmethod
    def _positive(cls, value: timedelta | None) -> timedelta | None:
        if value is not None and value <= timedelta(0):
            raise ValueError("must be a positive duration (or None: never expires)")
        return value

    def allows(self, principal_id: str, roles: Iterable[str]) -> bool:
        """Whether a principal with ``roles`` may decide (an ``admin`` always may)."""
        held = set(roles)
        if "admin" in held:
            return True
        return any(entry in held or entry == f"user:{principal_id}" for entry in self.by)


MODES: tuple[ExecutionMode, ...] = get_args(ExecutionMode)
