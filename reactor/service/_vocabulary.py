"""The signals of objects and reactions: their names and the shape of their payloads.

They are emitted on the object store's bus (``objects.bus``, shared by the service):
``object:<Type>:created|updated|deleted`` when a change commits,
``suggestion:created|approved|rejected`` as suggestions are made and resolved, and
``capability:denied`` when an agent tries a change outside its capabilities. Names
are spelled here only; the rest of the package uses these constants and builders.
"""

from __future__ import annotations

import functools
from typing import Any, TypedDict

__all__ = [
    "CAPABILITY_DENIED",
    "OBJECT_SIGNALS",
    "SERVICE_SIGNALS",
    "SUGGESTION_APPROVED",
    "SUGGESTION_CREATED",
    "SUGGESTION_REJECTED",
    "ActorPayload",
    "CapabilityDenied",
    "ObjectChanged",
    "SuggestionPayload",
    "object_signal",
]

OBJECT_SIGNALS = "object:**"
"""The pattern of every object change."""
SUGGESTION_CREATED = "suggestion:created"
SUGGESTION_APPROVED = "suggestion:approved"
SUGGESTION_REJECTED = "suggestion:rejected"
CAPABILITY_DENIED = "capability:denied"
SERVICE_SIGNALS = (OBJECT_SIGNALS, "suggestion:*", CAPABILITY_DENIED)
"""Patterns of everything the object store and the service emit."""


@functools.lru_cache(maxsize=4096)
def object_signal(type: str, event: str) -> str:
    """``object:<type>:<event>``, e.g. ``object_signal("Person", "created")``."""
    return f"object:{type}:{event}"


class ActorPayload(TypedDict):
    """Who made a change: ``{"type": "user" | "agent", "id": ...}``."""

    type: str
    id: str


class ObjectChanged(TypedDict):
    """``object:<Type>:<event>``: the object after the change, and what changed."""

    id: str
    type: str
    version: int
    event: str
    data: dict[str, Any]
    changes: dict[str, Any]
    actor: ActorPayload


class SuggestionPayload(TypedDict):
    """``suggestion:created|approved|rejected``: which suggestion, and who resolved it."""

    id: str
    agent: str
    object_id: str | None
    status: str
    reasoning: str
    operations: int
    actor: ActorPayload | None


class CapabilityDenied(TypedDict):
    """``capability:denied``: the agent, the operation and the type it was refused."""

    agent: str
    operation: str
    type: str
    object_id: str | None
    reason: str
