"""ObjectStore: typed objects in a database, each change stored as an event and emitted."""

from __future__ import annotations

import builtins
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from types import TracebackType
from typing import Any, Self

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from reactor._signals.bus import SignalBus
from reactor._signals.door import check_payload, check_text
from reactor.exceptions import ObjectNotFoundError, ObjectValidationError
from reactor.service._objects.changes import Create, Delete, Operation, Update
from reactor.service._objects.db import DEFAULT_URL, Database, describe_url
from reactor.service._objects.models import ObjectTypes, Types, fields_of
from reactor.service._objects.rows import (
    STORED_TYPES,
    ObjectPage,
    event_from_row,
    find_query,
    object_from_row,
    object_page,
    page_query,
)
from reactor.service._objects.schema import object_events, objects
from reactor.service._objects.values import (
    CURRENT_CAUSE,
    AgentActor,
    ObjectEvent,
    StoredObject,
    User,
    actor_from_context,
)
from reactor.service._objects.writes import Change, Expected, ObjectWrites, Outcome
from stores import current_actor

__all__ = ["ObjectStore"]


class ObjectStore:
    """Typed objects in SQLite or PostgreSQL: ``create``, ``get``, ``update``, ``delete``.

    Every change writes the object and an :class:`ObjectEvent` (the log reactions are
    dispatched from) together, then emits ``object:<Type>:<event>`` on :attr:`bus`
    (an update that changes nothing is no change: no event, the version stays);
    changes made at the same time share one transaction (each in its own savepoint:
    one that fails changes nothing and raises to its caller alone). A change by an
    agent is attributed to it without saying so: the actor
    defaults to the one running now (``stores.current_actor()``: ``AgentActor(name)``
    inside an agent, else ``User("user")``)::

        async with ObjectStore("sqlite:///.reactor/app.db", types=[Person]) as objects:
            ada = await objects.create("Person", {"name": "Ada"}, actor=User("u1"))
            ada = await objects.update(ada.id, {"email": "ada@x.org"}, actor=User("u1"))

    The tables are created (and migrated) when it opens: ``async with``, or on first
    use (then ``await objects.close()`` when done).

    Args:
        url: ``sqlite:///path`` (the default is ``.reactor/app.db``), or
            ``postgresql://user@host:port/dbname``.
        types: pydantic models whose objects are validated, named by their class
            names (or ``{"Person": Person}``). A field a model does not declare is
            refused (``ObjectValidationError``, nothing stored) unless the model's
            ``model_config`` sets ``extra`` itself: ``"allow"`` keeps it, ``"ignore"``
            drops it.
        bus: Where changes are emitted (a new bus by default).
        untyped: Whether objects of a type no model is registered for are stored (as
            they are given, as long as they are JSON objects); with ``False`` creating
            one is an ``ObjectValidationError`` (a misspelled type, say).

    Raises:
        ServiceConfigError: The URL or a type is unusable.
    """

    def __init__(
        self,
        url: str = DEFAULT_URL,
        *,
        types: Types = (),
        bus: SignalBus | None = None,
        untyped: bool = True,
    ):
        self.db = Database(url)
        self._types = ObjectTypes(types, untyped=untyped)
        self.types = self._types.models
        self.bus = bus if bus is not None else SignalBus(history_limit=1000)
        self._writes = ObjectWrites(self.db, self.bus)

    @property
    def untyped(self) -> bool:
        """Whether objects of a type no model is registered for are stored."""
        return self._types.untyped

    @property
    def url(self) -> str:
        """The database's URL."""
        return self.db.url

    # -- lifetime ------------------------------------------------------------------

    async def open(self) -> Self:
        """Connect, and create or migrate the tables (once; later calls return at once).

        Raises:
            DatabaseError: The database cannot be reached or migrated.
        """
        await self.db.open()
        return self

    async def close(self) -> None:
        """Close the database's connections (once the changes under way are written)."""
        await self._writes.stop()
        await self.db.close()

    async def __aenter__(self) -> Self:
        return await self.open()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    # -- changes -------------------------------------------------------------------

    async def create(
        self, type: str, data: Mapping[str, Any], *, actor: User | AgentActor | None = None
    ) -> StoredObject:
        """Store a new object (version 1) and emit ``object:<type>:created``.

        Raises:
            ObjectValidationError: ``data`` does not fit the type (a field its model
                lacks, a value it refuses), or the type is not registered and the store
                takes no untyped objects; nothing was stored.
            PayloadError: The database cannot hold ``data`` or ``type`` (a NUL
                character, a lone surrogate, ``NaN``, a type with no JSON form);
                nothing was stored.
        """
        return await self._one(Create(type, fields_of(type, data)), actor)

    async def update(
        self, id: str, data: Mapping[str, Any], *, actor: User | AgentActor | None = None
    ) -> StoredObject:
        """Change some fields of an object (the others are kept); its version grows by one.

        An update that changes nothing (the fields hold those values already, or the
        model ignores them) stores nothing: the object comes back at its version, no
        event is emitted and no reaction runs.

        Raises:
            ObjectNotFoundError: No object has that id.
            ObjectValidationError: The result does not fit the type (a field its model
                lacks, a value it refuses); nothing changed.
            PayloadError: The database cannot hold ``data`` (a NUL character, a lone
                surrogate, ``NaN``); nothing changed.
        """
        return await self._one(Update(id, fields_of("object", data)), actor)

    async def delete(self, id: str, *, actor: User | AgentActor | None = None) -> StoredObject:
        """Delete an object and emit ``object:<type>:deleted``; return it as it was.

        Raises:
            ObjectNotFoundError: No object has that id.
        """
        return await self._one(Delete(id), actor)

    async def _one(self, op: Operation, actor: User | AgentActor | None) -> StoredObject:
        (outcome,) = await self._submit([op], actor=actor)
        return outcome.object if isinstance(outcome, ObjectEvent) else outcome

    async def apply(
        self,
        operations: Sequence[Operation],
        *,
        actor: User | AgentActor | None = None,
        approved_by: User | AgentActor | None = None,
        expect: Mapping[str, Expected] | None = None,
        stale: Callable[[StoredObject | None], Exception] | None = None,
        also: Sequence[Callable[[sa.Connection], object]] = (),
    ) -> builtins.list[ObjectEvent]:
        """Apply several changes in one transaction: all of them, or (on an error) none.

        Args:
            operations: :class:`Create`, :class:`Update` and :class:`Delete`, in order.
            actor: Who makes them (by default, who is running now).
            approved_by: Who approved them, when they were an agent's suggestion.
            expect: What objects must be, checked in the same transaction: at a
                version (``{id: version}``), or holding values in some fields (``{id:
                {field: value}}``: the others may have changed); otherwise nothing is
                applied and ``stale(current)`` is raised (``current``: the object as
                it is, ``None`` for a deleted one).
            stale: Makes the error of an unmet ``expect``.
            also: Writes of the service's own tables (in this database) made in the
                same transaction, each called with its connection: an approval's line
                of the processing log's history.

        Returns:
            The stored events, in order (an update that changes nothing has none).

        Raises:
            ObjectNotFoundError: An update or delete names an unknown object.
            ObjectValidationError: Some data does not fit its type.
            PayloadError: The database cannot hold some data or id.
        """
        found = await self._submit(
            operations, actor=actor, approved_by=approved_by, expect=expect, stale=stale, also=also
        )
        return [outcome for outcome in found if isinstance(outcome, ObjectEvent)]

    async def _submit(
        self,
        operations: Sequence[Operation],
        *,
        actor: User | AgentActor | None,
        approved_by: User | AgentActor | None = None,
        expect: Mapping[str, Expected] | None = None,
        stale: Callable[[StoredObject | None], Exception] | None = None,
        also: Sequence[Callable[[sa.Connection], object]] = (),
    ) -> builtins.list[Outcome]:
        who = actor if actor is not None else actor_from_context(current_actor())
        await self.open()
        change = Change(
            operations=[self._prepare(op) for op in operations],
            actor=who,
            approved_by=approved_by,
            expect=dict(expect or {}),
            stale=stale or _version_error,
            cause=CURRENT_CAUSE.get(),  # the reaction making it, if one is
            not_found=lambda object_id: _not_found(object_id, self.url),
            validate=self.validate,
            also=tuple(also),
        )
        return await self._writes.submit(change)

    def validate(self, type: str, data: Any) -> dict[str, Any]:
        """``data`` as it would be stored as a ``type``: validated, as JSON data.

        Raises:
            ObjectValidationError: It does not fit (a field the type's model lacks,
                unless the model sets ``extra``; a value it refuses).
            PayloadError: The database cannot hold it (a NUL character, a lone
                surrogate, ``NaN``).
        """
        return self._types.validate(type, data)

    def _prepare(self, op: Operation) -> Operation:
        """``op`` checked where its values enter: what it names, what it stores."""
        if op.id is not None:
            check_text(op.id, "id")
        if not isinstance(op, Create):
            if isinstance(op, Update):
                check_payload(op.data, "data", nul=True)  # early: merged data is validated too
            return op
        data = self.validate(op.type, op.data)
        self._types.check_new(op.type)
        return op.model_copy(update={"data": data})

    @staticmethod
    async def _row(conn: AsyncConnection, object_id: str) -> sa.Row[Any] | None:
        result = await conn.execute(sa.select(objects).where(objects.c.id == object_id))
        return result.first()

    # -- reading -------------------------------------------------------------------

    async def get(self, id: str, *, version: int | None = None) -> StoredObject:
        """The object, now or as it was at ``version`` (from its events; also once deleted).

        Raises:
            ObjectNotFoundError: No object has that id (or never had that version).
        """
        check_text(id, "id")
        await self.open()
        async with self.db.read() as conn:
            if version is None:
                row = await self._row(conn, id)
                if row is None:
                    raise _not_found(id, self.url)
                return object_from_row(row)
            found = await conn.execute(
                sa.select(object_events)
                .where(object_events.c.object_id == id, object_events.c.version == version)
                .order_by(object_events.c.event_id)
                .limit(1)
            )
            event_row = found.first()
        if event_row is None:
            raise ObjectNotFoundError(
                f"Object {id!r} has no version {version} in {describe_url(self.url)}.",
                object_id=id,
            )
        return event_from_row(event_row).object

    async def get_many(self, ids: Iterable[str]) -> dict[str, StoredObject]:
        """The objects of these ids as they are now, by id (those that exist; one read)."""
        wanted = sorted(set(ids))
        for id in wanted:
            check_text(id, "id")
        if not wanted:
            return {}
        await self.open()
        async with self.db.read() as conn:
            rows = await conn.execute(sa.select(objects).where(objects.c.id.in_(wanted)))
            return {row.id: object_from_row(row) for row in rows}

    async def list(
        self, type: str | None = None, *, limit: int | None = None
    ) -> builtins.list[StoredObject]:
        """Objects (of ``type``, or all), oldest first."""
        if type is not None:
            check_text(type, "type")
        await self.open()
        query = sa.select(objects).order_by(objects.c.created_at, objects.c.id).limit(limit)
        if type is not None:
            query = query.where(objects.c.type == type)
        async with self.db.read() as conn:
            rows = (await conn.execute(query)).all()
        return [object_from_row(row) for row in rows]

    async def find(
        self, type: str, where: Mapping[str, Any] | None = None, *, limit: int = 50
    ) -> builtins.list[StoredObject]:
        """The objects of ``type`` whose data has each field of ``where`` equal to its value.

        The most recently changed first, at most ``limit`` (1 to 500), in one query:
        ``find("Quote", {"symbol": "AAPL"})``.

        Raises:
            ServiceConfigError: A field is not a top-level name, a value is not a
                string, a number, a boolean or None, or ``limit`` is out of range.
        """
        check_text(type, "type")
        where = dict(where or {})
        for field, value in where.items():
            check_text(field, "field")
            if isinstance(value, str):
                check_text(value, field)
        query = find_query(type, where, limit=limit, dialect=self.db.dialect)
        await self.open()
        async with self.db.read() as conn:
            rows = (await conn.execute(query)).all()
        return [object_from_row(row) for row in rows]

    async def page(
        self,
        type: str | None = None,
        *,
        after: str | None = None,
        limit: int = 50,
        search: str | None = None,
        since: datetime | None = None,
        created_by: str | None = None,
    ) -> ObjectPage:
        """One page of objects (of ``type``, or all), the most recently changed first.

        Pages are keyset pages, each one indexed read of at most ``limit`` objects,
        whatever the store holds: pass a page's ``next`` as ``after`` for the next one.

        Args:
            type: Only objects of this type.
            after: The cursor of the page before (its :attr:`ObjectPage.next`).
            limit: Objects a page holds at most (1 to 500).
            search: Objects whose id begins with it, or with a field (a string) that
                holds it, in any case: a title, a name, a symbol.
            since: Objects changed at or after this time.
            created_by: Objects created by this actor: ``user:alice``, ``agent:enrich``,
                or an id alone (either).

        Raises:
            ServiceConfigError: ``after`` is not a cursor a page gave, or ``limit`` is
                out of range.
        """
        given = {"type": type, "after": after, "search": search, "created_by": created_by}
        for name, text in given.items():
            if text is not None:
                check_text(text, name)
        query = page_query(
            type=type,
            after=after,
            limit=limit,
            search=search,
            since=since,
            created_by=created_by,
            dialect=self.db.dialect,
        )
        await self.open()
        async with self.db.read() as conn:
            return object_page((await conn.execute(query)).all(), limit)

    async def stored_types(self, limit: int = 200) -> builtins.list[str]:
        """The types of the stored objects, in order (at most ``limit``).

        One indexed step per type (a loose index scan), never a read of every object.
        """
        await self.open()
        async with self.db.read() as conn:
            rows = await conn.execute(STORED_TYPES, {"limit": limit})
            return [str(row[0]) for row in rows]

    async def events(
        self,
        object_id: str | None = None,
        since: int | datetime | None = None,
        *,
        limit: int | None = None,
        ids: Iterable[int] | None = None,
        before: int | None = None,
        newest_first: bool = False,
    ) -> builtins.list[ObjectEvent]:
        """Stored changes in the order they were made (``newest_first``: the other way).

        Args:
            object_id: Only this object's.
            since: Only those after this ``event_id``, or after this time.
            limit: At most this many.
            ids: Only the events with these ids.
            before: Only those before this ``event_id`` (to page back through them).
            newest_first: The newest first (with ``limit``: the latest ones).
        """
        if object_id is not None:
            check_text(object_id, "object_id")
        await self.open()
        order = object_events.c.event_id.desc() if newest_first else object_events.c.event_id
        query = sa.select(object_events).order_by(order).limit(limit)
        if before is not None:
            query = query.where(object_events.c.event_id < before)
        if ids is not None:
            query = query.where(object_events.c.event_id.in_(sorted(set(ids))))
        if object_id is not None:
            query = query.where(object_events.c.object_id == object_id)
        if isinstance(since, datetime):
            query = query.where(object_events.c.created_at > since)
        elif since is not None:
            query = query.where(object_events.c.event_id > since)
        async with self.db.read() as conn:
            rows = (await conn.execute(query)).all()
        return [event_from_row(row) for row in rows]

    async def last_event_id(self) -> int:
        """The id of the newest stored event (0 when there is none)."""
        await self.open()
        async with self.db.read() as conn:
            found = await conn.scalar(sa.select(sa.func.max(object_events.c.event_id)))
        return int(found or 0)

    def on_written(
        self, listener: Callable[[builtins.list[ObjectEvent]], object]
    ) -> Callable[[], None]:
        """Call ``listener`` with the events of each group of writes made here; a stopper.

        In id order, once committed (other processes' writes are not seen).
        """
        self._writes.listeners.append(listener)
        return lambda: self._writes.listeners.remove(listener)

    def __repr__(self) -> str:
        return f"<ObjectStore {describe_url(self.url)} types={sorted(self.types)}>"


def _version_error(current: StoredObject | None) -> Exception:
    now = "was deleted" if current is None else f"is at version {current.version}"
    return ObjectValidationError(
        f"The object {now}, not as the change expected; nothing was applied.",
        type="object",
        errors=[],
    )


def _not_found(object_id: str, url: str) -> ObjectNotFoundError:
    return ObjectNotFoundError(
        f"No object {object_id!r} in {describe_url(url)} (it may have been deleted); "
        "list the objects with objects.list().",
        object_id=object_id,
    )
