"""``/api/objects``, ``/api/suggestions``, ``/api/processing-log``: data and decisions.

Every change made here is the calling user's: objects are created, updated and deleted
as ``User(<id>)``, and suggestions are approved or rejected by them (an approved
suggestion's changes are still the agent's, with ``approved_by`` the user); each
decision is in the processing log's history (``/api/processing-log/history``).

A NUL character in a path or query parameter is ``422`` naming the parameter, on every
database (PostgreSQL cannot compare one); in an object's type or data too (the object
store refuses it).
"""

from __future__ import annotations

from typing import Annotated, Any

import fastapi
import pydantic

from reactor._signals.diagnostics import log
from reactor.service._api.base import CHECKS, MAX_CURSOR, Caller, Service
from reactor.service._hosting.service import ReactionService
from reactor.service._objects.changes import (
    EntryStatus,
    ProcessingEntry,
    Suggestion,
    SuggestionStatus,
)
from reactor.service._objects.history import HistoryEntry
from reactor.service._objects.values import TYPE_LENGTH, StoredObject, User

__all__ = ["CreatedObject", "objects_router", "retry_entry", "suggestions_router"]


objects_router = fastapi.APIRouter(prefix="/api/objects", tags=["objects"], dependencies=CHECKS)
suggestions_router = fastapi.APIRouter(prefix="/api", tags=["suggestions"], dependencies=CHECKS)

Limit = Annotated[int, fastapi.Query(ge=1, le=10_000, description="At most this many.")]


class NewObject(pydantic.BaseModel):
    """An object to create."""

    model_config = pydantic.ConfigDict(extra="forbid")

    type: str = pydantic.Field(
        min_length=1, max_length=TYPE_LENGTH, description="Its type (``Person``)."
    )
    data: dict[str, Any] = pydantic.Field(description="Its fields.")


class CreatedObject(StoredObject):
    """A new object, and what the caller should know about it."""

    warnings: list[str] = pydantic.Field(
        default=[],
        description="What was accepted but may be a mistake: a type that no registered "
        "model or reaction names was stored untyped (a misspelled type, say).",
    )


class ObjectChanges(pydantic.BaseModel):
    """Fields to change (the others are kept)."""

    model_config = pydantic.ConfigDict(extra="forbid")

    data: dict[str, Any]


@objects_router.get("")
async def list_objects(
    service: Service, type: str | None = None, limit: Limit = 1000
) -> list[StoredObject]:
    """Objects (of ``type``, or all), oldest first."""
    return await service.objects.list(type, limit=limit)


@objects_router.post("", status_code=201)
async def create_object(body: NewObject, service: Service, user: Caller) -> CreatedObject:
    """Create an object as the calling user; its reactions follow.

    422 when its type's model refuses the data (a field it lacks, a value it refuses),
    when the database cannot hold it (a NUL character), or when its type is not
    registered and the object store takes no untyped objects; an untyped object that
    is stored comes with ``warnings`` unless a reaction names its type.
    """
    created = await service.objects.create(body.type, body.data, actor=user)
    return CreatedObject(**dict(created), warnings=_type_warnings(service, body.type))


def _type_warnings(service: ReactionService, type: str) -> list[str]:
    """Why an object of ``type`` may be a mistake: no model and no reaction names it."""
    registered = service.objects.types
    if type in registered or any(type in r.reaction.types for r in service.reactions.values()):
        return []
    known = ", ".join(sorted(registered)) or "none"
    return [
        f"No model is registered for type {type!r} (registered: {known}) and no reaction "
        "names it: the object was stored as given, unvalidated. If the type is misspelled, "
        "delete the object and create it again; an object store made with untyped=False "
        "refuses such objects."
    ]


@objects_router.get("/{object_id}")
async def get_object(
    object_id: str, service: Service, version: Annotated[int | None, fastapi.Query(ge=1)] = None
) -> StoredObject:
    """An object, now or as it was at ``version``."""
    return await service.objects.get(object_id, version=version)


@objects_router.patch("/{object_id}")
async def update_object(
    object_id: str, body: ObjectChanges, service: Service, user: Caller
) -> StoredObject:
    """Change some fields of an object as the calling user (its version grows by one)."""
    return await service.objects.update(object_id, body.data, actor=user)


@objects_router.delete("/{object_id}")
async def delete_object(object_id: str, service: Service, user: Caller) -> StoredObject:
    """Delete an object as the calling user; answers with it as it was."""
    return await service.objects.delete(object_id, actor=user)


@suggestions_router.get("/suggestions")
async def list_suggestions(
    service: Service, status: SuggestionStatus | None = None
) -> list[Suggestion]:
    """Suggestions, newest first (``pending``, ``completed``, ``rejected``, or all)."""
    return await service.suggestions(status)


@suggestions_router.post("/suggestions/{suggestion_id}/approve")
async def approve(
    suggestion_id: str, service: Service, user: Caller, force: bool = False
) -> Suggestion:
    """Apply a pending suggestion, as its agent, approved by the calling user.

    409 if it was resolved already, or if its object changed since the version it was
    based on (``object_version``) unless ``?force=true``.
    """
    return await service.approve(suggestion_id, actor=user, force=force)


@suggestions_router.post("/suggestions/{suggestion_id}/reject")
async def reject(suggestion_id: str, service: Service, user: Caller) -> Suggestion:
    """Reject a pending suggestion; nothing changes (409 if it was resolved already)."""
    return await service.reject(suggestion_id, actor=user)


@suggestions_router.get("/processing-log", tags=["processing log"])
async def processing_log(
    service: Service,
    agent: str | None = None,
    object_id: str | None = None,
    status: EntryStatus | None = None,
) -> list[ProcessingEntry]:
    """What each reaction agent was given and what became of it, oldest first."""
    return await service.processing_log(agent=agent, object_id=object_id, status=status)


@suggestions_router.get("/processing-log/history", tags=["processing log"])
async def processing_history(
    service: Service,
    suggestion_id: str | None = None,
    object_id: str | None = None,
    after: Annotated[
        int | None, fastapi.Query(ge=0, le=MAX_CURSOR, description="After this id.")
    ] = None,
    limit: Limit = 1000,
) -> list[HistoryEntry]:
    """What people decided (``suggestion:approved``, ``suggestion:rejected``), oldest first."""
    await service.db.open()
    history = service.suggestion_store.history
    return await history.list(
        suggestion_id=suggestion_id, object_id=object_id, after=after, limit=limit
    )


EntryId = Annotated[int, fastapi.Path(ge=1, le=MAX_CURSOR, description="The entry's id.")]


@suggestions_router.post("/processing-log/{entry_id}/retry", tags=["processing log"])
async def retry(entry_id: EntryId, service: Service, user: Caller) -> ProcessingEntry:
    """Process a ``failed`` or ``abandoned`` entry again (404 unknown, 409 another status)."""
    return await retry_entry(service, entry_id, user)


async def retry_entry(service: ReactionService, entry_id: int, user: User) -> ProcessingEntry:
    """Retry an entry as ``user`` (the API's and the web UI's button).

    Raises:
        EntryNotFoundError: There is no such entry (404).
        RetryRefusedError: It cannot be retried (409).
    """
    entry = await service.retry(entry_id)
    log("reactor.service", "info", "reaction retried", entry=entry_id, user=user.id)
    return entry
