"""The dispatcher and the processor: from stored change events to finished reactions.

Two independent halves meet in the processing log, so that either could run in
another process (issue: workers):

* **dispatching** follows the object store's events by id (each agent's position,
  its cursor, is kept in the database) and logs each event for the agents whose
  reaction matches: a ``pending`` entry, or ``skipped`` (one transaction a batch);
* **processing** takes the oldest pending entries of its agents as slots free up
  (``pending`` -> ``processing`` in one statement: each goes to one taker, whatever
  the number of processes), runs each as a reaction (:func:`react`), and records
  how they ended, many in one transaction (:class:`Batcher`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import AsyncIterator, Callable, Mapping
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
"""Events read (and logged in one transaction) at a time."""


class Dispatcher:
    """Dispatches the events of one object store to some agents, and processes them.

    Args:
        services: What reactions need (the object store among them).
        log: The processing log.
        agents: The enabled reaction agents, by name.
        cursors: Each agent's position (the last event id dispatched to it).
        group: The task group that owns every task.
        max_running: Reactions running at once.
        changed: Called whenever work is logged, starts or ends (waiters look again).
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
        self.taken: set[int] = set()
        self.drained = False
        self._group = group
        self._max_running = max_running
        self._changed = changed
        self._work = asyncio.Event()
        self._logged = 0
        self._lanes: dict[tuple[str, str], tuple[asyncio.Lock, int]] = {}
        self.finishes: Batcher[Finished, bool] = Batcher(self._finish_batch)

    @property
    def position(self) -> int:
        """The last event id every agent has been given (0 before any)."""
        return min(self.cursors.values(), default=0)

    @property
    def settled(self) -> bool:
        """Whether no logged work is left to take and none is running here."""
        return (self.drained or not self.agents) and not self.active

    def add(self, target: ReactionAgent, cursor: int) -> None:
        """Dispatch to ``target`` too, from the event after ``cursor`` (it was enabled)."""
        self.cursors[target.name] = cursor
        self.agents[target.name] = target
        self.nudge()

    def remove(self, name: str) -> None:
        """Dispatch nothing more to ``name`` (it was disabled or deleted)."""
        self.agents.pop(name, None)
        self.cursors.pop(name, None)

    # -- dispatching ---------------------------------------------------------------

    def claims(self, event: ObjectEvent) -> list[Claim]:
        """The agents ``event`` activates, as claims to log."""
        actor = event.actor.id if isinstance(event.actor, AgentActor) else None
        return [
            Claim(name, event, exclusive=target.reaction.concurrency == "skip")
            for name, target in self.agents.items()
            if target.reaction.matches(event.type, event.event, actor, name)
        ]

    async def next_batch(self) -> bool:
        """Log the next events after the cursors; return whether more may follow."""
        if not self.agents:
            return False
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
        self.cursors.update({name: at for name, at in through.items() if name in self.agents})
        self._more_work(entries)
        return len(events) == BATCH

    async def dispatch(self, event: ObjectEvent) -> list[ProcessingEntry]:
        """Deliver one event (again): log it for the matching agents."""
        entries = await self.log.claim(self.claims(event))
        self._more_work(entries)
        return entries

    def _more_work(self, entries: list[ProcessingEntry]) -> None:
        if any(entry.status == "pending" for entry in entries):
            self._logged += 1
            self.drained = False
            self._work.set()
        self._changed()

    # -- processing ----------------------------------------------------------------

    async def process(self) -> None:
        """Take pending entries as slots free up, and run each in a task; until cancelled."""
        while True:
            await self._work.wait()
            self._work.clear()
            free = self._max_running - len(self.active)
            if free <= 0 or (self.active and free < self._max_running // 4):
                continue  # wait for more slots: fewer, larger transactions
            logged = self._logged
            try:
                entries = await self.log.take(self.agents, free)
                events = {
                    event.event_id: event
                    for event in await self.services.objects.events(
                        ids={entry.event_id for entry in entries}
                    )
                }
            except Exception as exc:  # a database hiccup: look again later
                log("reactor.service", "error", "cannot take work", error=repr(exc))
                await asyncio.sleep(1.0)
                self._work.set()
                continue
            for entry in entries:
                self.taken.add(entry.id)
                task = self._group.create_task(self._process(entry, events.get(entry.event_id)))
                self.active[entry.id] = task
                task.add_done_callback(functools.partial(self._done, entry.id))
            if len(entries) == free:
                self._work.set()  # there may be more
            elif logged == self._logged:
                self.drained = True
            self._changed()

    def nudge(self) -> None:
        """Look for work now (it may have been logged by another process)."""
        self.drained = False
        self._work.set()

    def cancel(self, entry_id: int) -> bool:
        """Stop processing an entry here (it was abandoned); return whether it ran here."""
        task = self.active.get(entry_id)
        if task is None:
            return False
        self.taken.discard(entry_id)
        task.cancel()
        return True

    def _done(self, entry_id: int, task: asyncio.Task[None]) -> None:
        self.active.pop(entry_id, None)
        self._work.set()
        self._changed()

    async def _process(self, entry: ProcessingEntry, event: ObjectEvent | None) -> None:
        """Process one taken entry; nothing it meets stops the service."""
        started = datetime.now(UTC)
        try:
            finished = await self._react(entry, event, started)
            if not await self.finishes.submit(finished):
                log(
                    "reactor.service",
                    "warning",
                    "reaction finished after it was abandoned",
                    agent=entry.agent,
                    object_id=entry.object_id,
                    entry=entry.id,
                )
            self.taken.discard(entry.id)
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

    async def _react(
        self, entry: ProcessingEntry, event: ObjectEvent | None, started: datetime
    ) -> Finished:
        target = self.agents.get(entry.agent)
        try:
            if target is None:
                raise LookupError(f"the agent {entry.agent!r} was disabled or deleted meanwhile")
            if event is None:
                raise LookupError(f"the object event {entry.event_id} is not stored")
            if target.reaction.concurrency != "queue":
                return await react(self.services, target, entry.id, event)
            async with self._lane(entry):
                return await react(self.services, target, entry.id, event)
        except Exception as exc:  # not the agent's failure (that is in its run)
            return Finished(
                entry.id, entry.agent, "failed", f"{type(exc).__name__}: {exc}", None,
                "failed", started, datetime.now(UTC),
            )  # fmt: skip

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

    async def _finish_batch(self, outcomes: list[Finished]) -> list[bool]:
        """Many reactions' outcomes in one transaction, after their runs are durable."""
        record = self.services.record
        if record is not None:
            try:
                await asyncio.to_thread(record.flush)
            except Exception as exc:  # the store reports what it lost; the log goes on
                log("reactor.service", "error", "runs not recorded", error=repr(exc))
        done = await self.log.finish(outcomes)
        return [outcome.entry_id in done for outcome in outcomes]
