"""Durable timers: ``await ctx.sleep(seconds)`` and ``await ctx.sleep_until(when)``.

A timer is two signals of the sleeping activation: ``timer:set {timer_id, agent,
until}`` when it begins (``until`` in ISO 8601, UTC) and ``timer:fired {timer_id,
agent}`` when its time comes. Its id derives from the run, the agent, the ``seq`` of the
activation's trigger and the timer's place among the activation's sleeps, so an
activation that runs again (on resume, after a crash) finds its timers in the log:

* one that fired is not waited for again (its ``timer:fired`` is in the log);
* one still pending waits only for what remains of it: its recorded ``until`` holds,
  not a new one from now (a deadline already past fires at once).

A sleep cancelled before its time (the run stops, or the code stops waiting, as
``asyncio.wait_for`` does) ends its timer with ``timer:fired {..., cancelled: true}``.

A replay waits for no clock: each timer fires in its recorded turn (once the signals
recorded before its ``timer:fired`` are replayed).

What a resume needs of timers is a section of the log's fold (:class:`TimersSection`),
so a resume from a ``harness:snapshot`` knows them too; ``pending_timers`` says which
of a recorded run are still pending (the web UI shows them).
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Awaitable, Callable, Iterable, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from reactor._activation.fold import SECTIONS, LogFold
from reactor._activation.keys import idempotency_key
from reactor._providers.replay import ReplayProvider
from reactor._recording.info import PendingTimer, parse_until, pending_timers, until_text
from reactor._signals.names import TIMER_FIRED, TIMER_SET
from reactor._signals.signal import Signal

if TYPE_CHECKING:
    from reactor._signals.bus import SignalBus

__all__ = [
    "TIMERS",
    "PendingTimer",
    "Timers",
    "TimersSection",
    "parse_until",
    "pending_timers",
    "until_text",
]

TIMERS = "timers"
"""The key of the timers' section in a fold and in ``harness:snapshot``."""


class TimersSection:
    """The timers of the activations in flight, as a fold keeps them (and snapshots hold).

    Each timer is ``[agent, until, fired, activation id]``; a timer leaves with its
    activation (a finished activation sleeps no more).
    """

    key = TIMERS

    def __init__(self) -> None:
        self.timers: dict[str, list[Any]] = {}
        self._fold: weakref.ref[LogFold] | None = None

    def bind(self, fold: LogFold) -> None:
        """Know the fold, to tell which activations are in flight."""
        self._fold = weakref.ref(fold)

    def wants(self, name: str) -> bool:
        """Timers are set and fire."""
        return name in (TIMER_SET, TIMER_FIRED)

    def fold(self, signal: Signal) -> None:
        """Take a ``timer:set`` or a ``timer:fired``."""
        payload = signal.payload if isinstance(signal.payload, Mapping) else {}
        timer_id = str(payload.get("timer_id"))
        if signal.name == TIMER_SET:
            fold = self._fold() if self._fold is not None else None
            owner = fold.owner(signal) if fold is not None else ""
            self.timers[timer_id] = [
                str(payload.get("agent")),
                str(payload.get("until")),
                False,
                owner,
            ]
        else:
            entry = self.timers.get(timer_id)
            if entry is not None:
                entry[2] = True

    def live(self) -> dict[str, list[Any]]:
        """The timers of the activations still in flight (the others are forgotten)."""
        fold = self._fold() if self._fold is not None else None
        if fold is not None:
            flights = fold.flights
            self.timers = {key: entry for key, entry in self.timers.items() if entry[3] in flights}
        return self.timers

    def dump(self) -> Any:
        """The timers in flight as JSON data."""
        return [[timer_id, *entry] for timer_id, entry in self.live().items()]

    def load(self, data: Any) -> None:
        """Take back what :meth:`dump` gave."""
        self.timers = {
            str(timer_id): [str(agent), str(until), bool(fired), str(owner)]
            for timer_id, agent, until, fired, owner in data or ()
        }

    def pending(self) -> list[PendingTimer]:
        """The timers set and not fired, soonest first."""
        return sorted(
            (
                PendingTimer(timer_id, agent, parse_until(until))
                for timer_id, (agent, until, fired, _) in self.live().items()
                if not fired
            ),
            key=lambda timer: timer.until,
        )


