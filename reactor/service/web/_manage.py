"""The pages of what people decide and watch: suggestions and the processing log.

A suggestion shows its agent's reasoning and its operations as a diff against the
objects as they are now; approving (anyway: an override), modifying or rejecting it is
the signed-in principal's decision, as the agent's ``Approval`` allows: the forms are
shown only to who may decide, and a decision the service refuses is a ``403`` page. A
suggestion's own page (``/suggestions/{id}``) shows its provenance: the run that
proposed it, its approvals, and every decision made on it. Retrying a processing-log
entry is an ``admin``'s. (The agents page is :mod:`._agents`.)
"""

from __future__ import annotations

from typing import Annotated, Any, get_args

import fastapi
import pydantic
from starlette.requests import Request
from starlette.responses import Response

from reactor.exceptions import (
    EntryNotFoundError,
    ObjectNotFoundError,
    PermissionDeniedError,
    ReactorError,
    RetryRefusedError,
    SuggestionNotFoundError,
)
from reactor.service._api.objects import EntryId, retry_entry, suggestion_detail
from reactor.service._hosting.service import ReactionService
from reactor.service._objects.changes import (
    Create,
    EntryStatus,
    Operation,
    Suggestion,
    SuggestionStatus,
)
from reactor.service._objects.rows import operations_adapter
from reactor.service.web._render import (
    Administering,
    Deciding,
    Viewing,
    back,
    json_field,
    page,
    service_of,
)
from reactor.service.web._sessions import Session
from reactor.service.web._summary import operation_diff

__all__ = ["router"]

router = fastapi.APIRouter(include_in_schema=False)

Filter = Annotated[str | None, fastapi.Query()]
Field = Annotated[str, fastapi.Form()]
DECISIONS = ("approve", "approve-anyway", "modify", "reject")
"""The decisions the forms post (``approve-anyway``: an override)."""


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


def _deciding(service: ReactionService, session: Session, suggestion: Suggestion) -> bool:
    """Whether the signed-in principal may decide on it (its forms are shown)."""
    principal = session.principal
    return suggestion.status == "pending" and service.approval_of(suggestion.agent).allows(
        principal.id, principal.roles
    )


async def _item(service: ReactionService, session: Session, s: Suggestion) -> dict[str, Any]:
    approval = service.approval_of(s.agent)
    who = " or ".join(f"the {e} role" if ":" not in e else e for e in approval.by)
    return {
        "who": f"{who} (or the admin role)",
        "s": s,
        "operations": await _proposed(service, s),
        "deciding": _deciding(service, session, s),
        "needed": approval.count,
        **await _version(service, s),
    }


@router.get("/suggestions")
async def suggestions(request: Request, session: Viewing, status: Filter = "pending") -> Response:
    """Suggestions (pending ones by default) with their reasoning and changes."""
    service = service_of(request)
    chosen = status if status in get_args(SuggestionStatus) else None
    found = await service.suggestions(chosen)
    items = [await _item(service, session, s) for s in found]
    return page(
        request,
        "suggestions.html",
        session,
        items=items,
        status=chosen or "",
        statuses=get_args(SuggestionStatus),
    )


@router.get("/suggestions/{suggestion_id}")
async def suggestion_page(request: Request, suggestion_id: str, session: Viewing) -> Response:
    """One suggestion: its changes, who proposed it, its approvals and every decision."""
    service = service_of(request)
    try:
        detail = await suggestion_detail(service, suggestion_id)
    except SuggestionNotFoundError:
        return page(request, "missing.html", session, 404, what=f"suggestion {suggestion_id}")
    editable = operations_adapter.dump_python(detail.operations, mode="json")
    return page(
        request,
        "suggestion.html",
        session,
        item=await _item(service, session, detail),
        detail=detail,
        editable=editable,
    )


def _edited(text: str) -> tuple[Operation, ...]:
    """The operations a modify form holds (JSON).

    Raises:
        ValueError: They are not JSON operations; the message says what to write.
    """
    given = json_field(text)
    try:
        return operations_adapter.validate_python(given if given is not None else [])
    except pydantic.ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'operations'}: {e['msg']}"
            for e in exc.errors(include_url=False)
        )
        raise ValueError(
            f"The changes are not a JSON list of operations ({problems}); write them as "
            'the suggestion shows them, e.g. [{"op": "update", "id": "obj_1", "data": {...}}].'
        ) from None


async def _decide(
    service: ReactionService, session: Session, suggestion_id: str, decision: str, form: Any
) -> str:
    """Carry out one decision as the session's principal; what the notice says."""
    given = form.get("justification")
    justification = given if isinstance(given, str) and given.strip() else None
    principal = session.principal
    if decision == "reject":
        await service.reject(suggestion_id, principal=principal, justification=justification)
        return "rejected"
    force = decision == "approve-anyway" or form.get("force") == "1"
    if decision == "modify":
        operations = form.get("operations")
        edited = _edited(operations if isinstance(operations, str) else "")
        done = await service.modify(
            suggestion_id, edited, principal=principal, force=force, justification=justification
        )
    else:
        done = await service.approve(
            suggestion_id, principal=principal, force=force, justification=justification
        )
    if done.status == "completed":
        return "approved and applied"
    needed = service.approval_of(done.agent).count
    return f"approved ({len(done.approvals)} of {needed} approvals); it waits for more"


@router.post("/suggestions/{suggestion_id}/{decision}")
async def decide(
    request: Request, suggestion_id: str, decision: str, session: Deciding
) -> Response:
    """Approve (anyway: ``approve-anyway``), modify or reject a suggestion as the principal.

    A principal the agent's ``Approval`` does not let decide gets a ``403`` page.
    """
    if decision not in DECISIONS:
        return page(request, "missing.html", session, 404, what=f"decision {decision}")
    service, form = service_of(request), await request.form()
    try:
        done = await _decide(service, session, suggestion_id, decision, form)
    except PermissionDeniedError as refused:
        return page(request, "rejected.html", session, 403, what=str(refused))
    except (ReactorError, ValueError) as exc:
        session.notify("error", str(exc))
    else:
        session.notify("ok", f"Suggestion {suggestion_id} was {done}.")
    back_to = form.get("back")
    if back_to == "suggestion":
        return back(request, f"/suggestions/{suggestion_id}")
    return back(request, "/suggestions")


@router.post("/processing-log/{entry_id}/retry")
async def retry(request: Request, entry_id: EntryId, session: Administering) -> Response:
    """Process a failed or abandoned entry again, as the signed-in user asked."""
    try:
        await retry_entry(service_of(request), entry_id, session.principal)
    except (EntryNotFoundError, RetryRefusedError) as exc:
        session.notify("error", str(exc))
    else:
        session.notify("ok", f"Entry {entry_id} will be processed again.")
    return back(request, "/processing-log")


@router.get("/processing-log")
async def processing_log(
    request: Request,
    session: Viewing,
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
