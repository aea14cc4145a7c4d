"""The service's housekeeping: heartbeats, reactions cut off by a crash, stuck entries.

Every ``BEAT_EVERY`` seconds the service says it is alive (``service_processes``) and
puts back to ``pending`` the processing-log entries whose process died (their runs
are resumed by the next attempt; past ``max_attempts`` the entry is ``failed`` and its
run is closed ``failed``, with the reason: never ``running`` for a dead process);
every ``stuck_check_every`` seconds it marks entries ``processing`` for longer than
``stuck_after`` as ``abandoned`` (a process alive but hung: nothing proves it died, so
a person decides, with the retry button or ``POST /api/processing-log/{id}/retry``).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from datetime import timedelta
from typing import Literal

from reactor._agents.agent import Agent
from reactor._recording.store import SignalStore
from reactor._signals.diagnostics import log
from reactor.service._objects.changes import ProcessingEntry
from reactor.service._objects.objects import ObjectStore
from reactor.service._objects.owners import BEAT_EVERY, Owners
from reactor.service._objects.processing import ProcessingLog
from reactor.service._reactions.dispatcher import Dispatcher
from reactor.service._reactions.reaction import close_run
from reactor.service._reactions.registry import ReactionAgent

__all__ = ["Upkeep", "follow", "switch_reaction"]


async def follow(
    dispatcher: Dispatcher, wake: asyncio.Event, poll_every: float, poke: Callable[[], None]
) -> None:
    """Dispatch new events as they are stored (woken by ``wake`` at once, or every poll)."""
    while True:
        try:
            while await dispatcher.next_batch():
                pass
        except Exception as exc:  # a database hiccup: try again at the next poll
            log("reactor.service", "error", "dispatch failed", error=repr(exc))
        dispatcher.nudge()  # work another process logged, or gave back
        poke()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(poll_every):
                await wake.wait()
        wake.clear()


async def switch_reaction(
    log: ProcessingLog,
    objects: ObjectStore,
    name: str,
    agent: Agent | None,
    how: Literal["keep", "new", "gone"],
) -> tuple[ReactionAgent, int] | None:
    """A reaction agent changed through the catalog: the agent and cursor to dispatch from.

    ``None`` when it no longer reacts (its cursor is forgotten when it is ``gone``); a
    ``new`` one (or one never dispatched to) starts after the newest event, not the past.
    """
    if agent is None or agent.reaction is None:
        if how == "gone":
            await log.forget_cursor(name)
        return None
    target = ReactionAgent.of(name, agent)
    cursor = await log.stored_cursor(name)
    if cursor is None or how == "new":
        cursor = await objects.last_event_id()
        await log.set_cursor(name, cursor)
    return target, cursor


class Upkeep:
    """The housekeeping of one service (see the module's docstring).

    Args:
        log: The processing log.
        owners: The heartbeats of the database's processes, as this process.
        max_attempts: Takes of an entry before it is given up.
        cancel: Cancels an entry this process runs (an abandoned one).
        more_work: Called when entries went back to ``pending``.
        record: The store the runs are recorded to (once the service runs), where the
            run of an entry given up is closed ``failed``.
    """

    def __init__(
        self,
        log: ProcessingLog,
        owners: Owners,
        max_attempts: int,
        cancel: Callable[[int], object],
        more_work: Callable[[list[ProcessingEntry]], object],
        record: Callable[[], SignalStore | None] = lambda: None,
    ) -> None:
        self.log, self.owners, self.max_attempts = log, owners, max_attempts
        self._cancel, self._more_work, self._record = cancel, more_work, record

    async def beat(self) -> None:
        """One heartbeat, and the entries of dead processes taken up again."""
        await self.owners.beat()
        changed = await self.owners.retry_orphans(self.max_attempts)
        for entry in changed:
            log(
                "reactor.service",
                "warning",
                "reaction given up" if entry.status == "failed" else "reaction retried",
                agent=entry.agent,
                object_id=entry.object_id,
                entry=entry.id,
                attempts=entry.attempts,
                reason=entry.error,
            )
        pending = [entry for entry in changed if entry.status == "pending"]
        if pending:
            self._more_work(pending)
        record = self._record()
        for entry in changed:  # given up: its run, left by a dead process, ends failed
            if entry.status == "failed" and entry.run_id is not None and record is not None:
                why = f"its process died; {entry.error}"
                await asyncio.to_thread(close_run, record, entry.run_id, why)

    async def beating(self, beaten: bool = False) -> None:
        """Beat until cancelled (a failure is logged, and tried again next time).

        With ``beaten``, the first beat was just made: wait before the next.
        """
        if beaten:
            await asyncio.sleep(BEAT_EVERY)
        while True:
            try:
                await self.beat()
            except Exception as exc:
                log("reactor.service", "error", "heartbeat failed", error=repr(exc))
            await asyncio.sleep(BEAT_EVERY)

    async def detecting(self, stuck_after: float, every: float) -> None:
        """Mark stuck entries every ``every`` seconds until cancelled."""
        while True:
            await asyncio.sleep(every)
            try:
                await self.detect_stuck(stuck_after)
            except Exception as exc:
                log("reactor.service", "error", "stuck-job detection failed", error=repr(exc))

    async def detect_stuck(self, stuck_after: float) -> list[ProcessingEntry]:
        """Mark entries ``processing`` for longer than ``stuck_after`` as ``abandoned``."""
        abandoned = await self.log.abandon_stuck(timedelta(seconds=stuck_after))
        for entry in abandoned:
            log(
                "reactor.service",
                "warning",
                "reaction abandoned",
                agent=entry.agent,
                object_id=entry.object_id,
                version=entry.object_version,
                entry=entry.id,
            )
            self._cancel(entry.id)
        return abandoned
