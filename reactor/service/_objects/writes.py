"""Object writes, committed in groups: many concurrent changes, one transaction.

Under load, a service gets many object changes at once (50 HTTP clients, hundreds of
reactions). Each :meth:`ObjectWrites.submit` queues its change and waits; a writer task
(alive only while changes are queued) takes everything queued so far and applies it in
one transaction, each change in its own savepoint, so that a change that fails (an
unknown object, a stale version) is rolled back alone and raises to its caller, while
the others commit. The events are then emitted in the order of their ids, and each
caller gets its own. Alone, a change is written at once.

An update that changes nothing (every field already holds the value given, or the
type's model dropped what was given) is not a change: no event is stored or emitted,
the version stays, and its caller gets the object as it is.

On an SQLite file the whole transaction runs in one call to the database's writer
thread (:meth:`Database.run_write`): one thread hop per group instead of several per
statement.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa

from reactor._signals.bus import SignalBus
from reactor._signals.frozen import freeze_payload
from reactor.exceptions import ObjectValidationError, ServiceStateError
from reactor.service._objects.changes import Create, Delete, Operation, Update
from reactor.service._objects.db import Database
from reactor.service._objects.rows import object_from_row
from reactor.service._objects.schema import object_events, objects
from reactor.service._objects.values import (
    AgentActor,
    Cause,
    EventKind,
    ObjectEvent,
    StoredObject,
    User,
)

__all__ = [
    "Change",
    "Expected",
    "ObjectWrites",
    "Outcome",
    "changed_fields",
    "holds",
    "new_object_id",
]

MAX_GROUP = 500
"""The most changes committed in one transaction."""

Expected = int | Mapping[str, Any]
"""What an object must be for a change to apply: at a version, or holding field values."""

Outcome = ObjectEvent | StoredObject
"""What one operation came to: its stored event, or (an update that changed nothing)
the object as it is."""


@dataclasses.dataclass(frozen=True)
class Change:
    """One caller's changes: applied together or not at all.

    Attributes:
        operations: Validated operations, in order.
        actor: Who makes them.
        approved_by: Who approved them (an agent's suggestion).
        expect: What objects must be: at a version (``{id: version}``), or holding
            values in some fields (``{id: {field: value}}``, a field the object lacks
            holding ``None``).
        stale: Makes the error of an unmet ``expect``, given the object as it is
            (``None``: deleted).
        cause: The reaction making them, if one is.
        not_found: Makes the error of an unknown object id.
        validate: Validates an object's data for its type (updates merge first).
        also: Statements written in the same transaction, after the operations (the
            processing log's history line of an approval).
    """

    operations: Sequence[Operation]
    actor: User | AgentActor
    approved_by: User | AgentActor | None
    expect: Mapping[str, Expected]
    stale: Callable[[StoredObject | None], Exception]
    cause: Cause | None
    not_found: Callable[[str], Exception]
    validate: Callable[[str, Any], dict[str, Any]]
    also: Sequence[sa.Executable] = ()


class ObjectWrites:
    """The group-commit writer of one object store (see the module).

    Args:
        db: The database.
        bus: Where the stored changes are emitted.
    """

    def __init__(self, db: Database, bus: SignalBus) -> None:
        self.db = db
        self.bus = bus
        self._queue: list[tuple[Change, asyncio.Future[list[Outcome]]]] = []
        self._writer: asyncio.Task[None] | None = None
        self.listeners: list[Callable[[list[ObjectEvent]], object]] = []
        """Called with each group's stored events (in id order) before they are emitted."""

    async def submit(self, change: Change) -> list[Outcome]:
        """Apply ``change`` in the next group; what each of its operations came to.

        Raises:
            Exception: What applying it raised (nothing of it was stored), or what
                the group's commit raised.
        """
        loop = asyncio.get_running_loop()
        future: asyncio.Future[list[Outcome]] = loop.create_future()
        self._queue.append((change, future))
        if self._writer is None or self._writer.done():
            self._writer = loop.create_task(self._write())
        return await asyncio.shield(future)  # a caller's cancel does not undo a commit

    async def stop(self) -> None:
        """Wait for the changes queued so far to be written."""
        writer = self._writer
        if writer is not None and not writer.done():
            await asyncio.shield(writer)

    async def _write(self) -> None:
        """Write queued changes group after group, until none is queued."""
        while self._queue:
            group = self._queue[:MAX_GROUP]
            del self._queue[:MAX_GROUP]
            changes = [change for change, _ in group]
            try:
                outcomes = await self.db.run_write(functools.partial(_apply_group, changes=changes))
            except BaseException as exc:
                for _, future in group:
                    if not future.done():
                        future.set_exception(exc if isinstance(exc, Exception) else _gone())
                if not isinstance(exc, Exception):
                    raise
                continue
            stored = [
                e for o in outcomes if isinstance(o, list) for e in o if isinstance(e, ObjectEvent)
            ]
            for listener in self.listeners if stored else ():
                listener(sorted(stored, key=lambda event: event.event_id))
            for (change, future), outcome in zip(group, outcomes, strict=True):
                if isinstance(outcome, Exception):
                    future.set_exception(outcome)
                    continue
                for event in outcome:
                    if not isinstance(event, ObjectEvent):
                        continue  # nothing changed: nothing to tell
                    payload = freeze_payload(event.payload())
                    self.bus.publish(event.name, payload, str(change.actor), None, 0)
                future.set_result(outcome)


def _gone() -> Exception:
    # The service stopping is not the change's fault: unavailable (503), never invalid.
    return ServiceStateError(
        "The object store was closed while the change was being written; it may not be "
        "stored: read the object again once the service is back."
    )


def _apply_group(conn: sa.Connection, *, changes: list[Change]) -> list[list[Outcome] | Exception]:
    """Apply each change in a savepoint of one transaction; its outcomes, or its error."""
    outcomes: list[list[Outcome] | Exception] = []
    if len(changes) == 1:  # alone: the transaction is its savepoint
        return [_apply(conn, changes[0])]
    for change in changes:
        savepoint = conn.begin_nested()
        try:
            outcomes.append(_apply(conn, change))
        except Exception as exc:
            savepoint.rollback()
            outcomes.append(exc)
        else:
            savepoint.commit()
    return outcomes


def _apply(conn: sa.Connection, change: Change) -> list[Outcome]:
    """Apply one change's operations, in order (raises on the first that fails)."""
    now = datetime.now(UTC)
    for object_id, expected in change.expect.items():
        row = _row(conn, object_id)
        found = None if row is None else object_from_row(row)
        if not holds(found, expected):
            raise change.stale(found)
    outcomes = [_apply_one(conn, op, change, now) for op in change.operations]
    for statement in change.also:
        conn.execute(statement)
    return outcomes


def _apply_one(conn: sa.Connection, op: Operation, change: Change, now: datetime) -> Outcome:
    actor, approved_by = change.actor, change.approved_by
    event: EventKind
    if isinstance(op, Create):
        object_id = op.id or new_object_id()
        if op.id is not None and _row(conn, op.id) is not None:
            raise ObjectValidationError(
                f"An object with id {op.id!r} exists already; leave Create.id empty.",
                type=op.type,
                errors=[],
            )
        type, version, data, old, created = op.type, 1, op.data, {}, now
        event = "created"
        conn.execute(
            _INSERT_OBJECT,
            {"id": object_id, "type": type, "version": 1, "data": data,
             "actor_type": actor.type, "actor_id": actor.id, "created_at": now, "updated_at": now},
        )  # fmt: skip
    else:
        row = _row(conn, op.id)
        if row is None:
            raise change.not_found(op.id)
        object_id, type, old, created = row.id, row.type, dict(row.data), row.created_at
        if isinstance(op, Update):
            data = change.validate(type, {**old, **op.data})
            if not _changes(old, data):
                return object_from_row(row)  # not a change: no event, the version stays
            version, event = row.version + 1, "updated"
            conn.execute(
                _UPDATE_OBJECT,
                {"object": object_id, "version": version, "data": data,
                 "actor_type": actor.type, "actor_id": actor.id, "updated_at": now},
            )  # fmt: skip
        else:
            assert isinstance(op, Delete)
            data, version, event = old, row.version, "deleted"
            conn.execute(_DELETE_OBJECT, {"object": object_id})
    changes = _changes(old, {} if event == "deleted" else data)
    cause = change.cause
    event_id = conn.scalar(
        _INSERT_EVENT,
        {
            "object_id": object_id, "object_type": type, "version": version, "event": event,
            "data": data, "changes": changes, "actor_type": actor.type, "actor_id": actor.id,
            "approved_by_type": approved_by.type if approved_by else None,
            "approved_by_id": approved_by.id if approved_by else None,
            "object_created_at": created, "created_at": now,
            "cause": None if cause is None else cause.payload(),
        },
    )  # fmt: skip
    assert isinstance(event_id, int)
    return ObjectEvent(
        event_id=event_id, id=object_id, type=type, version=version, event=event, data=data,
        changes=changes, actor=actor, approved_by=approved_by, timestamp=now,
        object_created_at=created, cause=cause,
    )  # fmt: skip


def _row(conn: sa.Connection, object_id: str) -> sa.Row[Any] | None:
    return conn.execute(_SELECT_OBJECT, {"object": object_id}).first()


# Built once: a statement with bound parameters is compiled once and found in the
# cache at once (one built per write spent most of a write's time in SQLAlchemy).
_SELECT_OBJECT = sa.select(objects).where(objects.c.id == sa.bindparam("object"))
_INSERT_OBJECT = objects.insert()
_UPDATE_OBJECT = objects.update().where(objects.c.id == sa.bindparam("object"))
_DELETE_OBJECT = objects.delete().where(objects.c.id == sa.bindparam("object"))
_INSERT_EVENT = object_events.insert().returning(object_events.c.event_id)


def changed_fields(basis: Mapping[str, Any], data: Mapping[str, Any]) -> list[str]:
    """The fields of ``basis`` whose value ``data`` no longer holds (a missing one is None)."""
    return [field for field, value in basis.items() if data.get(field) != value]


def holds(found: StoredObject | None, expected: Expected) -> bool:
    """Whether an object (``None``: deleted) is as ``expected``: its version, or its fields."""
    if found is None:
        return False
    if isinstance(expected, int):
        return found.version == expected
    return not changed_fields(expected, found.data)


def new_object_id() -> str:
    """A fresh object id."""
    return f"obj_{uuid.uuid4().hex}"


def _changes(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    """Each top-level field whose value differs: ``{"old": ..., "new": ...}``."""
    return {
        key: {"old": old.get(key), "new": new.get(key)}
        for key in dict.fromkeys([*old, *new])
        if old.get(key) != new.get(key) or (key in old) != (key in new)
    }
