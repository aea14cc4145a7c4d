"""``/api/objects``, ``/api/suggestions``, ``/api/processing-log``: data and decisions.

Every change made here is the calling principal's: objects are created, updated and
deleted as ``User(<id>)`` (an ``operator``'s), and suggestions are approved, modified,
overridden or rejected by them (as the agent's ``Approval`` allows: an ``approver`` by
default; an approved suggestion's changes are still the agent's, with ``approved_by``
the user); each decision, with its provenance, is in the processing log's history
(``/api/processing-log/history``) and in ``GET /api/suggestions/{id}``. Reading is a
``viewer``'s; rejecting many suggestions at once an ``approver``'s; retrying an entry
an ``admin``'s.

The suggestions and the processing log are listed in keyset pages, the newest first
(50 a page by default, ``limit`` up to 500): the answer is the page's list, and when
more follow, its ``X-Next-Cursor`` header is the cursor to give as ``after`` for the
next page (its ``Link`` header the next page's URL, ``rel="next"``). A page is one
indexed read, whatever the tables hold.

A NUL character in a path or query parameter is ``422`` naming the parameter, on every
database (PostgreSQL cannot compare one); in an object's type or data too (the object
store refuses it).
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

import fastapi
import pydantic

from reactor._signals.diagnostics import log
from reactor._signals.names import SUGGESTION_DECIDED
from reactor.service._api.base import (
    CHECKS,
    MAX_CURSOR,
    VIEWS,
    Admin,
    ApiError,
    Approver,
    Decider,
    Operator,
    Service,
)
from reactor.service._hosting.service import ReactionService
from reactor.service._objects.changes import (
    EntryStatus,
    Operation,
    ProcessingEntry,
    Suggestion,
    SuggestionStatus,
)
from reactor.service._objects.history import HistoryEntry
from reactor.service._objects.processing import PAGE as ENTRIES_PAGE
from reactor.service._objects.rows import MAX_PAGE, Page
from reactor.service._objects.suggestions import PAGE as SUGGESTIONS_PAGE
from reactor.service._objects.values import TYPE_LENGTH, Principal, StoredObject
from reactor.service._reactions.bulk import MAX_BULK, Rejected

__all__ = [
    "BulkRejection",
    "CreatedObject",
    "SuggestionDetail",
    "objects_router",
    "paged",
    "retry_entry",
    "suggestion_detail",
    "suggestions_router",
]


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


@objects_router.get("", dependencies=[VIEWS])
async def list_objects(
    service: Service, type: str | None = None, limit: Limit = 1000
) -> list[StoredObject]:
    """Objects (of ``type``, or all), oldest first."""
    return await service.objects.list(type, limit=limit)


@objects_router.post("", status_code=201)
async def create_object(body: NewObject, service: Service, principal: Operator) -> CreatedObject:
    """Create an object as the calling user; its reactions follow.

    422 when its type's model refuses the data (a field it lacks, a value it refuses),
    when the database cannot hold it (a NUL character), or when its type is not
    registered and the object store takes no untyped objects; an untyped object that
    is stored comes with ``warnings`` unless a reaction names its type.
    """
    created = await service.objects.create(body.type, body.data, actor=principal.user)
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


@objects_router.get("/{object_id}", dependencies=[VIEWS])
async def get_object(
    object_id: str, service: Service, version: Annotated[int | None, fastapi.Query(ge=1)] = None
) -> StoredObject:
    """An object, now or as it was at ``version``."""
    return await service.objects.get(object_id, version=version)


@objects_router.patch("/{object_id}")
async def update_object(
    object_id: str, body: ObjectChanges, service: Service, principal: Operator
) -> StoredObject:
    """Change some fields of an object as the calling user (its version grows by one)."""
    return await service.objects.update(object_id, body.data, actor=principal.user)


@objects_router.delete("/{object_id}")
async def delete_object(object_id: str, service: Service, principal: Operator) -> StoredObject:
    """Delete an object as the calling user; answers with it as it was."""
    return await service.objects.delete(object_id, actor=principal.user)


class Decision(pydantic.BaseModel):
    """What a decision on a suggestion may carry besides itself."""

    model_config = pydantic.ConfigDict(extra="forbid")

    justification: str | None = pydantic.Field(
        default=None,
        description="Why (required as the agent's Approval says: for an override by "
        "default; at most REACTOR_MAX_REASON bytes).",
    )


class Modification(Decision):
    """Approve with edited changes: the operations to apply instead of the proposed ones."""

    operations: tuple[Operation, ...] = pydantic.Field(
        description="The changes to apply: create, update and delete operations, checked "
        "like the agent's own (its capabilities, the objects' types)."
    )


class ProposedBy(pydantic.BaseModel):
    """The run that proposed a suggestion, and its agent."""

    run_id: str | None
    agent: str


class SuggestionDetail(Suggestion):
    """A suggestion with its provenance: the run that proposed it and every decision."""

    proposed_by_run: ProposedBy
    decisions: list[dict[str, Any]] = pydantic.Field(
        description="Each decision made on it (suggestion:decided), oldest first."
    )
    approval: dict[str, Any] = pydantic.Field(
        description="Who may decide on it, and what a decision must carry (its agent's Approval)."
    )
    expires_at: datetime | None = pydantic.Field(
        description="When it can no longer be approved (null: never)."
    )


Force = Annotated[
    bool, fastapi.Query(description="Approve even if the object changed since (an override).")
]


PageLimit = Annotated[
    int, fastapi.Query(ge=1, le=MAX_PAGE, description="At most this many (1 to 500).")
]
After = Annotated[
    str | None,
    fastapi.Query(
        max_length=200,
        description="The cursor of the page before (its X-Next-Cursor); none: the first page.",
    ),
]


def paged(request: fastapi.Request, response: fastapi.Response, page: Page[Any]) -> list[Any]:
    """A page's items; the cursor of the next page in ``X-Next-Cursor`` and ``Link``."""
    if page.next is not None:
        following = request.url.include_query_params(after=page.next)
        response.headers["X-Next-Cursor"] = page.next
        response.headers["Link"] = f'<{following}>; rel="next"'
    return page.items


