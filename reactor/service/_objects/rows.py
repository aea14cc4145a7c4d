"""Database rows as values (objects, events, log entries, suggestions), and pages of objects.

A page of objects is a keyset page, the most recently changed first: its cursor is the
last object's ``updated_at`` and id, so each page is one indexed read
(``ix_objects_type_updated_at_id``, ``ix_objects_updated_at_id``) of at most a page.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Generic, TypeVar

import pydantic
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from reactor._signals.signal import iso_time
from reactor.exceptions import ServiceConfigError
from reactor.service._objects.changes import Operation, ProcessingEntry, Suggestion
from reactor.service._objects.schema import object_events, objects
from reactor.service._objects.values import (
    AgentActor,
    Cause,
    ObjectEvent,
    StoredObject,
    User,
)

__all__ = [
    "MAX_PAGE",
    "STORED_TYPES",
    "ObjectPage",
    "Page",
    "actor_from_row",
    "bad_cursor",
    "cursor_of",
    "entry_from_row",
    "event_from_row",
    "find_query",
    "keyset_cursor",
    "object_from_row",
    "object_page",
    "operations_adapter",
    "page_query",
    "suggestion_from_row",
]

T = TypeVar("T")

operations_adapter: pydantic.TypeAdapter[tuple[Operation, ...]] = pydantic.TypeAdapter(
    tuple[Operation, ...]
)
"""Reads and writes the operations of a suggestion as JSON data."""


@functools.lru_cache(maxsize=4096)
def actor_from_row(type: str | None, id: str | None) -> User | AgentActor | None:
    """The actor stored in a ``*_type`` / ``*_id`` pair of columns.

    Actors are frozen values and a page names a few of them many times (an agent, the
    feed's user): each is made once and shared.
    """
    if type is None or id is None:
        return None
    return AgentActor(id) if type == "agent" else User(id)


def _actor(type: str, id: str) -> User | AgentActor:
    actor = actor_from_row(type, id)
    assert actor is not None
    return actor


def object_from_row(row: sa.Row[Any], prefix: str = "") -> StoredObject:
    """A row of ``objects`` (its columns named ``<prefix><column>``, when joined)."""
    column = row._mapping
    return StoredObject(
        id=column[f"{prefix}id"],
        type=column[f"{prefix}type"],
        version=column[f"{prefix}version"],
        data=column[f"{prefix}data"],
        actor=_actor(column[f"{prefix}actor_type"], column[f"{prefix}actor_id"]),
        created_at=column[f"{prefix}created_at"],
        updated_at=column[f"{prefix}updated_at"],
    )


def event_from_row(row: sa.Row[Any]) -> ObjectEvent:
    """A row of ``object_events``."""
    return ObjectEvent(
        event_id=row.event_id,
        id=row.object_id,
        type=row.object_type,
        version=row.version,
        event=row.event,
        data=row.data,
        changes=row.changes,
        actor=_actor(row.actor_type, row.actor_id),
        approved_by=actor_from_row(row.approved_by_type, row.approved_by_id),
        timestamp=row.created_at,
        object_created_at=row.object_created_at,
        cause=None if row.cause is None else Cause.model_validate(row.cause),
    )


def entry_from_row(row: sa.Row[Any]) -> ProcessingEntry:
    """A row of ``processing_log``."""
    return ProcessingEntry(
        id=row.id,
        agent=row.agent,
        object_id=row.object_id,
        object_version=row.object_version,
        event_type=row.event_type,
        event_id=row.event_id,
        status=row.status,
        error=row.error,
        run_id=row.run_id,
        created_at=row.created_at,
        updated_at=row.updated_at,
        attempts=row.attempts,
        superseded_by=row.superseded_by,
        cost_usd=row.cost_usd,
    )


def suggestion_from_row(row: sa.Row[Any]) -> Suggestion:
    """A row of ``suggestions``."""
    return Suggestion(
        id=row.id,
        agent=row.agent,
        object_id=row.object_id,
        object_version=row.object_version,
        operations=operations_adapter.validate_python(row.changes),
        reasoning=row.reasoning,
        status=row.status,
        run_id=row.run_id,
        created_at=row.created_at,
        resolved_at=row.resolved_at,
        resolved_by=actor_from_row(row.resolved_by_type, row.resolved_by_id),
        proposer=actor_from_row(row.proposer_type, row.proposer_id),
        basis=row.basis,
        superseded_by=row.superseded_by,
    )


MAX_PAGE = 500
"""Objects a page of :meth:`ObjectStore.page` holds at most."""

STORED_TYPES = sa.text(
    "WITH RECURSIVE found(type) AS (SELECT MIN(type) FROM objects UNION ALL "
    "SELECT (SELECT MIN(type) FROM objects WHERE type > found.type) FROM found "
    "WHERE found.type IS NOT NULL) SELECT type FROM found WHERE type IS NOT NULL LIMIT :limit"
)
"""Each stored type once, one index lookup after another (``ix_objects_type``)."""

_FIELDS = {
    "postgresql": "EXISTS (SELECT 1 FROM jsonb_each(objects.data) AS field WHERE "
    "jsonb_typeof(field.value) = 'string' AND lower(field.value #>> '{}') LIKE :pattern "
    "ESCAPE '\\')",
    "sqlite": "EXISTS (SELECT 1 FROM json_each(objects.data) AS field WHERE "
    "field.type = 'text' AND lower(field.value) LIKE :pattern ESCAPE '\\')",
}
"""An object with a string field that holds ``:pattern`` (the JSON functions differ)."""


@dataclasses.dataclass(frozen=True)
class ObjectPage:
    """A page of :meth:`ObjectStore.page`: its objects, and the cursor of the next page.

    Attributes:
        objects: The objects, the most recently changed first.
        next: Give it as ``after`` for the next page; ``None`` on the last page.
    """

    objects: list[StoredObject]
    next: str | None


@dataclasses.dataclass(frozen=True)
class Page(Generic[T]):
    """A keyset page: its items, the newest first, and the cursor of the next page.

    Attributes:
        items: What the page holds.
        next: Give it as ``after`` for the next page; ``None`` on the last page.
    """

    items: list[T]
    next: str | None


def bad_cursor(text: str, what: str) -> ServiceConfigError:
    """The error of a cursor no page of ``what`` gave (a ``422`` over HTTP)."""
    shown = text if len(text) <= 80 else text[:77] + "..."
    return ServiceConfigError(
        f"{shown!r} is not the cursor of a page of {what}: give the `next` of the page "
        "before as `after`, or leave it out for the first page."
    )


def keyset_cursor(text: str, what: str = "objects") -> tuple[datetime, str]:
    """The moment and id a ``<ISO time>|<id>`` cursor holds.

    Raises:
        ServiceConfigError: It is not one.
    """
    moment, _, last = text.partition("|")
    try:
        when = datetime.fromisoformat(moment)
    except ValueError:
        when = None
    if when is None or when.tzinfo is None or not last:
        raise bad_cursor(text, what)
    return when, last


def cursor_of(moment: datetime, last: str) -> str:
    """The ``<ISO time>|<id>`` cursor after the item of ``moment`` and ``last``."""
    return f"{iso_time(moment)}|{last}"


def _found(search: str, dialect: str) -> sa.ColumnElement[bool]:
    """Objects whose id begins with ``search``, or with a string field holding it."""
    escaped = search.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    fields = sa.text(_FIELDS.get(dialect, _FIELDS["sqlite"])).bindparams(pattern=f"%{escaped}%")
    return sa.or_(objects.c.id.startswith(search, autoescape=True), fields)


def _created_by(who: str) -> sa.ColumnElement[bool]:
    """Objects whose ``created`` event is ``who``'s (``user:id``, ``agent:name`` or an id)."""
    kind, _, name = who.partition(":")
    created = sa.select(object_events.c.event_id).where(
        object_events.c.object_id == objects.c.id,
        object_events.c.version == 1,
        object_events.c.event == "created",
    )
    if name and kind in ("user", "agent"):
        created = created.where(object_events.c.actor_type == kind)
    else:
        name = who
    return sa.exists(created.where(object_events.c.actor_id == name))


def page_query(
    *,
    type: str | None,
    after: str | None,
    limit: int,
    search: str | None,
    since: datetime | None,
    created_by: str | None,
    dialect: str,
) -> sa.Select[Any]:
    """The query of a page of objects (see :meth:`ObjectStore.page`): ``limit`` + 1 rows.

    Raises:
        ServiceConfigError: ``after`` is not a cursor a page gave, or ``limit`` is out
            of range.
    """
    if not 1 <= limit <= MAX_PAGE:
        raise ServiceConfigError(f"limit must be 1 to {MAX_PAGE}, got {limit}.")
    order = (objects.c.updated_at.desc(), objects.c.id.desc())
    query = sa.select(objects).order_by(*order).limit(limit + 1)
    if type is not None:
        query = query.where(objects.c.type == type)
    if after is not None:
        moment, last = keyset_cursor(after)
        query = query.where(
            sa.or_(
                objects.c.updated_at < moment,
                sa.and_(objects.c.updated_at == moment, objects.c.id < last),
            )
        )
    if since is not None:
        query = query.where(objects.c.updated_at >= since)
    if search:
        query = query.where(_found(search, dialect))
    if created_by:
        query = query.where(_created_by(created_by))
    return query


_FIELD_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
_MATCHABLE = (str, int, float, bool, type(None))


def find_query(type: str, where: Mapping[str, Any], *, limit: int, dialect: str) -> sa.Select[Any]:
    """The objects of ``type`` whose data has each field of ``where`` equal to its value.

    The most recently changed first, at most ``limit``. On PostgreSQL one ``@>``
    containment test of the ``jsonb`` data; on SQLite one ``json_extract`` a field.

    Raises:
        ServiceConfigError: A field is not a plain name, a value is not a string, a
            number, a boolean or None, or ``limit`` is out of range.
    """
    if not 1 <= limit <= MAX_PAGE:
        raise ServiceConfigError(f"limit must be 1 to {MAX_PAGE}, got {limit}.")
    for field, value in where.items():
        if not _FIELD_NAME.match(field):
            raise ServiceConfigError(
                f"Cannot find objects by {field!r}: name a top-level field (letters, "
                "digits and '_')."
            )
        if not isinstance(value, _MATCHABLE):
            raise ServiceConfigError(
                f"Cannot find objects by {field}= {type_name(value)}: compare a field with "
                "a string, a number, a boolean or None."
            )
    order = (objects.c.updated_at.desc(), objects.c.id.desc())
    query = sa.select(objects).where(objects.c.type == type).order_by(*order).limit(limit)
    if not where:
        return query
    if dialect == "postgresql":
        data = sa.type_coerce(objects.c.data, postgresql.JSONB)
        return query.where(data.contains(dict(where)))
    for field, value in where.items():
        if value is None:  # a null field, as jsonb's @> has it (a missing one is not null)
            query = query.where(sa.func.json_type(objects.c.data, f"$.{field}") == "null")
        else:
            query = query.where(sa.func.json_extract(objects.c.data, f"$.{field}") == value)
    return query


def type_name(value: Any) -> str:
    """A value's type as a JSON user knows it."""
    return f"a {type(value).__name__}"


def object_page(rows: Sequence[sa.Row[Any]], limit: int) -> ObjectPage:
    """The page the rows of :func:`page_query` make (one more than ``limit``: a next page)."""
    found = [object_from_row(row) for row in rows[:limit]]
    if len(rows) <= limit:
        return ObjectPage(found, None)
    return ObjectPage(found, cursor_of(found[-1].updated_at, found[-1].id))
