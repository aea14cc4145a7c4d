"""The errors of objects, reactions and the service (re-exported by :mod:`reactor.exceptions`)."""

from __future__ import annotations

from typing import Any

from reactor.exceptions._engine import ReactorError

__all__ = [
    "AgentConflictError",
    "CapabilityError",
    "DatabaseError",
    "EntryNotFoundError",
    "IdleTimeoutError",
    "ObjectNotFoundError",
    "ObjectValidationError",
    "PermissionDeniedError",
    "RetryRefusedError",
    "ServiceConfigError",
    "ServiceError",
    "ServiceStateError",
    "SuggestionNotFoundError",
    "SuggestionResolvedError",
]


class ServiceError(ReactorError):
    """The object store or the reaction service refused an operation (see the leaves)."""


class AgentConflictError(ServiceError, RuntimeError):
    """An agent of that name exists already, or it is defined in code, not in a row.

    An agent defined in code keeps its definition in code: through the service only
    its schedule and its ``enabled`` switch change.
    """


class CapabilityError(ServiceError, PermissionError):
    """An agent tried a change outside its ``capabilities``; nothing was changed.

    Attributes:
        agent: The agent that tried it.
        operation: ``create``, ``update`` or ``delete``.
        type: The type of the object it would have touched.
    """

    def __init__(self, message: str, *, agent: str, operation: str, type: str) -> None:
        super().__init__(message)
        self.agent = agent
        self.operation = operation
        self.type = type


class PermissionDeniedError(ServiceError, PermissionError):
    """A principal asked for something its roles do not allow; nothing was done.

    Attributes:
        principal: The principal's id.
        role: The role the action needs (``viewer``, ``operator``, ``approver``, ``admin``).
    """

    def __init__(self, message: str, *, principal: str, role: str) -> None:
        super().__init__(message)
        self.principal = principal
        self.role = role


class EntryNotFoundError(ServiceError, LookupError):
    """No processing-log entry has that id.

    Attributes:
        entry_id: The id asked for.
    """

    def __init__(self, message: str, *, entry_id: int) -> None:
        super().__init__(message)
        self.entry_id = entry_id


class RetryRefusedError(ServiceError, RuntimeError):
    """A processing-log entry cannot be retried; nothing was changed.

    Attributes:
        entry_id: The entry.
        status: Its status (only ``failed`` and ``abandoned`` entries are retried), or
            ``duplicate`` when the same event is pending, processing or completed for
            its agent in another entry.
    """

    def __init__(self, message: str, *, entry_id: int, status: str) -> None:
        super().__init__(message)
        self.entry_id = entry_id
        self.status = status


class DatabaseError(ServiceError, RuntimeError):
    """A database cannot be opened, reached or migrated (the message says which, and why)."""


class IdleTimeoutError(ServiceError, TimeoutError):
    """``service.idle(timeout=...)`` ran out before every event was processed."""


class ObjectNotFoundError(ServiceError, LookupError):
    """No stored object has that id (it never existed, or it was deleted).

    Attributes:
        object_id: The id asked for.
    """

    def __init__(self, message: str, *, object_id: str) -> None:
        super().__init__(message)
        self.object_id = object_id


class ObjectValidationError(ServiceError, ValueError):
    """An object's data does not validate against its registered type; nothing changed.

    Attributes:
        type: The object type.
        errors: pydantic's error list, for programmatic inspection.
    """

    def __init__(self, message: str, *, type: str, errors: list[dict[str, Any]]) -> None:
        super().__init__(message)
        self.type = type
        self.errors = errors


class ServiceConfigError(ServiceError, ValueError):
    """An object store or reaction service was given options it cannot work with."""


class ServiceStateError(ServiceError, RuntimeError):
    """The reaction service is not running (use ``async with service:``), or already is."""


class SuggestionNotFoundError(ServiceError, LookupError):
    """No suggestion has that id."""


class SuggestionResolvedError(ServiceError, RuntimeError):
    """A suggestion was already approved or rejected: each is resolved once."""


class SuggestionStaleError(ServiceError, RuntimeError):
    """A suggestion's object changed since the agent saw it: approve it with ``force``.

    Changed in what the suggestion depends on (the fields it changes, and those its
    reaction's ``depends_on`` names), or deleted; for a suggestion made before these
    were recorded, any new version.

    Attributes:
        suggestion_id: The suggestion.
        object_id: Its object.
        based_on: The object's version the suggestion was based on.
        current: The object's version now (``None``: deleted).
        changed: The fields it depends on that changed since (empty when the object
            was deleted, or for a suggestion judged by its object's version).
    """

    def __init__(
        self,
        message: str,
        *,
        suggestion_id: str = "",
        object_id: str = "",
        based_on: int | None = None,
        current: int | None = None,
        changed: tuple[str, ...] = (),
    ) -> None:
        super().__init__(message)
        self.suggestion_id = suggestion_id
        self.object_id = object_id
        self.based_on = based_on
        self.current = current
        self.changed = changed
