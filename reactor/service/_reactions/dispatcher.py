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

With a job queue the serving process only dispatches: it hands each pending entry to
the queue (``handoff``) and follows the log until the workers have processed them;
a worker processes the entry its job names (:meth:`Dispatcher.run_entry`).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import itertools
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from datetime import UTC, datetime

from reactor._signals.diagnostics import log
from reactor._signals.frozen import freeze_payload
from reactor._signals.names import REACTION_LOOP, agent_actor
from reactor.exceptions import GraphChangedError
from reactor.service._objects.batch import Batcher
from reactor.service._objects.changes import ProcessingEntry
from reactor.service._objects.processing import Claim, Finished, ProcessingLog, Taken
from reactor.service._objects.values import AgentActor, ObjectEvent
from reactor.service._reactions.guard import guard_verdict
from reactor.service._reactions.reaction import (
    ReactionServices,
    react,
    run_of,
    taken_over,
)
from reactor.service._reactions.registry import ReactionAgent
from reactor.service._reactions.view import AgentObjects

__all__ = ["Dispatcher"]

BATCH = 500
"""Events read (and logged in one transaction) at a time."""

KEEP_READ = 4 * BATCH
"""Events kept from dispatching for processing, the oldest (read from the store past that)."""

GATHER = 0.05
"""Seconds freed slots wait for more before what waits is taken (see ``_gathered``)."""

FOLLOW_EVERY = 0.2
"""Seconds between two looks at the log while queued entries are in flight."""