SECTIONS.append(TimersSection)


Turn = Callable[[int, str], Awaitable[None]]
"""During a replay: wait until the signals recorded before ``seq`` are replayed."""


class Timers:
    """The timers of one run: what ``ctx.sleep`` does, live, resumed or replayed.

    Args:
        bus: The run's bus (timers are signals of the sleeping activation).
        run_id: The run the ids derive from (the recorded run's, in a replay).
        replayed: During a replay, the recorded log, and how to wait for a turn in it.
    """

    def __init__(
        self,
        bus: SignalBus,
        run_id: str,
        replayed: tuple[Iterable[Signal], Turn] | None = None,
    ) -> None:
        self.bus = bus
        self.run_id = run_id
        self._recorded: dict[str, tuple[str, bool]] = {}  # a resumed run's: until, fired
        self._replay: dict[str, list[Signal]] | None = None
        self._turn: Turn | None = None
        if replayed is not None:
            signals, self._turn = replayed
            self._replay = {}
            for signal in signals:
                if signal.name in (TIMER_SET, TIMER_FIRED) and isinstance(signal.payload, Mapping):
                    self._replay.setdefault(str(signal.payload.get("timer_id")), []).append(signal)

    @classmethod
    def of(cls, bus: SignalBus, run_id: str, replay: Any) -> Timers:
        """The timers of a run on ``bus``; with a ``ReplayProvider``, a replay's."""
        if isinstance(replay, ReplayProvider):
            return cls(bus, run_id, (replay.recording.signals, replay.turn_of))
        return cls(bus, run_id)

    def preload(self, section: Any) -> None:
        """A resumed run's timers, from its log's fold (``plan.sections["timers"]``)."""
        if isinstance(section, TimersSection):
            for timer_id, (_, until, fired, _) in section.live().items():
                self._recorded[timer_id] = (until, fired)

    def timer_id(self, agent: str, trigger_seq: int, nth: int) -> str:
        """The id of an activation's ``nth`` timer: the same each time it runs."""
        return "timer_" + idempotency_key(self.run_id, agent, trigger_seq, f"timer#{nth}")[:20]

    async def sleep(self, agent: str, trigger_seq: int, nth: int, until: datetime) -> None:
        """Sleep until ``until`` as a durable timer (see the module's docstring)."""
        timer_id = self.timer_id(agent, trigger_seq, nth)
        if self._replay is not None:
            await self._replayed(agent, timer_id, until)
            return
        recorded = self._recorded.pop(timer_id, None)
        if recorded is not None:
            if recorded[1]:
                return  # it fired before the crash: the activation goes on at once
            until = parse_until(recorded[0])
        else:
            payload = {"timer_id": timer_id, "agent": agent, "until": until_text(until)}
            self.bus.emit(TIMER_SET, payload, source=agent)
        delay = (until - datetime.now(UTC)).total_seconds()
        if delay > 0:
            try:
                await asyncio.sleep(delay)
            except asyncio.CancelledError:
                # Nobody waits for it any more (the run stops, or the code gave up on
                # it): it is not pending. A suspended run records nothing, so its
                # timer stays pending in the log, to resume.
                fired = {"timer_id": timer_id, "agent": agent, "cancelled": True}
                self.bus.emit(TIMER_FIRED, fired, source=agent)
                raise
        self.bus.emit(TIMER_FIRED, {"timer_id": timer_id, "agent": agent}, source=agent)

    async def _replayed(self, agent: str, timer_id: str, until: datetime) -> None:
        """Set and fire a timer in its recorded turns, without waiting for a clock."""
        recorded = (self._replay or {}).pop(timer_id, [])
        set_ = next((s for s in recorded if s.name == TIMER_SET), None)
        fired = next((s for s in recorded if s.name == TIMER_FIRED), None)
        payload = (
            dict(set_.payload)
            if set_ is not None
            else {"timer_id": timer_id, "agent": agent, "until": until_text(until)}
        )
        self.bus.emit(TIMER_SET, payload, source=agent)
        if fired is not None and self._turn is not None:
            await self._turn(fired.seq, agent)
        ended = dict(fired.payload) if fired is not None else {"timer_id": timer_id, "agent": agent}
        self.bus.emit(TIMER_FIRED, ended, source=agent)
