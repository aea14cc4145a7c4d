"""Database rows as values: objects, events, log entries and suggestions."""

from __future__ import annotations

from typing import Any

import pydantic
import sqlalchemy as sa

from reactor.service._objects.changes import Operation, ProcessingEntry, Suggestion
from reactor.service._objects.values import (
    AgentActor,
    Cause,
    ObjectEvent,
    StoredObject,
    User,
)

__all__ = [
    "actor_from_row",
    "entry_from_row",
    "event_from_row",
    "object_from_row",
    "operations_adapter",
    "suggestion_from_row",
]

operations_adapter: pydantic.TypeAdapter[tuple[Operation, ...]] = pydantic.TypeAdapter(
    tuple[Operation, ...]
)
"""Reads and writes the operations of a suggestion as JSON data."""


def actor_from_row(type: str | None, id: str | None) -> User | AgentActor | None:
    """The actor stored in a ``*_type`` / ``*_id`` pair of columns."""
    if type is None or id is None:
        return None
    return AgentActor(id) if type == "agent" else User(id)


def _actor(type: str, id: str) -> User | AgentActor:
    actor = actor_from_row(type, id)
    assert actor is not None
    return actor


def object_from_row(row: sa.Row[Any]) -> StoredObject:
    """A row of ``objects``."""
    return StoredObject(
        id=row.id,
        type=row.type,
        version=row.version,
        data=row.data,
        actor=_actor(row.actor_type, row.actor_id),
        created_at=row.created_at,
        updated_at=row.updated_at,
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
    )
