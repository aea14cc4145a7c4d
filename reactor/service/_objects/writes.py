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

The events are hash-chained (``history.RowChain``): each event stored is read back as
inserted, and at the end of the group's transaction (under the lock that orders object
writes) the events of the changes that were kept are linked in id order.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa

from reactor._recording.chain import configured
from reactor._recording.info import sortable_id
from reactor._signals.bus import SignalBus
from reactor._signals.frozen import freeze_payload
from reactor.exceptions import ObjectValidationError, ServiceStateError
from reactor.service._objects.changes import Create, Delete, Operation, Update
from reactor.service._objects.db import Database
from reactor.service._objects.history import RowChain
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
        also: Writes made in the same transaction, after the operations, each called
            with its connection (the processing log's history line of an approval).
    """

    operations: Sequence[Operation]
    actor: User | AgentActor
    approved_by: User | AgentActor | None
    expect: Mapping[str, Expected]
    stale: Callable[[StoredObject | None], Exception]
    cause: Cause | None
    not_found: Callable[[str], Exception]
    validate: Callable[[str, Any], dict[str, Any]]
    also: Sequence[Callable[[sa.Connection], object]] = ()


class ObjectWrites:
    """The group-commit writer of one object store (see the module).

    Args:
        db: The database.
        bus: Where the stored changes are emitted.
    """

    def __init__(self, db: Database, bus: SignalBus) -> None:
        self.db = db
        self.bus = bus
        self.chain: RowChain | None = None
        """The events' hash chain, linked by each group (its head kept between them);
        made at the first write, as the settings say then."""
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

    async def _commit(self, changes: list[Change]) -> list[list[Outcome] | Exception]:
        """One group's transaction, its events linked into their chain.

        The chain is made at the first write, as the settings say then (a bad setting
        fails that write, not the making of the store).
        """
        if self.chain is None:
            self.chain = RowChain(object_events, configured())
        chain = self.chain
        try:
            outcomes = await self.db.run_write(
                functools.partial(_apply_group, changes=changes, chain=chain)
            )
        except BaseException:
            chain.discarded()
            raise
        chain.committed()
        return outcomes

    async def _write(self) -> None:
        """Write queued changes group after group, until none is queued."""
        while self._queue:
            group = self._queue[:MAX_GROUP]
            del self._queue[:MAX_GROUP]
            changes = [change for change, _ in group]
            try:
                outcomes = await self._commit(changes)
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


def _apply_group(
    conn: sa.Connection, *, changes: list[Change], chain: RowChain
) -> list[list[Outcome] | Exception]:
    """Apply the changes of a group in one transaction; each one's outcomes, or its error.

    The group is planned in memory first (the objects it touches read in one query,
    each change checked against what the changes before it left), then written with a
    few statements for all of them (one insert of every event, their ids returned in
    order). A change that fails is left out of the plan and raises to its caller alone.
    Should the bulk write fail all the same (a row changed under it), it is undone and
    each change is applied again in a savepoint of its own, as one at a time would.
    The events kept are linked into the events' ``chain`` at the end, in the transaction.
    """
    if len(changes) == 1:  # alone: the transaction is its savepoint
        outcomes: list[list[Outcome] | Exception] = [_apply(conn, changes[0], chain)]
    else:
        bulk, mark = conn.begin_nested(), chain.mark()
        try:
            outcomes = _Plan(conn, changes, chain).write(conn)
        except Exception:
            bulk.rollback()
            chain.rollback(mark)
            outcomes = _one_by_one(conn, changes, chain)
        else:
            bulk.commit()
    chain.link(conn)
    return outcomes


def _one_by_one(
    conn: sa.Connection, changes: list[Change], chain: RowChain
) -> list[list[Outcome] | Exception]:
    """Apply each change in a savepoint of its own (what a failed bulk write falls back to)."""
    outcomes: list[list[Outcome] | Exception] = []
    for change in changes:
        savepoint, mark = conn.begin_nested(), chain.mark()
        try:
            outcomes.append(_apply(conn, change, chain))
        except Exception as exc:
            savepoint.rollback()
            chain.rollback(mark)
            outcomes.append(exc)
        else:
            savepoint.commit()
    return outcomes


@dataclasses.dataclass
class _Current:
    """An object as the group has left it so far (``None`` data: deleted in the group)."""

    type: str
    version: int
    data: dict[str, Any] | None
    created_at: datetime
    row: sa.Row[Any] | None  # as read, for an update that changes nothing


class _Plan:
    """A group's changes planned against the objects they touch, then written at once."""

    def __init__(self, conn: sa.Connection, changes: list[Change], chain: RowChain) -> None:
        self.now = datetime.now(UTC)
        self.changes, self.chain = changes, chain
        self.current = _read(conn, changes)
        self.created: dict[str, dict[str, Any]] = {}  # new objects' rows, by id
        self.updated: dict[str, dict[str, Any]] = {}  # existing objects' last values, by id
        self.deleted: set[str] = set()
        self.events: list[dict[str, Any]] = []  # the events' rows, in order
        self._event_change: list[Change] = []  # the change of each
        self.also: list[Callable[[sa.Connection], object]] = []

    def write(self, conn: sa.Connection) -> list[list[Outcome] | Exception]:
        """Plan every change, write what they did; each change's outcomes or error.

        Raises:
            _Replan: The group cannot be planned in memory.
            Exception: A statement failed (the caller undoes the bulk write).
        """
        planned = [self._change(change) for change in self.changes]
        ids = self._statements(conn)
        return [
            item if isinstance(item, Exception) else [self._outcome(o, ids) for o in item]
            for item in planned
        ]

    def _outcome(self, planned: int | StoredObject, ids: Sequence[int]) -> Outcome:
        """An operation's outcome: its event (by its place in the plan), or the object."""
        if isinstance(planned, StoredObject):
            return planned
        row, change = self.events[planned], self._event_change[planned]
        return ObjectEvent(
            event_id=ids[planned],
            id=row["object_id"],
            type=row["object_type"],
            version=row["version"],
            event=row["event"],
            data=row["data"],
            changes=row["changes"],
            actor=change.actor,
            approved_by=change.approved_by,
            timestamp=row["created_at"],
            object_created_at=row["object_created_at"],
            cause=change.cause,
        )

    def _change(self, change: Change) -> list[int | StoredObject] | Exception:
        """One change planned: all of it, or (it fails) nothing of it."""
        saved = (dict(self.current), dict(self.created), dict(self.updated), set(self.deleted))
        events = len(self.events)
        try:
            for object_id, expected in change.expect.items():
                found = self._as_stored(self.current.get(object_id))
                if not holds(found, expected):
                    raise change.stale(found)
            outcomes = [self._operation(op, change) for op in change.operations]
        except _Replan:
            raise
        except Exception as exc:
            self.current, self.created, self.updated, self.deleted = saved
            del self.events[events:]
            del self._event_change[events:]
            return exc
        self.also.extend(change.also)
        return outcomes

    def _operation(self, op: Operation, change: Change) -> int | StoredObject:
        if isinstance(op, Create):
            return self._create(op, change)
        found = self.current.get(op.id)
        if found is None or found.data is None:
            raise change.not_found(op.id)
        if isinstance(op, Update):
            data = change.validate(found.type, {**found.data, **op.data})
            if not _changes(found.data, data):
                return self._as_it_is(found)
            now = dataclasses.replace(found, version=found.version + 1, data=data)
            self.current[op.id] = now
            values = {
                "version": now.version,
                "data": data,
                "actor_type": change.actor.type,
                "actor_id": change.actor.id,
                "updated_at": self.now,
            }
            if op.id in self.created:
                self.created[op.id] = {**self.created[op.id], **values}
            else:
                self.updated[op.id] = values
            return self._event(change, op.id, "updated", found.data, data, now.version)
        assert isinstance(op, Delete)
        self.current[op.id] = dataclasses.replace(found, data=None)
        if self.created.pop(op.id, None) is None:
            self.deleted.add(op.id)
        self.updated.pop(op.id, None)
        return self._event(change, op.id, "deleted", found.data, found.data, found.version)

    def _create(self, op: Create, change: Change) -> int:
        object_id = op.id or new_object_id()
        found = self.current.get(object_id)
        if found is not None and (found.data is not None or object_id in self.deleted):
            if found.data is not None:
                raise ObjectValidationError(
                    f"An object with id {op.id!r} exists already; leave Create.id empty.",
                    type=op.type,
                    errors=[],
                )
            raise _Replan()  # made again after its delete in the group: one at a time
        self.current[object_id] = _Current(op.type, 1, dict(op.data), self.now, None)
        self.created[object_id] = {
            "id": object_id,
            "type": op.type,
            "version": 1,
            "data": dict(op.data),
            "actor_type": change.actor.type,
            "actor_id": change.actor.id,
            "created_at": self.now,
            "updated_at": self.now,
        }
        return self._event(change, object_id, "created", {}, op.data, 1)

    @staticmethod
    def _as_stored(found: _Current | None) -> StoredObject | None:
        """An object as stored (``None``: there is none), for an ``expect`` to check."""
        if found is None or (found.row is None and found.data is None):
            return None
        if found.row is None or found.row.version != found.version or found.data is None:
            raise _Replan()  # made or changed earlier in the group: one at a time says
        return object_from_row(found.row)

    @staticmethod
    def _as_it_is(found: _Current) -> StoredObject:
        """An update that changed nothing: the object as it is."""
        if found.row is not None and found.row.version == found.version:
            return object_from_row(found.row)
        raise _Replan()  # changed earlier in the group: the one-at-a-time path says

    def _event(
        self,
        change: Change,
        object_id: str,
        event: EventKind,
        old: Mapping[str, Any],
        data: Mapping[str, Any],
        version: int,
    ) -> int:
        """Plan an event's row; its place in the plan."""
        found, actor, approved_by = self.current[object_id], change.actor, change.approved_by
        self.events.append(
            {
                "object_id": object_id,
                "object_type": found.type,
                "version": version,
                "event": event,
                "data": dict(data),
                "changes": _changes(old, {} if event == "deleted" else data),
                "actor_type": actor.type,
                "actor_id": actor.id,
                "approved_by_type": approved_by.type if approved_by else None,
                "approved_by_id": approved_by.id if approved_by else None,
                "object_created_at": found.created_at,
                "created_at": self.now,
                "cause": None if change.cause is None else change.cause.payload(),
            }
        )
        self._event_change.append(change)
        return len(self.events) - 1

    def _statements(self, conn: sa.Connection) -> list[int]:
        """Write the plan: objects created, updated and deleted, then the events (their ids)."""
        if self.deleted:
            conn.execute(_DELETE_OBJECTS, {"objects": sorted(self.deleted)})
        if self.created:
            conn.execute(_INSERT_OBJECT, list(self.created.values()))
        if self.updated:
            conn.execute(
                _UPDATE_OBJECT,
                [{**values, "object": object_id} for object_id, values in self.updated.items()],
            )
        ids: list[int] = []
        if self.events:
            for row in conn.execute(_INSERT_EVENTS, self.events):
                self.chain.add(row)
                ids.append(row.event_id)
        for write in self.also:
            write(conn)
        return ids


class _Replan(Exception):
    """The group cannot be planned in memory: apply it one change at a time."""


def _read(conn: sa.Connection, changes: list[Change]) -> dict[str, _Current]:
    """The objects a group's changes touch, as stored (one query per 500)."""
    wanted = sorted(
        {
            *(op.id for change in changes for op in change.operations if op.id is not None),
            *(object_id for change in changes for object_id in change.expect),
        }
    )
    found: dict[str, _Current] = {}
    for start in range(0, len(wanted), MAX_GROUP):
        chunk = wanted[start : start + MAX_GROUP]
        for row in conn.execute(_SELECT_OBJECTS, {"objects": chunk}):
            found[row.id] = _Current(row.type, row.version, dict(row.data), row.created_at, row)
    return found


def _apply(conn: sa.Connection, change: Change, chain: RowChain) -> list[Outcome]:
    """Apply one change's operations, in order (raises on the first that fails)."""
    now = datetime.now(UTC)
    for object_id, expected in change.expect.items():
        row = _row(conn, object_id)
        found = None if row is None else object_from_row(row)
        if not holds(found, expected):
            raise change.stale(found)
    outcomes = [_apply_one(conn, op, change, now, chain) for op in change.operations]
    for write in change.also:
        write(conn)
    return outcomes


def _apply_one(
    conn: sa.Connection, op: Operation, change: Change, now: datetime, chain: RowChain
) -> Outcome:
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
            {
                "id": object_id,
                "type": type,
                "version": 1,
                "data": data,
                "actor_type": actor.type,
                "actor_id": actor.id,
                "created_at": now,
                "updated_at": now,
            },
        )
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
                {
                    "object": object_id,
                    "version": version,
                    "data": data,
                    "actor_type": actor.type,
                    "actor_id": actor.id,
                    "updated_at": now,
                },
            )
        else:
            assert isinstance(op, Delete)
            data, version, event = old, row.version, "deleted"
            conn.execute(_DELETE_OBJECT, {"object": object_id})
    changes = _changes(old, {} if event == "deleted" else data)
    cause = change.cause
    stored = conn.execute(
        _INSERT_EVENT,
        {
            "object_id": object_id,
            "object_type": type,
            "version": version,
            "event": event,
            "data": data,
            "changes": changes,
            "actor_type": actor.type,
            "actor_id": actor.id,
            "approved_by_type": approved_by.type if approved_by else None,
            "approved_by_id": approved_by.id if approved_by else None,
            "object_created_at": created,
            "created_at": now,
            "cause": None if cause is None else cause.payload(),
        },
    ).one()
    chain.add(stored)
    event_id = stored.event_id
    assert isinstance(event_id, int)
    return ObjectEvent(
        event_id=event_id,
        id=object_id,
        type=type,
        version=version,
        event=event,
        data=data,
        changes=changes,
        actor=actor,
        approved_by=approved_by,
        timestamp=now,
        object_created_at=created,
        cause=cause,
    )


