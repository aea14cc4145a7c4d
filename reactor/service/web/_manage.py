"""The pages of what people decide and watch: suggestions and the processing log.

A suggestion shows its agent's reasoning and its operations as a diff against the
objects as they are now; approving (anyway: an override, offered only when it is
stale, saying which field it depends on changed), modifying or rejecting it is the
signed-in principal's decision, as the agent's ``Approval`` allows: the forms are shown
only to who may decide, and a decision the service refuses is a ``403`` page. A
suggestion's own page (``/suggestions/{id}``) shows its provenance: the run that
proposed it, its approvals, and every decision made on it. Retrying a processing-log
entry is an ``admin``'s. (The agents page is :mod:`._agents`.)

``/suggestions`` and ``/processing-log`` show one keyset page at a time (50, the newest
first; "Next page" carries the cursor), never everything: a page's objects are read in
one query. An approver rejects the suggestions ticked on the page, or all shown, in one
form (``POST /suggestions/reject``, as ``POST /api/suggestions/reject``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Annotated, Any, NamedTuple, get_args
from urllib.parse import quote

import fastapi
import pydantic
from starlette.requests import Request
from starlette.responses import Response

from reactor._agents.reaction import Approval
from reactor.exceptions import (
    EntryNotFoundError,
    PayloadError,
    PermissionDeniedError,
    ReactorError,
    RetryRefusedError,
    ServiceConfigError,
    SuggestionNotFoundError,
)
from reactor.service._api.objects import EntryId, retry_entry, suggestion_detail
from reactor.service._hosting.service import ReactionService
from reactor.service._objects.changes import (
    Create,
    EntryStatus,
    Operation,
    ProcessingEntry,
    Suggestion,
    SuggestionStatus,
)
from reactor.service._objects.rows import Page, operations_adapter
from reactor.service._objects.suggestions import SuggestionPage
from reactor.service._objects.values import StoredObject
from reactor.service._reactions.bulk import Rejected
from reactor.service._reactions.resolve import judged
from reactor.service.web._render import (
    Administering,
    Approving,
    Deciding,
    Viewing,
    back,
    json_field,
    page,
    service_of,
    when,
)
from reactor.service.web._sessions import Session
from reactor.service.web._summary import DiffLine, operation_diff

__all__ = ["router"]

router = fastapi.APIRouter(include_in_schema=False)

Filter = Annotated[str | None, fastapi.Query()]
Field = Annotated[str, fastapi.Form()]
DECISIONS = ("approve", "approve-anyway", "modify", "reject")
"""The decisions the forms post (``approve-anyway``: an override)."""


async def _objects_now(service: ReactionService, suggestion: Suggestion) -> dict[str, StoredObject]:
    """The objects a suggestion is about or changes, as they are now (one read)."""
    wanted = {suggestion.object_id} if suggestion.object_id else set()
    wanted.update(op.id for op in suggestion.operations if not isinstance(op, Create))
    return await service.objects.get_many(wanted)


@dataclasses.dataclass(frozen=True)
class Proposed:
    """One operation of a suggestion as its card shows it: a diff against the object now."""

    op: str
    target: str
    lines: list[DiffLine]


class Required(NamedTuple):
    """Which decisions on a card must carry a justification (the agent's ``Approval``)."""

    approve: bool
    override: bool
    reject: bool


@dataclasses.dataclass(frozen=True)
class Card:
    """What a suggestion's card shows: its diff, whether it is stale and why, its forms.

    (Attributes, not keys: a page of fifty cards reads them thousands of times.)
    """

    s: Suggestion
    operations: list[Proposed]
    who: str
    needed: int
    deciding: bool
    stale: bool
    changed: tuple[str, ...]
    current_version: int | None
    deleted: bool
    requires: Required
    href: str
    """Its id as a path segment (``/suggestions/{href}``)."""
    run_href: str
    """Its run's id as a path segment (empty: none)."""
    made: str
    """When it was made, as the pages write times (UTC)."""


def _proposed(suggestion: Suggestion, now: Mapping[str, StoredObject]) -> list[Proposed]:
    """Each operation of a suggestion, with its diff against the object as it is now."""
    shown = []
    for operation in suggestion.operations:
        if isinstance(operation, Create):
            current, target = None, operation.type
        else:
            found = now.get(operation.id)
            current, target = (None if found is None else dict(found.data)), operation.id
        shown.append(Proposed(operation.op, target, operation_diff(operation, current)))
    return shown


@dataclasses.dataclass(frozen=True)
class _Policy:
    """What every card of one agent's suggestions says of its ``Approval``."""

    who: str
    needed: int
    allows: bool
    requires: Required

    @classmethod
    def of(cls, approval: Approval, session: Session) -> _Policy:
        who = " or ".join(f"the {e} role" if ":" not in e else e for e in approval.by)
        always = approval.justification == "always"
        principal = session.principal
        return cls(
            who=f"{who} (or the admin role)",
            needed=approval.count,
            allows=approval.allows(principal.id, principal.roles),
            requires=Required(always, approval.justification != "never", always),
        )


def _cards(
    service: ReactionService,
    session: Session,
    suggestions: Iterable[Suggestion],
    now: Mapping[str, StoredObject],
) -> list[Card]:
    """The cards of suggestions, against the objects as they are ``now``."""
    policies: dict[str, _Policy] = {}
    cards = []
    for s in suggestions:
        policy = policies.get(s.agent)
        if policy is None:
            policy = policies[s.agent] = _Policy.of(service.approval_of(s.agent), session)
        found = judged(s, now.get(s.object_id) if s.object_id else None)
        cards.append(
            Card(
                s=s,
                operations=_proposed(s, now),
                who=policy.who,
                needed=policy.needed,
                deciding=s.status == "pending" and policy.allows,
                stale=found.stale and s.status == "pending",
                changed=found.changed,
                current_version=found.version,
                deleted=s.object_id is not None and found.current is None,
                requires=policy.requires,
                href=quote(s.id, safe=""),
                run_href=quote(s.run_id or "", safe=""),
                made=when(s.created_at),
            )
        )
    return cards


@router.get("/suggestions")
async def suggestions(
    request: Request,
    session: Viewing,
    status: Filter = "pending",
    agent: Filter = None,
    object_id: Filter = None,
    after: Filter = None,
) -> Response:
    """A page of suggestions (pending ones by default), their reasoning and changes."""
    service = service_of(request)
    chosen = status if status in get_args(SuggestionStatus) else None
    filters = {"agent": agent or None, "object_id": object_id or None}
    problem, found = None, SuggestionPage([], None)
    try:
        found = await service.suggestion_page(
            status=chosen,
            agent=filters["agent"],
            object_id=filters["object_id"],
            after=after or None,
            with_objects=True,
        )
    except (ServiceConfigError, PayloadError) as exc:
        problem = str(exc)
    items = _cards(service, session, found.items, found.objects)
    query = {key: value for key, value in filters.items() if value}
    return page(
        request,
        "suggestions.html",
        session,
        422 if problem else 200,
        items=items,
        status=chosen or "",
        statuses=get_args(SuggestionStatus),
        agent=agent or "",
        object_id=object_id or "",
        query={"status": chosen or "all", **query},
        next_page=found.next,
        after=after or "",
        problem=problem,
        bulk=any(item.deciding for item in items) and session.principal.may("approver"),
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
    now = await _objects_now(service, detail)
    return page(
        request,
        "suggestion.html",
        session,
        item=_cards(service, session, [detail], now)[0],
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


@router.post("/suggestions/reject")
async def reject_many(request: Request, session: Approving) -> Response:
    """Reject the suggestions ticked on the page (``which=selected``), or all shown."""
    form = await request.form()
    which = "shown" if form.get("which") == "shown" else "ids"
    ids = [value for value in form.getlist(which) if isinstance(value, str)]
    given = form.get("justification")
    justification = given if isinstance(given, str) and given.strip() else None
    if not ids:
        session.notify("error", "No suggestion was ticked: tick those to reject, or reject all.")
    else:
        try:
            done = await service_of(request).reject_many(
                ids, principal=session.principal, justification=justification
            )
        except ReactorError as exc:
            session.notify("error", str(exc))
        else:
            session.notify(*_rejected_notice(done))
    query = {
        key: value
        for key in ("status", "agent", "object_id")
        if isinstance(value := form.get(key), str) and value
    }
    return back(request, "/suggestions", query)


def _rejected_notice(done: Rejected) -> tuple[str, str]:
    """The notice of a bulk rejection: how many were rejected, and the first refusal."""
    said = f"{done.rejected} suggestion{'s' if done.rejected != 1 else ''} rejected."
    if not done.refused:
        return "ok", said
    first = done.refused[0]
    return "error", (f"{said} {len(done.refused)} refused; {first.id}: {first.reason}")


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
    after: Filter = None,
) -> Response:
    """A page of what each reaction agent was given and what became of it, newest first."""
    chosen = status if status in get_args(EntryStatus) else None
    filters = {"agent": agent or None, "object_id": object_id or None, "status": chosen}
    problem, found = None, Page[ProcessingEntry]([], None)
    try:
        found = await service_of(request).processing_page(
            agent=filters["agent"],
            object_id=filters["object_id"],
            status=chosen,
            after=after or None,
        )
    except (ServiceConfigError, PayloadError) as exc:
        problem = str(exc)
    return page(
        request,
        "processing_log.html",
        session,
        422 if problem else 200,
        entries=found.items,
        agent=agent or "",
        object_id=object_id or "",
        status=chosen or "",
        statuses=get_args(EntryStatus),
        query={key: value for key, value in filters.items() if value},
        next_page=found.next,
        after=after or "",
        problem=problem,
    )