HandOff = Callable[[list[ProcessingEntry]], Awaitable[None]]


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
        handoff: Queues pending entries for workers instead of processing them here.
        max_depth: The deepest chain of reactions whose changes are dispatched: an
            event caused deeper is logged ``skipped`` (a loop), with a warning and
            ``reaction:loop``.
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
        handoff: HandOff | None = None,
        max_depth: int = 8,
    ) -> None:
        self.max_depth = max_depth
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
        self.handoff = handoff
        self.unsent: list[ProcessingEntry] = []
        self.queued = 0  # entries pending or processing elsewhere, as last seen
        self._resend = True
        self._read: dict[int, ObjectEvent] = {}  # events just dispatched, for process()
        self._wake_at: float | None = None  # when what an admission let wait goes (UNIX time)
        self._release_at: float | None = None  # when a spend cap's period rolls (UNIX time)
        self._written: list[ObjectEvent] = []  # events just written in this process
        self._gathering: float | None = None  # until when freed slots wait for more (loop time)

    @property
    def position(self) -> int:
        """The last event id every agent has been given (0 before any)."""
        return min(self.cursors.values(), default=0)

    @property
    def settled(self) -> bool:
        """Whether no logged work is left to take and none is running (here or queued)."""
        queued = self.unsent or self.queued
        return (self.drained or not self.agents) and not self.active and not queued

    def add(self, target: ReactionAgent, cursor: int) -> None:
        """Dispatch to ``target`` too, from the event after ``cursor`` (it was enabled)."""
        self.cursors[target.name] = cursor
        self.agents[target.name] = target
        self._resend = True
        self.nudge()

    def remove(self, name: str) -> None:
        """Dispatch nothing more to ``name`` (it was disabled or deleted)."""
        self.agents.pop(name, None)
        self.cursors.pop(name, None)

    # -- dispatching ---------------------------------------------------------------

    def claims(self, event: ObjectEvent) -> list[Claim]:
        """The agents ``event`` activates, as claims to log (each agent's guard asked once)."""
        actor = event.actor.id if isinstance(event.actor, AgentActor) else None
        claims = [
            self._guarded(Claim(name, event, exclusive=target.reaction.concurrency == "skip"))
            for name, target in self.agents.items()
            if target.reaction.matches(event.type, event.event, actor, name)
        ]
        cause = event.cause
        if not claims or cause is None or cause.depth <= self.max_depth:
            return claims
        refused = (
            f"reaction loop: {cause.spelled()} ... made this change at depth {cause.depth}, "
            f"past max_reaction_depth={self.max_depth}; it is not dispatched (break the "
            "loop, e.g. with a guard, or raise ReactionService(max_reaction_depth=...))"
        )
        log(
            "reactor.service",
            "warning",
            "reaction loop cut",
            object_id=event.id,
            version=event.version,
            chain=cause.spelled(),
            depth=cause.depth,
        )
        payload = {
            "event_id": event.event_id,
            "object_id": event.id,
            "type": event.type,
            "version": event.version,
            "depth": cause.depth,
            "chain": list(cause.chain),
            "agents": [claim.agent for claim in claims],
        }
        self.services.objects.bus.publish(
            REACTION_LOOP, freeze_payload(payload), agent_actor(cause.agent), None, 0
        )
        return [dataclasses.replace(claim, refused=refused) for claim in claims]

    def _guarded(self, claim: Claim) -> Claim:
        """The claim as the agent's guard has it: refused (skipped, failed) or as it was."""
        target = self.agents[claim.agent]
        if target.agent.when is None:
            return claim
        event = claim.event
        view = AgentObjects(
            self.services.objects, target.name, target.agent.capabilities, "execute"
        )
        scope = {"object": event.object, "objects": view, "event": event}
        verdict = guard_verdict(target, event.payload(), scope)
        if verdict is None:
            return claim
        status, why = verdict
        return dataclasses.replace(claim, refused=why, refused_as=status)

    async def next_batch(self) -> bool:
        """Log the next events after the cursors; return whether more may follow."""
        if not self.agents:
            return False
        events = self._next_written() or await self.services.objects.events(
            since=self.position, limit=BATCH
        )
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
        if self.handoff is None:  # they are taken here next: no need to read them again
            # the oldest pending first: those are taken first (see _forget_read)
            wanted = {entry.event_id for entry in entries if entry.status == "pending"}
            room = max(0, KEEP_READ - len(self._read))
            kept = [event for event in events if event.event_id in wanted][:room]
            self._read.update((event.event_id, event) for event in kept)
        self.cursors.update({name: at for name, at in through.items() if name in self.agents})
        self.more_work(entries)
        return len(events) == BATCH

    def written(self, events: list[ObjectEvent]) -> None:
        """Events this process just stored (in id order): dispatched without reading them."""
        self._written += events
        if len(self._written) > KEEP_READ:  # far behind: read them from the store
            del self._written[: len(self._written) - KEEP_READ]

    def _next_written(self) -> list[ObjectEvent]:
        """The events after the position, if those written here are exactly the next ones.

        Their ids follow each other from the position on, so no other process's event
        can lie between them; after a gap (another process wrote) they are read.
        """
        written, after = self._written, self.position
        start = 0
        while start < len(written) and written[start].event_id <= after:
            start += 1
        del written[:start]
        found = []
        for event in written[:BATCH]:
            if event.event_id != after + 1:
                break
            found.append(event)
            after += 1
        return found

    async def dispatch(self, event: ObjectEvent) -> list[ProcessingEntry]:
        """Deliver one event (again): log it for the matching agents."""
        entries = await self.log.claim(self.claims(event))
        self.more_work(entries)
        return entries

    def more_work(self, entries: list[ProcessingEntry]) -> None:
        """Entries were logged (or went back to) ``pending``: take them, or queue them."""
        pending = [entry for entry in entries if entry.status == "pending"]
        if pending:
            if self.handoff is not None:
                self.unsent += pending
            self._logged += 1
            self.drained = False
            self._work.set()
        self._changed()

    # -- processing ----------------------------------------------------------------

    async def process(self) -> None:
        """Take pending entries as slots free up, and run each in a task; until cancelled.

        With ``handoff``, queue them instead (those pending from before first).
        """
        if self.handoff is not None:
            await self._hand_off(self.handoff)
        while True:
            await self._until_work()
            free = self._max_running - len(self.active)
            if free <= 0:
                self._gathering = None
                continue
            if self.active and free < self._max_running // 4 and not self._gathered():
                continue  # wait a moment for more slots: fewer, larger transactions
            self._gathering = None
            logged = self._logged
            try:
                entries = await self._take(free)
                batched = {item for taken in entries for item in taken.batch}
                events = await self._events({t.entry.event_id for t in entries} | batched)
            except Exception as exc:  # a database hiccup: look again later
                log("reactor.service", "error", "cannot take work", error=repr(exc))
                await asyncio.sleep(1.0)
                self._work.set()
                continue
            for taken in entries:
                self._start(taken, events.get(taken.entry.event_id), events)
            if entries:
                self._forget_read(min(taken.entry.event_id for taken in entries))
            if len(entries) == free:
                self._work.set()  # there may be more
            elif logged == self._logged and self._wake_at is None and not self._work.is_set():
                self.drained = True  # nothing logged, finished or due while it took
            self._changed()

    async def _until_work(self) -> None:
        """Wait for work: logged, a slot freed, an admission's time (a debounce's end).

        Or the end of the moment freed slots wait for more (see :meth:`_gathered`).
        """
        unix = (self._wake_at, self._release_at)
        times = [self._loop_time(at) for at in unix if at is not None]
        if self._gathering is not None:
            times.append(self._gathering)
        if not times:
            await self._work.wait()
        else:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout_at(min(times)):
                    await self._work.wait()
        self._work.clear()

    def _gathered(self) -> bool:
        """Whether the slots freed so far have waited ``GATHER`` seconds for more.

        Under load, a take waits for a quarter of the slots to be free: fewer, larger
        transactions. When work is slow (an agent whose calls take seconds, its
        ``Latest`` entries waiting for their keys), the slots free one by one: what
        waits for them is taken within ``GATHER`` seconds, not after a quarter of the
        running calls have ended.
        """
        now = asyncio.get_running_loop().time()
        if self._gathering is None:
            self._gathering = now + GATHER
        return now >= self._gathering

    async def _take(self, free: int) -> list[Taken]:
        """Take up to ``free`` entries: the plain agents' oldest, then each admission's."""
        plain = [name for name, target in self.agents.items() if not target.admission]
        taken = await self.log.take(plain, free) if plain else []
        self._wake_at = self._release_at = None
        for name, target in self.agents.items():
            room = free - len(taken)
            if not target.admission or room <= 0:
                continue
            admitted = await self.log.admit(name, target.admission, room)
            taken.extend(admitted.taken)
            self._wake_at = _earliest(self._wake_at, admitted.wake_at)
            self._release_at = _earliest(self._release_at, admitted.release_at)
        return taken

    @staticmethod
    def _loop_time(unix: float) -> float:
        """The event loop's time of a UNIX time (admission decides in UNIX seconds)."""
        return asyncio.get_running_loop().time() + max(0.0, unix - time.time())

    def _forget_read(self, below: int) -> None:
        """Forget the events kept for processing older than ``below`` (a take has passed them).

        Entries are taken oldest first, so the events kept are the oldest waiting: the
        next ones taken. One older than what was just taken was taken already (by each
        agent, unless admission holds one back: that one is read again when it goes).
        """
        kept = self._read
        for event_id in list(itertools.takewhile(lambda event_id: event_id < below, kept)):
            del kept[event_id]

    async def _events(self, ids: set[int]) -> dict[int, ObjectEvent]:
        """The events of taken entries: those just dispatched from memory, others read."""
        read = self._read
        found = {event_id: read[event_id] for event_id in ids if event_id in read}
        missing = ids.difference(found)
        if missing:
            for event in await self.services.objects.events(ids=missing):
                found[event.event_id] = event
        return found

    async def _hand_off(self, handoff: HandOff) -> None:
        """Queue pending entries, then follow them until no more are pending or processing."""
        while True:
            logged = self._logged
            try:
                if self._resend:  # what is pending from before (or for an agent enabled again)
                    self._resend = False
                    earlier = await self.log.entries(status="pending", agents=self.agents)
                    known = {entry.id for entry in earlier}
                    self.unsent = [*earlier, *(e for e in self.unsent if e.id not in known)]
                while self.unsent:
                    batch = self.unsent[:BATCH]
                    await handoff(batch)
                    del self.unsent[: len(batch)]
                self.queued = await self.log.in_flight(self.agents)
            except Exception as exc:  # Redis or the database is away: try again soon
                self._resend = True
                log("reactor.service", "error", "cannot queue reactions", error=repr(exc))
                await asyncio.sleep(1.0)
                continue
            self.drained = not self.queued and logged == self._logged
            self._changed()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(FOLLOW_EVERY if self.queued else None):
                    await self._work.wait()
            self._work.clear()

    async def run_entry(self, entry_id: int, patience: float) -> bool:
        """Process the entry a queued job names; False if it waited past ``patience`` or stopped.

        Taken as :meth:`ProcessingLog.take_one` says; an entry that cannot be taken
        (processed, skipped or abandoned already, or of an agent not here) is done with,
        one whose agent processes in order waits for the earlier ones of its object.
        """
        deadline = asyncio.get_running_loop().time() + patience
        while True:
            found = await self.log.entries(ids=[entry_id])
            if not found or found[0].agent not in self.agents:
                return True
            target = self.agents[found[0].agent]
            taken = await self.log.take_one(
                entry_id, in_order=target.reaction.concurrency == "queue"
            )
            if taken is not None:
                break
            waiting = found[0].status in ("pending", "processing")  # for earlier ones
            if not waiting or asyncio.get_running_loop().time() > deadline:
                return not waiting
            await asyncio.sleep(FOLLOW_EVERY)
        events = await self.services.objects.events(ids={taken.entry.event_id})
        task = self._start(taken, events[0] if events else None)
        with contextlib.suppress(asyncio.CancelledError):  # cancelled: the worker stops
            await asyncio.shield(task)
        return not task.cancelled()

    def _start(
        self,
        taken: Taken,
        event: ObjectEvent | None,
        events: Mapping[int, ObjectEvent] | None = None,
    ) -> asyncio.Task[None]:
        """Process a taken entry in a task of the group (``active`` until it ends).

        ``events``: the object events read for it and its batch, by id.
        """
        entry = taken.entry
        self.taken.add(entry.id)
        batch = [events[item] for item in taken.batch if item in events] if events else []
        task = self._group.create_task(self._process(taken, event, batch))
        self.active[entry.id] = task
        task.add_done_callback(functools.partial(self._done, entry.id))
        return task

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
        self.drained = False  # what admission kept waiting for this one may go now
        self._work.set()
        self._changed()

    async def _process(
        self, taken: Taken, event: ObjectEvent | None, batch: list[ObjectEvent]
    ) -> None:
        """Process one taken entry; nothing it meets stops the service."""
        started, entry = datetime.now(UTC), taken.entry
        try:
            finished = await self._react(taken, event, started, batch)
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
        self, taken: Taken, event: ObjectEvent | None, started: datetime, batch: list[ObjectEvent]
    ) -> Finished:
        entry = taken.entry
        target = self.agents.get(entry.agent)
        try:
            if target is None:
                raise LookupError(f"the agent {entry.agent!r} was disabled or deleted meanwhile")
            if event is None:
                raise LookupError(f"the object event {entry.event_id} is not stored")
            run = await run_of(self.log, self.services.record, taken)
            lane = self._lane(entry) if target.reaction.concurrency == "queue" else None
            async with lane or contextlib.nullcontext():
                try:
                    return await react(self.services, target, entry.id, event, run, batch)
                except GraphChangedError:  # the agent changed since the run began
                    if not run.resume:
                        raise
                    run = await taken_over(self.log, self.services.record, entry, run.run_id)
                    return await react(self.services, target, entry.id, event, run, batch)
        except Exception as exc:  # not the agent's failure (that is in its run)
            return Finished(
                entry_id=entry.id,
                agent=entry.agent,
                status="failed",
                error=f"{type(exc).__name__}: {exc}",
                run_id=None,
                started_at=started,
            )

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


def _earliest(one: float | None, other: float | None) -> float | None:
    """The earlier of two times, either of which may be unset."""
    if one is None or other is None:
        return other if one is None else one
    return min(one, other)
