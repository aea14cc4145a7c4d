"""The objects pages: ``/objects`` (by type, filtered, in pages) and an object's page.

The list is one keyset page of :meth:`ObjectStore.page` at a time (the most recently
changed first; "Next page" carries the cursor), never every object. An object's page
shows its data, its history a page of changes at a time (newest first: each version's
changes and data, who made it and through what: the reaction and its run, the
suggestion approved, the run of a graph's or a scheduled agent), the reactions each
change caused (their processing-log entries, with their runs, or why one was skipped),
and the newest runs it caused (runs tagged ``object=<id>``: every reaction run is).
Reads are the database's (async) and the store's (``listed_runs``, off the loop).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

import fastapi
from starlette.requests import Request
from starlette.responses import Response

from reactor._signals.names import SUGGESTION_DECIDED
from reactor.exceptions import ObjectNotFoundError, ServiceConfigError
from reactor.service._api.base import MAX_CURSOR
from reactor.service._api.runs import listed_runs
from reactor.service._hosting.service import ReactionService
from reactor.service._objects.changes import ProcessingEntry
from reactor.service._objects.values import ObjectEvent, StoredObject
from reactor.service.web._render import Viewing, back, page, service_of

__all__ = ["HISTORY", "PAGE", "router"]

router = fastapi.APIRouter(include_in_schema=False)

PAGE = 50
"""Objects a page of ``/objects`` shows."""
HISTORY = 20
"""Changes a page of an object's history shows."""
RUNS = 20
"""Runs an object's page lists (the newest; the runs list has the others)."""
DECISIONS = 20
"""Decisions on its suggestions an object's page shows (the newest)."""

Filter = Annotated[str | None, fastapi.Query()]


def _since(text: str) -> datetime:
    """``YYYY-MM-DD`` or ``YYYY-MM-DDTHH:MM[:SS]`` (UTC unless it says otherwise).

    Raises:
        ValueError: It is neither; the message says what to write.
    """
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(
            f"Changed since: {text!r} is not a date; write 2026-11-28 or 2026-11-28T09:30 (UTC)."
        ) from None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


async def _types(service: ReactionService, chosen: str) -> list[str]:
    """The types to pick from: those stored, registered or reacted to (and the chosen one)."""
    named = {t for reaction in service.reactions.values() for t in reaction.reaction.types}
    found = set(await service.objects.stored_types()) | set(service.objects.types) | named
    return sorted(found | ({chosen} if chosen else set()))


@router.get("/objects")
async def objects_page(
    request: Request,
    session: Viewing,
    type: Filter = None,
    q: Filter = None,
    since: Filter = None,
    by: Filter = None,
    after: Filter = None,
) -> Response:
    """Objects of a type (or all), the most recently changed first, a page at a time."""
    service = service_of(request)
    filters = {"type": type or "", "q": q or "", "since": since or "", "by": by or ""}
    problem, found, next_page = None, [], None
    try:
        listed = await service.objects.page(
            type or None,
            after=after or None,
            limit=PAGE,
            search=(q or "").strip() or None,
            since=_since(since) if since else None,
            created_by=(by or "").strip() or None,
        )
    except (ValueError, ServiceConfigError) as exc:  # a date or a cursor it cannot read
        problem = str(exc)
    else:
        found, next_page = listed.objects, listed.next
    return page(
        request,
        "objects.html",
        session,
        objects=found,
        types=await _types(service, filters["type"]),
        filters=filters,
        query={key: value for key, value in filters.items() if value},
        after=after or "",
        next_page=next_page,
        problem=problem,
        filtered=any(filters.values()),
    )


async def _latest(service: ReactionService, object_id: str) -> ObjectEvent | None:
    """The object's last change (of a deleted object: its deletion), if it ever was."""
    found = await service.objects.events(object_id, limit=1, newest_first=True)
    return found[0] if found else None


@router.get("/objects/{object_id}")
async def object_by_id(request: Request, object_id: str, session: Viewing) -> Response:
    """An object found by its id alone (the processing log and the runs link so)."""
    last = await _latest(service_of(request), object_id)
    if last is None:
        return page(request, "missing.html", session, 404, what=f"object {object_id}")
    return back(request, f"/objects/{last.type}/{object_id}")


Before = Annotated[int | None, fastapi.Query(ge=1, le=MAX_CURSOR)]


@router.get("/objects/{type}/{object_id}")
async def object_page(
    request: Request, type: str, object_id: str, session: Viewing, before: Before = None
) -> Response:
    """An object: its data, its history (a page of changes), and the runs it caused."""
    service = service_of(request)
    current: StoredObject | None
    try:
        current = await service.objects.get(object_id)
    except ObjectNotFoundError:
        current = None
    last = await _latest(service, object_id)
    if last is None:
        return page(request, "missing.html", session, 404, what=f"object {object_id}")
    if last.type != type:
        return back(request, f"/objects/{last.type}/{object_id}")
    changes = await service.objects.events(
        object_id, before=before, limit=HISTORY + 1, newest_first=True
    )
    shown = changes[:HISTORY]
    caused = await _caused(service, object_id, shown)
    tagged = f"object={object_id}"
    decisions = await _decisions(service, object_id)
    runs = [] if service.record is None else await listed_runs(service, tag=tagged, limit=RUNS)
    return page(
        request,
        "object.html",
        session,
        object=current or last.object,
        deleted=current is None,
        history=[{"event": event, "caused": caused.get(event.event_id, [])} for event in shown],
        older=shown[-1].event_id if len(changes) > HISTORY else None,
        before=before,
        runs=runs,
        listed=RUNS,
        tagged=tagged,
        decisions=decisions,
        listed_decisions=DECISIONS,
    )


async def _decisions(service: ReactionService, object_id: str) -> list[dict[str, Any]]:
    """The latest decisions on the suggestions about the object (their history's lines)."""
    await service.db.open()
    history = service.suggestion_store.history
    found = await history.list(object_id=object_id, limit=DECISIONS, newest_first=True)
    return [entry.payload for entry in found if entry.name == SUGGESTION_DECIDED]


async def _caused(
    service: ReactionService, object_id: str, events: list[ObjectEvent]
) -> dict[int, list[ProcessingEntry]]:
    """The processing-log entries of each change shown: what each reaction became."""
    if not events:
        return {}
    await service.db.open()
    entries = await service.log.entries(
        object_id=object_id, events=[event.event_id for event in events]
    )
    found: dict[int, list[ProcessingEntry]] = {}
    for entry in entries:
        found.setdefault(entry.event_id, []).append(entry)
    return found
