"""The pages of what people decide and watch: suggestions and the processing log.

A suggestion shows its agent's reasoning and its operations as a diff against the
objects as they are now; approving or rejecting it is the signed-in user's decision.
(The agents page is :mod:`._agents`.)
"""

from __future__ import annotations

from typing import Annotated, Any, get_args

import fastapi
from starlette.requests import Request
from starlette.responses import Response

from reactor.exceptions import (
    EntryNotFoundError,
    ObjectNotFoundError,
    ReactorError,
    RetryRefusedError,
)
from reactor.service._api.objects import EntryId, retry_entry
from reactor.service._hosting.service import ReactionService
from reactor.service._objects.changes import Create, EntryStatus, Suggestion, SuggestionStatus
from reactor.service.web._render import Checked, SignedIn, back, page, service_of
from reactor.service.web._summary import operation_diff

__all__ = ["router"]

router = fastapi.APIRouter(include_in_schema=False)

Filter = Annotated[str | None, fastapi.Query()]


async def _current(service: ReactionService, object_id: str) -> dict[str, Any] | None:
    try:
        return dict((await service.objects.get(object_id)).data)
    except ObjectNotFoundError:
        return None


async def _proposed(service: ReactionService, suggestion: Suggestion) -> list[dict[str, Any]]:
    """Each operation of a suggestion, with its diff against the object as it is now."""
    shown = []
    for operation in suggestion.operations:
        current = None if isinstance(operation, Create) else await _current(service, operation.id)
        target = operation.type if isinstance(operation, Create) else operation.id
        shown.append(
            {"op": operation.op, "target": target, "lines": operation_diff(operation, current)}
        )
    return shown


async def _version(service: ReactionService, suggestion: Suggestion) -> dict[str, Any]:
    """The version of the suggestion's object now, and whether it moved since."""
    if suggestion.object_id is None or not suggestion.object_version:
        return {"current_version": None, "stale": False}
    try:
        current: int | None = (await service.objects.get(suggestion.object_id)).version
    except ObjectNotFoundError:
        current = None
    return {"current_version": current, "stale": current != suggestion.object_version}


@router.get("/suggestions")
async def suggestions(request: Request, session: SignedIn, status: Filter = "pending") -> Response:
    """Suggestions (pending ones by default) with their reasoning and changes."""
    service = service_of(request)
    chosen = status if status in get_args(SuggestionStatus) else None
    found = await service.suggestions(chosen)
    items = [
        {"s": s, "operations": await _proposed(service, s), **await _version(service, s)}
        for s in found
    ]
    return page(
        request,
        "suggestions.html",
        session,
        items=items,
        status=chosen or "",
        statuses=get_args(SuggestionStatus),
    )


@router.post("/suggestions/{suggestion_id}/{decision}")
async def decide(request: Request, suggestion_id: str, decision: str, session: Checked) -> Response:
    """Approve (also anyway: ``approve-anyway``) or reject a suggestion as the signed-in user."""
    service = service_of(request)
    try:
        if decision in ("approve", "approve-anyway"):
            force = decision == "approve-anyway"
            await service.approve(suggestion_id, actor=session.user, force=force)
        elif decision == "reject":
            await service.reject(suggestion_id, actor=session.user)
        else:
            return page(request, "missing.html", session, 404, what=f"decision {decision}")
    except ReactorError as exc:
        session.notify("error", str(exc))
    else:
        done = "rejected" if decision == "reject" else "approved and applied"
        session.notify("ok", f"Suggestion {suggestion_id} was {done}.")
    return back(request, "/suggestions")


@router.post("/processing-log/{entry_id}/retry")
async def retry(request: Request, entry_id: EntryId, session: Checked) -> Response:
    """Process a failed or abandoned entry again, as the signed-in user asked."""
    try:
        await retry_entry(service_of(request), entry_id, session.user)
    except (EntryNotFoundError, RetryRefusedError) as exc:
        session.notify("error", str(exc))
    else:
        session.notify("ok", f"Entry {entry_id} will be processed again.")
    return back(request, "/processing-log")


@router.get("/processing-log")
async def processing_log(
    request: Request,
    session: SignedIn,
    agent: Filter = None,
    object_id: Filter = None,
    status: Filter = None,
) -> Response:
    """What each reaction agent was given and what became of it, filtered."""
    chosen = status if status in get_args(EntryStatus) else None
    entries = await service_of(request).processing_log(
        agent=agent or None, object_id=object_id or None, status=chosen
    )
    return page(
        request,
        "processing_log.html",
        session,
        entries=entries,
        agent=agent or "",
        object_id=object_id or "",
        status=chosen or "",
        statuses=get_args(EntryStatus),
    )