@suggestions_router.get("/suggestions", dependencies=[VIEWS])
async def list_suggestions(
    request: fastapi.Request,
    response: fastapi.Response,
    service: Service,
    status: SuggestionStatus | None = None,
    agent: str | None = None,
    object_id: str | None = None,
    after: After = None,
    limit: PageLimit = SUGGESTIONS_PAGE,
) -> list[Suggestion]:
    """A page of suggestions, the newest first, filtered by status, agent and object.

    50 a page by default (``limit`` up to 500). When more follow, the answer's
    ``X-Next-Cursor`` header holds the cursor to give as ``after`` for the next page,
    and its ``Link`` header the next page's URL (``rel="next"``); the last page has
    neither. A cursor no page gave is 422.
    """
    found = await service.suggestion_page(
        status=status, agent=agent, object_id=object_id, after=after, limit=limit
    )
    return paged(request, response, found)


class BulkRejection(pydantic.BaseModel):
    """Suggestions to reject: by ``ids``, or by a filter of pending ones."""

    model_config = pydantic.ConfigDict(extra="forbid")

    ids: list[str] | None = pydantic.Field(
        default=None, description=f"The suggestions to reject (at most {MAX_BULK:,})."
    )
    agent: str | None = pydantic.Field(default=None, description="Or: the pending ones of it.")
    object_id: str | None = pydantic.Field(
        default=None, description="Or: the pending ones about it."
    )
    status: Literal["pending"] | None = pydantic.Field(
        default=None,
        description="pending: only pending suggestions can be rejected; given alone, "
        "every agent's pending ones.",
    )
    justification: str | None = pydantic.Field(
        default=None,
        description="Why (required when an agent's Approval says so; at most "
        "REACTOR_MAX_REASON bytes).",
    )


@suggestions_router.post("/suggestions/reject")
async def reject_many(body: BulkRejection, service: Service, principal: Approver) -> Rejected:
    """Reject many suggestions: those of ``ids``, or the pending ones of a filter.

    Each is decided as one rejection is (its agent's ``Approval`` must let the
    principal decide; a justification it requires must be given) and recorded the same
    way (a ``suggestion:decided`` line each); those that cannot be rejected are listed
    in ``refused`` with why, and the others are rejected all the same. At most 1,000 a
    request: more ids are 422, and a filter that finds more answers ``more: true``
    (send it again for the next ones). Needs the approver role.
    """
    filtered = (body.agent, body.object_id, body.status) != (None, None, None)
    if (body.ids is None) == (not filtered):
        raise ApiError(
            422,
            "Name the suggestions to reject: either ids, or a filter of pending ones "
            '(agent, object_id, or "status": "pending" for every pending one), not both.',
        )
    return await service.reject_many(
        body.ids,
        agent=body.agent,
        object_id=body.object_id,
        principal=principal,
        justification=body.justification,
    )


@suggestions_router.get("/suggestions/{suggestion_id}", dependencies=[VIEWS])
async def get_suggestion(suggestion_id: str, service: Service) -> SuggestionDetail:
    """A suggestion, the run and agent that proposed it, and every decision made on it."""
    return await suggestion_detail(service, suggestion_id)


