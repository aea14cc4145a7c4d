"""Admission in a run: the scheduler's gate in front of each agent declared with ``admit=``.

A trigger of such an agent goes to its :class:`Gate` instead of starting at once. The
gate asks the agent's :class:`~reactor._activation.admitting.Admission` what to do
whenever something changes (a trigger arrives, one of its activations finishes, a wait
the admission asked for is over) and carries it out: it emits ``agent:<name>:skipped``
for what was superseded, merged or capped, and starts the rest, each with its
``ctx.batch``. Time is the event loop's clock (``loop.time()``).

While triggers wait, the gate holds the run open (the scheduler counts it as a task),
so a run never ends with a trigger undecided; a run that stops skips them (``ended``).

During a replay the gate makes no decision of its own: it repeats the recorded ones,
each once the replay has emitted the signals recorded before it and the triggers it
names have arrived (a trigger no recorded decision names is decided live). A replay
that diverged may never bring what a recorded decision waits for: once the replay's
``order_timeout`` has passed with the run emitting nothing, the gate decides what
waits live, as the replay's other steps stop waiting for their turns.
"""

from __future__ import annotations

import asyncio
import contextvars
import time
from collections import deque
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from reactor._activation.admitting import Admission, Recorded, RecordedDecision, Take
from reactor._agents.admission import SpendCap
from reactor._signals.diagnostics import log
from reactor._signals.names import PROVIDER_END

if TYPE_CHECKING:
    from reactor._activation.agentrun import Activation, AgentRun
    from reactor._recording.recording import Recording
    from reactor._signals.bus import SignalBus
    from reactor._signals.signal import Signal

__all__ = ["Gate", "GateHost", "Ledger"]


class GateHost(Protocol):
    """What a gate needs of the scheduler."""

    @property
    def bus(self) -> SignalBus:
        """The run's bus."""
        ...

    @property
    def ending(self) -> bool:
        """Whether the run takes no new activations."""
        ...

    def launch(
        self, agent_run: AgentRun, trigger: Signal, batch: tuple[Signal, ...] | None
    ) -> Activation | None:
        """Start an activation (``None``: the run refused it, and skipped the trigger)."""
        ...

    def skip(
        self, agent_run: AgentRun, trigger: Signal, reason: str, by: Signal | None = None
    ) -> None:
        """Emit ``agent:<name>:skipped`` for ``trigger`` (``by``: the trigger that took it)."""
        ...

    def hold_open(self, holding: bool) -> None:
        """Count a gate with waiting triggers as work in flight (or stop counting it)."""
        ...


class Ledger:
    """What the run's model calls cost, and when (for spend caps): from ``provider:end``.

    Args:
        keep_for: Seconds a cost is kept (the longest period of the run's caps): a run
            that lives for months does not keep every call it made.
    """

    def __init__(self, keep_for: float = 0.0) -> None:
        self.keep_for = keep_for
        self._costs: deque[tuple[float, str, float]] = deque()  # (epoch seconds, agent, USD)

    def add(self, signal: Signal) -> None:
        """Note the cost a ``provider:end`` reports."""
        payload = signal.payload if isinstance(signal.payload, Mapping) else {}
        cost = payload.get("cost_usd")
        if isinstance(cost, int | float) and cost > 0:
            now = time.time()
            costs = self._costs
            costs.append((now, str(payload.get("agent")), float(cost)))
            while costs[0][0] < now - self.keep_for:
                costs.popleft()

    def spent(self, agent: str | None, since: float) -> float:
        """What ``agent``'s model calls (every agent's: ``None``) cost since ``since``."""
        return sum(
            cost for at, who, cost in self._costs if at >= since and (agent is None or who == agent)
        )

    @classmethod
    def of(cls, agents: Sequence[AgentRun]) -> Ledger:
        """The ledger of ``agents``: what their spend caps need kept (nothing, without one)."""
        periods = [
            policy.per.total_seconds()
            for agent_run in agents
            for policy in agent_run.agent.admit
            if isinstance(policy, SpendCap)
        ]
        return cls(max(periods, default=0.0))

    def follow(self, bus: SignalBus) -> None:
        """Note the costs of ``bus``'s model calls from now on."""
        bus.subscribe(PROVIDER_END, self.add)


