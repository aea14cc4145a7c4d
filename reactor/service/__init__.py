"""Objects and reactions: agents that react to typed objects changing in a database.

::

    from reactor import agent
    from reactor.service import Changes, ObjectStore, Reaction, ReactionService, User

    enrich = agent(
        prompt="Find the employer of {{ object.data.name }}.", output=Changes,
        reaction=Reaction(types=["Person"], events=["created"]),
        execution_mode="suggest",
    )
    async with ObjectStore("sqlite:///.reactor/app.db") as objects, ReactionService(
        objects=objects, agents={"enrich": enrich}, provider=provider
    ) as service:
        await objects.create("Person", {"name": "Ada"}, actor=User("u1"))
        await service.idle()

* :class:`ObjectStore`: typed objects in SQLite or PostgreSQL (SQLAlchemy, Alembic
  migrations shipped here); every change is an :class:`ObjectEvent`, emitted as
  ``object:<Type>:created|updated|deleted``.
* :class:`ReactionService`: dispatches the events to the agents whose
  :class:`Reaction` matches, each as a recorded run, with a processing log
  (:class:`ProcessingEntry`), stuck-job recovery, and the agents' :class:`Changes`
  applied or kept as :class:`Suggestion` objects for a person, within their
  :class:`Capabilities`.

* :class:`Principal`, its roles and who vouched for it (an :class:`Authenticator`:
  :class:`TokenAuth`, :class:`JWTAuth`, or the application's own), and
  :class:`Approval`: who decides on an agent's suggestions, and what a decision must
  carry (``docs/security.md``).
* :class:`Settings`: every ``REACTOR_*`` variable, typed and checked
  (``docs/configuration.md``); importing it loads none of the service stack.

See ``docs/reactions.md``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from reactor._agents.reaction import Approval, Capabilities, ExecutionMode, Reaction
from reactor.exceptions import (
    AgentConflictError,
    AgentNotFoundError,
    CapabilityError,
    DatabaseError,
    EntryNotFoundError,
    IdleTimeoutError,
    ObjectNotFoundError,
    ObjectValidationError,
    PermissionDeniedError,
    RetryRefusedError,
    ServiceConfigError,
    ServiceError,
    ServiceStateError,
    SuggestionNotFoundError,
    SuggestionResolvedError,
    SuggestionStaleError,
)
from reactor.exceptions._extras import importing

with importing("service", what="reactor.service"):  # one line naming the pip install
    from reactor.service._hosting.service import ReactionService
    from reactor.service._objects.changes import (
        Changes,
        Create,
        Delete,
        Operation,
        ProcessingEntry,
        Suggestion,
        Update,
    )
    from reactor.service._objects.db import upgrade_database
    from reactor.service._objects.objects import ObjectStore
    from reactor.service._objects.values import (
        Actor,
        AgentActor,
        ObjectEvent,
        Principal,
        StoredObject,
        User,
    )
    from reactor.service._reactions.view import AgentObjects

if TYPE_CHECKING:
    from reactor._signals.settings import Settings
    from reactor.service._access.authenticators import Authenticator
    from reactor.service._access.jwts import JWTAuth
    from reactor.service._access.tokens import TokenAuth
    from reactor.service._api.app import create_app

__all__ = [
    "Actor",
    "AgentActor",
    "AgentConflictError",
    "AgentNotFoundError",
    "AgentObjects",
    "Approval",
    "Authenticator",
    "Capabilities",
    "CapabilityError",
    "Changes",
    "Create",
    "DatabaseError",
    "Delete",
    "EntryNotFoundError",
    "ExecutionMode",
    "IdleTimeoutError",
    "JWTAuth",
    "ObjectEvent",
    "ObjectNotFoundError",
    "ObjectStore",
    "ObjectValidationError",
    "Operation",
    "PermissionDeniedError",
    "Principal",
    "ProcessingEntry",
    "Reaction",
    "ReactionService",
    "RetryRefusedError",
    "ServiceConfigError",
    "ServiceError",
    "ServiceStateError",
    "Settings",
    "StoredObject",
    "Suggestion",
    "SuggestionNotFoundError",
    "SuggestionResolvedError",
    "SuggestionStaleError",
    "TokenAuth",
    "Update",
    "User",
    "create_app",
    "upgrade_database",
]


_ACCESS = {
    "Authenticator": "reactor.service._access.authenticators",
    "JWTAuth": "reactor.service._access.jwts",
    "TokenAuth": "reactor.service._access.tokens",
}
"""The authenticators, imported on first use (``JWTAuth`` brings PyJWT and cryptography)."""


def __getattr__(name: str) -> Any:
    """``Settings``, ``create_app`` and the authenticators, imported on first use.

    A worker, or a script that only stores objects and runs reactions, never imports
    FastAPI and the web pages.
    """
    if name in _ACCESS:
        import importlib

        with importing("service", what="reactor.service"):
            return getattr(importlib.import_module(_ACCESS[name]), name)
    if name == "Settings":
        from reactor._signals.settings import Settings

        return Settings
    if name == "create_app":
        with importing("service", what="reactor.service"):
            from reactor.service._api.app import create_app

        return create_app
    raise AttributeError(f"module 'reactor.service' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
