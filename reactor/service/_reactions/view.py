"""``ctx.objects``: the object store as one agent, within its capabilities.

A reaction's agent sees :class:`AgentObjects` (its changes follow its execution mode);
every other run of the service (a graph's agents, cron and manual agents) sees
:class:`RunObjects`, whose changes are applied at once as the agent making them.
Templates see neither: they see an :class:`~reactor._agents.sandbox.ObjectsView`
whose reads return plain dicts (``objects.get(id)``, ``objects.find(type, **fields)``,
``objects.list(type)``), and nothing else of the store.
"""

from __future__ import annotations

import builtins
import contextlib
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from typing import Any, Literal

from reactor._agents.reaction import Capabilities, ExecutionMode
from reactor._agents.sandbox import ObjectsView, register_template_value
from reactor._signals.bus import current_signal
from reactor._signals.diagnostics import log
from reactor._signals.frozen import freeze_payload
from reactor._signals.names import CAPABILITY_DENIED, agent_actor
from reactor._signals.payloads import CapabilityDenied
from reactor.exceptions import CapabilityError
from reactor.service._objects.changes import Create, Delete, Operation, Update
from reactor.service._objects.objects import ObjectStore
from reactor.service._objects.values import (
    CURRENT_CAUSE,
    AgentActor,
    Cause,
    ObjectEvent,
    StoredObject,
    actor_from_context,
)
from reactor.service._objects.writes import new_object_id
from stores import current_actor

__all__ = ["AgentObjects", "RunObjects", "check_capability"]

OperationName = Literal["create", "update", "delete"]


def check_capability(
    objects: ObjectStore,
    agent: str,
    capabilities: Capabilities,
    operation: OperationName,
    type: str,
    object_id: str | None = None,
) -> None:
    """Refuse a change outside the agent's capabilities, before anything changes.

    A refusal is logged at error level (with the agent, the operation and the type)
    and emitted as ``capability:denied`` on the store's bus.

    Raises:
        CapabilityError: The change is not allowed.
    """
    reason = capabilities.denies(operation, type)
    if reason is None:
        return
    log(
        "reactor.service",
        "error",
        "capability denied",
        agent=agent,
        operation=operation,
        type=type,
        object_id=object_id,
        reason=reason,
    )
    payload: CapabilityDenied = {
        "agent": agent,
        "operation": operation,
        "type": type,
        "object_id": object_id,
        "reason": reason,
    }
    objects.bus.publish(CAPABILITY_DENIED, freeze_payload(payload), agent_actor(agent), None, 0)
    target = f" {object_id}" if object_id else ""
    raise CapabilityError(
        f"Agent {agent!r} may not {operation} the {type} object{target}: {reason}. Nothing "
        "was changed; widen the agent's capabilities=Capabilities(...) if it should.",
        agent=agent,
        operation=operation,
        type=type,
    )


class _Reads:
    """What every view of the store reads as it is: reading needs no capability."""

    store: ObjectStore

    async def get(self, id: str, *, version: int | None = None) -> StoredObject:
        """The object (see :meth:`ObjectStore.get`)."""
        return await self.store.get(id, version=version)

    async def list(
        self, type: str | None = None, *, limit: int | None = None
    ) -> builtins.list[StoredObject]:
        """Objects (see :meth:`ObjectStore.list`)."""
        return await self.store.list(type, limit=limit)

    async def events(
        self, object_id: str | None = None, since: int | datetime | None = None
    ) -> builtins.list[ObjectEvent]:
        """Stored changes (see :meth:`ObjectStore.events`)."""
        return await self.store.events(object_id, since)


def _plain(stored: StoredObject) -> dict[str, Any]:
    return stored.model_dump(mode="json")


def _template_view(view: _Reads) -> ObjectsView:
    """What templates see of a view: three reads, each returning plain dicts."""
    store = view.store

    async def get(id: str) -> dict[str, Any]:
        return _plain(await store.get(str(id)))

    async def find(type: str, **fields: Any) -> builtins.list[dict[str, Any]]:
        return [_plain(found) for found in await store.find(str(type), fields)]

    async def listed(type: str | None = None, *, limit: int = 50) -> builtins.list[dict[str, Any]]:
        found = await store.page(None if type is None else str(type), limit=int(limit))
        return [_plain(stored) for stored in found.objects]

    return ObjectsView(get=get, find=find, list=listed)


register_template_value(_Reads, _template_view)