async def suggestion_detail(service: ReactionService, suggestion_id: str) -> SuggestionDetail:
    """A suggestion with its provenance (the API's and the web UI's).

    Raises:
        SuggestionNotFoundError: No suggestion has that id.
    """
    await service.db.open()
    store = service.suggestion_store
    suggestion = await store.get(suggestion_id)
    history = await store.history.list(suggestion_id=suggestion_id, limit=None)
    approval = service.approval_of(suggestion.agent)
    expires = approval.expires_after
    return SuggestionDetail(
        **dict(suggestion),
        proposed_by_run=ProposedBy(run_id=suggestion.run_id, agent=suggestion.agent),
        decisions=[entry.payload for entry in history if entry.name == SUGGESTION_DECIDED],
        approval=approval.model_dump(mode="json"),
        expires_at=None if expires is None else suggestion.created_at + expires,
    )


@suggestions_router.post("/suggestions/{suggestion_id}/approve")
async def approve(
    suggestion_id: str,
    service: Service,
    principal: Decider,
    force: Force = False,
    body: Decision | None = None,
) -> Suggestion:
    """Approve a pending suggestion as the calling principal; applied once approved enough.

    403 when the agent's ``Approval`` does not let the principal approve (its ``by``,
    or it made the change the agent reacted to); 409 if it was resolved already, it
    expired, the principal approved it already, or its object changed since the
    version it was based on (``object_version``) unless ``?force=true`` (an override,
    which needs a ``justification`` by default); 422 for a missing or too long
    justification. With ``Approval(count=2)`` the first approval leaves it pending,
    with its approvals listed.
    """
    given = body.justification if body is not None else None
    return await service.approve(
        suggestion_id, principal=principal, force=force, justification=given
    )


@suggestions_router.post("/suggestions/{suggestion_id}/modify")
async def modify(
    suggestion_id: str,
    body: Modification,
    service: Service,
    principal: Decider,
    force: Force = False,
) -> Suggestion:
    """Approve a pending suggestion with edited changes (recorded as a diff); as approve.

    422 when an edited change does not fit its object's type; 409 when it is outside
    the agent's capabilities.
    """
    return await service.modify(
        suggestion_id,
        body.operations,
        principal=principal,
        force=force,
        justification=body.justification,
    )


@suggestions_router.post("/suggestions/{suggestion_id}/reject")
async def reject(
    suggestion_id: str, service: Service, principal: Decider, body: Decision | None = None
) -> Suggestion:
    """Reject a pending suggestion; nothing changes (409 if it was resolved already)."""
    given = body.justification if body is not None else None
    return await service.reject(suggestion_id, principal=principal, justification=given)


@suggestions_router.get("/processing-log", tags=["processing log"], dependencies=[VIEWS])
async def processing_log(
    request: fastapi.Request,
    response: fastapi.Response,
    service: Service,
    agent: str | None = None,
    object_id: str | None = None,
    status: EntryStatus | None = None,
    after: After = None,
    limit: PageLimit = ENTRIES_PAGE,
) -> list[ProcessingEntry]:
    """A page of what each reaction agent was given and what became of it, newest first.

    Paged as ``GET /api/suggestions`` is: 50 entries by default (``limit`` up to
    500), the next page's cursor in ``X-Next-Cursor`` (give it as ``after``) and its
    URL in ``Link``; a cursor no page gave is 422.
    """
    found = await service.processing_page(
        agent=agent, object_id=object_id, status=status, after=after, limit=limit
    )
    return paged(request, response, found)


@suggestions_router.get("/processing-log/history", tags=["processing log"], dependencies=[VIEWS])
async def processing_history(
    service: Service,
    suggestion_id: str | None = None,
    object_id: str | None = None,
    after: Annotated[
        int | None, fastapi.Query(ge=0, le=MAX_CURSOR, description="After this id.")
    ] = None,
    limit: Limit = 1000,
) -> list[HistoryEntry]:
    """What people decided (``suggestion:decided``, with its provenance), oldest first."""
    await service.db.open()
    history = service.suggestion_store.history
    return await history.list(
        suggestion_id=suggestion_id, object_id=object_id, after=after, limit=limit
    )


EntryId = Annotated[int, fastapi.Path(ge=1, le=MAX_CURSOR, description="The entry's id.")]


@suggestions_router.post("/processing-log/{entry_id}/retry", tags=["processing log"])
async def retry(entry_id: EntryId, service: Service, principal: Admin) -> ProcessingEntry:
    """Process a ``failed`` or ``abandoned`` entry again (404 unknown, 409 another status)."""
    return await retry_entry(service, entry_id, principal)


async def retry_entry(
    service: ReactionService, entry_id: int, principal: Principal
) -> ProcessingEntry:
    """Retry an entry as ``principal`` (the API's and the web UI's button; an admin's).

    Raises:
        EntryNotFoundError: There is no such entry (404).
        RetryRefusedError: It cannot be retried (409).
        PermissionDeniedError: The principal is not an admin (403).
    """
    entry = await service.retry(entry_id, principal=principal)
    log("reactor.service", "info", "reaction retried", entry=entry_id, user=principal.id)
    return entry