def _row(conn: sa.Connection, object_id: str) -> sa.Row[Any] | None:
    return conn.execute(_SELECT_OBJECT, {"object": object_id}).first()


# Built once: a statement with bound parameters is compiled once and found in the
# cache at once (one built per write spent most of a write's time in SQLAlchemy).
_SELECT_OBJECT = sa.select(objects).where(objects.c.id == sa.bindparam("object"))
_INSERT_OBJECT = objects.insert()
_UPDATE_OBJECT = objects.update().where(objects.c.id == sa.bindparam("object"))
_DELETE_OBJECT = objects.delete().where(objects.c.id == sa.bindparam("object"))
_INSERT_EVENT = object_events.insert().returning(*RowChain.columns(object_events))
_INSERT_EVENTS = object_events.insert().returning(
    *RowChain.columns(object_events), sort_by_parameter_order=True
)
_SELECT_OBJECTS = sa.select(objects).where(
    objects.c.id.in_(sa.bindparam("objects", expanding=True))
)
_DELETE_OBJECTS = objects.delete().where(objects.c.id.in_(sa.bindparam("objects", expanding=True)))


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
    """A fresh object id: ``obj_``, 12 hex digits of the time, 20 random ones (they sort by age)."""
    return sortable_id("obj_", 20)


def _changes(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    """Each top-level field whose value differs: ``{"old": ..., "new": ...}``."""
    return {
        key: {"old": old.get(key), "new": new.get(key)}
        for key in dict.fromkeys([*old, *new])
        if old.get(key) != new.get(key) or (key in old) != (key in new)
    }
