"""The dispatcher: from stored change events to claimed, processed log entries.

It follows the object store's events by id (each agent's position, its cursor, is
kept in the database), gives each event to the agents whose reaction matches as
``pending`` entries, and processes them: claim (``pending`` -> ``processing``), run
(:func:`~reactor.service._reactions.react`), finish. Claims and finishes of
concurrent reactions are written in shared transactions (:class:`Batcher`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from datetime import UTC, datetime

from reactor._diagnostics import log
from reactor.service._batch import Batcher
from reactor.service._changes import ProcessingEntry
from reactor.service._log import Claim, Finished, ProcessingLog
from reactor.service._reactions import ReactionServices, react
from reactor.service._registry import ReactionAgent
from reactor.service._values import AgentActor, ObjectEvent

__all__ = ["Dispatcher"]

BATCH = 500
"""Events read (and claimed in one transaction) at a time."""


class Dispatcher:
    """Dispatches and processes the events of one object store for a set of agents.

    Args:
        services: What reactions need (the object store among them).
        log: The processing log.
        agents: The enabled reaction agents, by name.
        cursors: Each agent's position (the last event id dispatched to it).
        group: The task group that owns every task.
        max_running: Reactions running at once.
        changed: Called whenever work starts or ends (the service's waiters look).
    """

    def __init__(
        self,
        services: ReactionServices,
        log: ProcessingLog,
        agents: Mapping[str, ReactionAgent],
        cursors: Mapping[str, int],
        group: asyncio.TaskGroup,
        *,
        max_running: int,
        changed: Callable[[], None],
    ) -> None:
        self.services = services
        self.log = log
        self.agents = dict(agents)
        self.cursors = dict(cursors)
        self.active: dict[int, asyncio.Task[None]] = {}
        self.claimed: set[int] = set()
        self._group = group
        self._max_running = max_running
        self._changed = changed
        self._slots = asyncio.Semaphore(max_running)
        self._lanes: dict[tuple[str, str], tuple[asyncio.Lock, int]] = {}
        self.starts: Batcher[int, bool] = Batcher(self._start_batch)
        self.finishes: Batcher[Finished, bool] = Batcher(self._finish_batch)

    @property
    def position(self) -> int:
        """The last event id every agent has been given (0 before any)."""
        return min(self.cursors.values(), default=0)

    @property
    def busy(self) -> bool:
        """Whether entries are queued or running here."""
        return bool(self.active)

    def claims(self, event: ObjectEvent) -> list[Claim]:
        """The agents ``event`` activates, as claims to log."""
        actor = event.actor.id if isinstance(event.actor, AgentActor) else None
        return [
            Claim(name, event, exclusive=target.reaction.concurrency == "skip")
            for name, target in self.agents.items()
            if target.reaction.matches(event.type, event.event, actor, name)
        ]

    async def next_batch(self, wait: Callable[[Callable[[], bool]], Awaitable[None]]) -> bool:
        """Dispatch the next events after the cursors; return whether more may follow.

        Args:
            wait: Waits until a condition holds (backpressure: not too much queued).
        """
        if not self.agents:
            return False
        await wait(lambda: len(self.active) < 8 * self._max_running)
        events = await self.services.objects.events(since=self.position, limit=BATCH)
        if not events:
            return False
        claims = [
            claim
            for event in events
            for claim in self.claims(event)
            if self.cursors[claim.agent] < event.event_id
        ]
        through = dict.fromkeys(self.agents, events[-1].event_id)
        entries = await self.log.claim(claims, through)
        self.cursors.update(through)
        self.start(entries, {event.event_id: event for event in events})
        return len(events) == BATCH

    async def dispatch(self, event: ObjectEvent) -> list[ProcessingEntry]:
        """Deliver one event (again): log it for the matching agents, process the new."""
        entries = await self.log.claim(self.claims(event))
        self.start(entries, {event.event_id: event})
        return entries

    async def resume(self) -> None:
        """Take up the pending entries of these agents (left by a stop or a crash)."""
        pending = [e for e in await self.log.entries(status="pending") if e.agent in self.agents]
        if pending:
            events = await self.services.objects.events(ids={e.event_id for e in pending})
            self.start(pending, {event.event_id: event for event in events})

    def start(self, entries: Iterable[ProcessingEntry], events: Mapping[int, ObjectEvent]) -> None:
        """Process each pending entry in a task of the group."""
        for entry in entries:
            event = events.get(entry.event_id)
            if entry.status != "pending" or event is None or entry.id in self.active:
                continue
            task = self._group.create_task(self._process(entry, event))
            self.active[entry.id] = task
            task.add_done_callback(functools.partial(self._done, entry.id))

    def cancel(self, entry_id: int) -> bool:
        """Stop processing an entry here (it was abandoned); return whether it ran here."""
        task = self.active.get(entry_id)
        if task is None:
            return False
        self.claimed.discard(entry_id)
        task.cancel()
        return True

    def _done(self, entry_id: int, task: asyncio.Task[None]) -> None:
        self.active.pop(entry_id, None)
        self._changed()

    async def _process(self, entry: ProcessingEntry, event: ObjectEvent) -> None:
        """Process one entry; nothing it meets stops the service."""
        try:
            await self._process_entry(entry, event)
        except Exception as exc:  # the database failed around the reaction; log, go on
            log(
                "reactor.service",
                "error",
                "reaction not recorded",
                agent=entry.agent,
                object_id=entry.object_id,
                entry=entry.id,
                error=repr(exc),
            )

    async def _process_entry(self, entry: ProcessingEntry, event: ObjectEvent) -> None:
        target = self.agents[entry.agent]
        async with contextlib.AsyncExitStack() as stack:
            if target.reaction.concurrency == "queue":
                await stack.enter_async_context(self._lane(entry))
            await stack.enter_async_context(self._slots)
            if not await self.starts.submit(entry.id):
                return  # another process claimed it first
            self.claimed.add(entry.id)
            started = datetime.now(UTC)
            try:
                finished = await react(self.services, target, entry.id, event)
            except Exception as exc:  # not the agent's failure (that is in its run)
                finished = Finished(
                    entry.id, entry.agent, "failed", f"{type(exc).__name__}: {exc}", None,
                    "failed", started, datetime.now(UTC),
                )  # fmt: skip
            if not await self.finishes.submit(finished):
                log(
                    "reactor.service",
                    "warning",
                    "reaction finished after it was abandoned",
                    agent=entry.agent,
                    object_id=entry.object_id,
                    entry=entry.id,
                )
            self.claimed.discard(entry.id)

    @contextlib.asynccontextmanager
    async def _lane(self, entry: ProcessingEntry) -> AsyncIterator[None]:
        """One object's events for one ``queue`` agent: one at a time, in order."""
        key = (entry.agent, entry.object_id)
        lock, users = self._lanes.get(key, (asyncio.Lock(), 0))
        self._lanes[key] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._lanes[key]
            if users == 1:
                del self._lanes[key]
            else:
                self._lanes[key] = (lock, users - 1)

    async def _start_batch(self, entry_ids: list[int]) -> list[bool]:
        won = await self.log.start(entry_ids)
        return [entry_id in won for entry_id in entry_ids]

    async def _finish_batch(self, outcomes: list[Finished]) -> list[bool]:
        done = await self.log.finish(outcomes)
        return [outcome.entry_id in done for outcome in outcomes]