class AgentObjects(_Reads):
    """The object store as a reaction agent sees it (``ctx.objects``).

    Reads go to the store. Changes are checked against the agent's capabilities
    (a refused one raises :class:`~reactor.exceptions.CapabilityError` before anything
    changes) and attributed to ``AgentActor(agent)``. In ``execute`` mode they are
    applied at once; in ``suggest`` and ``hybrid`` modes they are held, and returned
    as they would be: the service makes them a suggestion (or, for a ``hybrid`` agent
    whose output says ``mode="execute"``, applies them) when the agent is done.

    Attributes:
        store: The object store.
        agent: The agent's name.
        capabilities: What it may change.
        mode: Its execution mode.
        held: The changes held for a suggestion, in order.
    """

    def __init__(
        self, store: ObjectStore, agent: str, capabilities: Capabilities, mode: ExecutionMode
    ) -> None:
        self.store = store
        self.agent = agent
        self.capabilities = capabilities
        self.mode = mode
        self.held: builtins.list[Operation] = []

    @property
    def actor(self) -> AgentActor:
        """Who the changes are attributed to."""
        return AgentActor(self.agent)

    def _check(self, operation: OperationName, type: str, object_id: str | None = None) -> None:
        check_capability(self.store, self.agent, self.capabilities, operation, type, object_id)

    async def create(self, type: str, data: Mapping[str, Any]) -> StoredObject:
        """Create an object as the agent (or hold the creation for a suggestion)."""
        self._check("create", type)
        if self.mode == "execute":
            return await self.store.create(type, data, actor=self.actor)
        stored = self.store.validate(type, data)
        now = datetime.now(UTC)
        created = StoredObject(
            id=new_object_id(),
            type=type,
            version=1,
            data=stored,
            actor=self.actor,
            created_at=now,
            updated_at=now,
        )
        self.held.append(Create(type, stored, id=created.id))
        return created

    async def update(self, id: str, data: Mapping[str, Any]) -> StoredObject:
        """Update an object as the agent (or hold the update for a suggestion)."""
        current = await self.store.get(id)
        self._check("update", current.type, id)
        if self.mode == "execute":
            return await self.store.update(id, data, actor=self.actor)
        merged = self.store.validate(current.type, {**current.data, **data})
        self.held.append(Update(id, dict(data)))
        return current.model_copy(
            update={
                "version": current.version + 1,
                "data": merged,
                "actor": self.actor,
                "updated_at": datetime.now(UTC),
            }
        )

    async def delete(self, id: str) -> StoredObject:
        """Delete an object as the agent (or hold the deletion for a suggestion)."""
        current = await self.store.get(id)
        self._check("delete", current.type, id)
        if self.mode == "execute":
            return await self.store.delete(id, actor=self.actor)
        self.held.append(Delete(id))
        return current

    def __repr__(self) -> str:
        return f"<AgentObjects agent={self.agent!r} mode={self.mode} held={len(self.held)}>"


class RunObjects(_Reads):
    """The object store as the agents of a run that is not a reaction see it (``ctx.objects``).

    A graph started through the service, a cron or a manual agent: a change is made
    at once (execution modes are about what a reaction proposes) as the agent making
    it, within that agent's capabilities (:class:`AgentObjects` in ``execute`` mode),
    and names the agent's run as its cause (``event.cause``, depth 0: no reaction),
    so an object's history links the run that changed it. Outside an agent (a
    ``on_output`` runs inside one) it is the store, as whoever runs.

    Args:
        store: The object store.
        capabilities: Each agent of the run's graph's capabilities, by name.
    """

    def __init__(self, store: ObjectStore, capabilities: Mapping[str, Capabilities]) -> None:
        self.store = store
        self.capabilities = dict(capabilities)

    def _agent(self) -> AgentObjects | None:
        actor = actor_from_context(current_actor())
        if not isinstance(actor, AgentActor):
            return None
        allowed = self.capabilities.get(actor.id, Capabilities())
        return AgentObjects(self.store, actor.id, allowed, "execute")

    def _cause(self, agent: str) -> Cause | None:
        signal = current_signal()
        if signal is None or signal.run_id is None:
            return None
        return Cause(run_id=signal.run_id, agent=agent, depth=0)

    async def create(self, type: str, data: Mapping[str, Any]) -> StoredObject:
        """Create an object as the agent running now."""
        view = self._agent()
        if view is None:
            return await self.store.create(type, data)
        with _caused(self._cause(view.agent)):
            return await view.create(type, data)

    async def update(self, id: str, data: Mapping[str, Any]) -> StoredObject:
        """Update an object as the agent running now."""
        view = self._agent()
        if view is None:
            return await self.store.update(id, data)
        with _caused(self._cause(view.agent)):
            return await view.update(id, data)

    async def delete(self, id: str) -> StoredObject:
        """Delete an object as the agent running now."""
        view = self._agent()
        if view is None:
            return await self.store.delete(id)
        with _caused(self._cause(view.agent)):
            return await view.delete(id)

    def __repr__(self) -> str:
        return f"<RunObjects agents={sorted(self.capabilities)}>"


@contextlib.contextmanager
def _caused(cause: Cause | None) -> Iterator[None]:
    """Changes made in the block name ``cause`` (unless a reaction's cause is set)."""
    if cause is None or CURRENT_CAUSE.get() is not None:
        yield
        return
    token = CURRENT_CAUSE.set(cause)
    try:
        yield
    finally:
        CURRENT_CAUSE.reset(token)