class Gate:
    """The admission of one agent in one run (see the module's docstring).

    Args:
        host: The run's scheduler.
        agent_run: The agent.
        ledger: The run's model spend.
        replay: The recording a replay repeats, if this run is one.
        patience: How long (seconds) a replay's recorded decision waits for what it
            needs before the gate decides live.
    """

    def __init__(
        self,
        host: GateHost,
        agent_run: AgentRun,
        ledger: Ledger,
        replay: Recording | None,
        patience: float = 5.0,
    ) -> None:
        self.host = host
        self.agent_run = agent_run
        self.admission = Admission(agent_run.name, agent_run.agent.admit, ledger.spent)
        self.running: dict[Activation, Signal] = {}
        self.recorded = Recorded(agent_run.name, replay.signals) if replay is not None else None
        self._pending = list(self.recorded.decisions) if self.recorded is not None else []
        self._arrived: dict[int, Signal] = {}  # triggers a recorded decision is waiting for
        self._seen: dict[int, Signal] = {}  # and every trigger a replayed batch may take
        self._timer: asyncio.TimerHandle | None = None
        self._patience = patience
        self._late: asyncio.TimerHandle | None = None  # a replay's recorded decisions given up
        self._late_seq = 0  # the run's last seq when that wait began
        self._holding = False
        self._deciding = False
        self._again = False

    # -- what the scheduler tells it ------------------------------------------------

    def offer(self, trigger: Signal) -> None:
        """``trigger`` activates the agent: admit it now, later, or never."""
        recorded = self.recorded
        if recorded is not None and trigger.seq in recorded.triggers:
            self._arrived[trigger.seq] = self._seen[trigger.seq] = trigger
            self.replay_turn()
        else:
            self.admission.offer(trigger, asyncio.get_running_loop().time())
            self.decide()
        self._hold()

    def finished(self, activation: Activation) -> None:
        """One of the agent's activations finished: what waits for it may start."""
        self.running.pop(activation, None)  # (a resumed one was started without the gate)
        if self.admission.waiting:
            self.decide()
            self._hold()

    def stop(self) -> None:
        """The run stops: every waiting trigger is skipped (``ended``)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._watch(False)
        waiting = [item.signal for item in self.admission.waiting]
        waiting += [self._arrived[seq] for seq in sorted(self._arrived)]
        self.admission.waiting.clear()
        self._arrived.clear()
        self._seen.clear()
        self._pending.clear()
        for trigger in sorted(waiting, key=lambda signal: signal.seq):
            self.host.skip(self.agent_run, trigger, "ended")
        self._hold()

    # -- live decisions -------------------------------------------------------------

    def decide(self) -> None:
        """Ask the admission what to do now, and do it (once at a time)."""
        if self._deciding:
            self._again = True  # a decision's own signals brought something new
            return
        self._deciding = True
        try:
            self._again = True
            while self._again:
                self._again = False
                self._decide_once()
        finally:
            self._deciding = False

    def _decide_once(self) -> None:
        if self.host.ending:
            self.stop()
            return
        if not self.admission.waiting:
            return
        loop = asyncio.get_running_loop()
        agent_run = self.agent_run
        parallel = agent_run.agent.concurrency == "parallel"
        room = None if parallel else max(0, 1 - agent_run.running)
        decision = self.admission.decide(
            loop.time(), time.time(), room, tuple(self.running.values())
        )
        for trigger, newer in decision.superseded:
            self.host.skip(agent_run, trigger, "superseded", newer)
        for trigger in decision.capped:
            self.host.skip(agent_run, trigger, "spend_cap")
        for take in decision.take:
            self._take(take)
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if decision.wake_at is not None and self.admission.waiting:
            self._timer = loop.call_at(decision.wake_at, self._wake, context=contextvars.Context())

    def _take(self, take: Take) -> None:
        for trigger in take.merged:
            self.host.skip(self.agent_run, trigger, "merged", take.trigger)
        self._launch(take.trigger, take.batch)

    def _launch(self, trigger: Signal, batch: tuple[Signal, ...] | None) -> None:
        activation = self.host.launch(self.agent_run, trigger, batch)
        if activation is not None:
            self.running[activation] = trigger

    def _wake(self) -> None:
        self._timer = None
        self.decide()
        self._hold()

    # -- a replay's decisions ---------------------------------------------------------

    def replay_turn(self, _: Any = None) -> None:
        """Repeat the recorded decisions whose turn has come and whose triggers are here."""
        if self._deciding or not self._pending:
            return
        self._deciding = True
        try:
            while self._repeat_one():
                self._watch(False)  # progress: the wait begins again
        finally:
            self._deciding = False
        self._watch(bool(self._arrived))
        self._hold()

    def _repeat_one(self) -> bool:
        reached = self.host.bus.last_seq
        arrived, seen = self._arrived, self._seen
        for index, decision in enumerate(self._pending):
            if decision.seq - 1 > reached:
                return False  # the later ones' turns have not come either
            if (
                decision.trigger in arrived
                and all(seq in seen for seq in decision.needs)
                and self._taker_here(decision)
            ):
                del self._pending[index]
                self._repeat(decision)
                return True
        return False

    def _taker_here(self, decision: RecordedDecision) -> bool:
        """Whether the trigger that took a superseded or merged one arrived (if it comes)."""
        by, recorded = decision.by, self.recorded
        return by is None or by in self._seen or recorded is None or by not in recorded.triggers

    def _repeat(self, decision: RecordedDecision) -> None:
        trigger = self._arrived.pop(decision.trigger)
        if decision.skip is not None:
            by = None if decision.by is None else self._seen.get(decision.by)
            self.host.skip(self.agent_run, trigger, decision.skip, by)
            if decision.skip != "merged":  # a merged one may be in a later batch
                del self._seen[decision.trigger]
            return
        batch = None
        if decision.batch is not None:
            batch = tuple(self._seen.pop(seq, trigger) for seq in decision.batch)
        self._seen.pop(decision.trigger, None)
        self._launch(trigger, batch)

    def _watch(self, waiting: bool) -> None:
        """Give up on the recorded decisions if what they wait for does not come in time."""
        if not waiting:
            if self._late is not None:
                self._late.cancel()
                self._late = None
        elif self._late is None and self._patience > 0:
            self._late_seq = self.host.bus.last_seq
            loop = asyncio.get_running_loop()
            self._late = loop.call_later(
                self._patience, self._diverged, context=contextvars.Context()
            )

    def _diverged(self) -> None:
        """The replay diverged: what waits for a recorded decision is decided live."""
        self._late = None
        if self.host.bus.last_seq != self._late_seq:  # the run goes on: wait some more
            self._watch(True)
            return
        log(
            "reactor.replay",
            "warning",
            "admission not reproduced",
            agent=self.agent_run.name,
            hint="the run diverged from the recording; its triggers are admitted live",
        )
        now = asyncio.get_running_loop().time()
        for seq in sorted(self._arrived):
            self.admission.offer(self._arrived[seq], now)
        self._arrived.clear()
        self._seen.clear()
        self._pending.clear()
        self.decide()
        self._hold()

    # -- holding the run open -----------------------------------------------------------

    def _hold(self) -> None:
        holding = bool(self.admission.waiting or self._arrived)
        if holding != self._holding:
            self._holding = holding
            self.host.hold_open(holding)
