"""An agent's admission in a run: which waiting triggers start now, and what becomes of the rest.

``agent(admit=...)`` declares it (``reactor._agents.admission``); the run's scheduler
gives each trigger of such an agent to its :class:`Admission` instead of starting it,
and asks :meth:`Admission.decide` again whenever something changes (a trigger
arrives, an activation finishes, a wait it asked for is over). The policies apply in
the order given, each to what the one before let through, as a reaction's do in the
service (``reactor.service._reactions.admitting``), and by the same code
(``reactor._agents.admission``; a spend cap is each side's own):

* ``Latest(key)``: per key, only the newest trigger waits; the older ones are
  ``superseded``. While an activation of the key runs, the newest waits.
* ``Debounce(seconds, deliver, max_wait, key)``: per key, the triggers of a burst
  wait until none came for ``seconds`` (or the first has waited ``max_wait``); then
  the newest goes, the others ``merged`` into it (with ``deliver="batch"`` they are its
  batch, ``ctx.batch``).
* ``Batch(max_items, max_wait, key)``: per key, ``max_items`` triggers go as one
  activation, or fewer once the first has waited ``max_wait``.
* ``Throttle(rate, per, burst)``: a token bucket per key; what finds no token waits.
* ``SpendCap(usd, per, scope)``: past the cap of the period (aligned to the epoch),
  triggers are skipped with reason ``spend_cap``.

Triggers whose name matches a policy's ``keep=`` are never superseded or merged by it.
The key is one group for the agent unless a policy names one (a template over the
trigger, ``"{{ signal.payload.symbol }}"``, or a function of the trigger signal).

Decisions depend on time, so a replay does not make them again: :class:`Recorded`
reads the recorded ones (``agent:<name>:skipped`` and ``agent:<name>:activated``) and
the scheduler repeats each in its recorded turn.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from reactor._agents.admission import (
    AdmissionPolicy,
    Batch,
    Debounce,
    Latest,
    Pick,
    SpendCap,
    Throttle,
    apply_batch,
    apply_debounce,
    apply_latest,
    apply_throttle,
    in_order,
    key_of,
)
from reactor._agents.templates import compile_template, render
from reactor._signals.names import agent_names
from reactor._signals.signal import Signal

__all__ = [
    "Admission",
    "Decision",
    "Recorded",
    "RecordedDecision",
    "Spent",
    "Take",
    "Waiting",
    "batch_seqs",
]


def batch_seqs(activated: Signal) -> tuple[int, ...] | None:
    """The ``seq`` of each trigger delivered with an activation (its ``ctx.batch``).

    Its ``agent:<name>:activated`` payload lists them in ``batch``; ``None`` when
    nothing was delivered with the trigger.
    """
    payload = activated.payload
    seqs = payload.get("batch") if isinstance(payload, Mapping) else None
    return tuple(int(seq) for seq in seqs) if isinstance(seqs, list) else None


Spent = Callable[[str | None, float], float]
"""What model calls cost since a time (epoch seconds): of an agent, or of every one (``None``)."""

Keyer = Callable[[Signal], str]

SKIP_REASONS = ("superseded", "merged", "spend_cap")
"""The reasons of the skips admission decides (a replay repeats them)."""


@dataclasses.dataclass(eq=False)
class Waiting:
    """A trigger waiting for admission, and when it arrived (the run's clock, seconds)."""

    signal: Signal
    at: float


@dataclasses.dataclass(eq=False)
class Take:
    """An activation admission starts.

    Attributes:
        trigger: Its trigger (the newest of what it took).
        merged: The triggers merged into it, skipped ``merged``, in arrival order.
        batch: What ``ctx.batch`` holds (the merged triggers and the trigger, in
            arrival order), or ``None`` when nothing is delivered with it.
    """

    trigger: Signal
    merged: tuple[Signal, ...] = ()
    batch: tuple[Signal, ...] | None = None


@dataclasses.dataclass(eq=False)
class Decision:
    """What one :meth:`Admission.decide` decided.

    Attributes:
        take: The activations to start, in arrival order of their triggers.
        superseded: Triggers a newer one superseded, each with the newer one.
        capped: Triggers a spend cap turned away.
        wake_at: When to decide again at the latest (the run's clock), if a wait ends.
    """

    take: list[Take] = dataclasses.field(default_factory=list)
    superseded: list[tuple[Signal, Signal]] = dataclasses.field(default_factory=list)
    capped: list[Signal] = dataclasses.field(default_factory=list)
    wake_at: float | None = None

    def wake(self, at: float) -> None:
        """Decide again at ``at`` at the latest."""
        self.wake_at = at if self.wake_at is None else min(self.wake_at, at)


@dataclasses.dataclass(eq=False)
class _Round:
    """One decision in the making (a :class:`~reactor._agents.admission.Round`)."""

    now: float
    wall: float
    ready: list[Pick[Signal]]
    running: Sequence[Signal]
    decision: Decision = dataclasses.field(default_factory=Decision)

    def wake(self, at: float) -> None:
        self.decision.wake(at)

    def supersede(self, older: Pick[Signal], newer: Pick[Signal]) -> None:
        self.decision.superseded.append((older.item, newer.item))

    def token(self, pick: Pick[Signal], bucket: str, due: float) -> None:
        pick.tokens[bucket] = due  # taken if it starts


class Admission:
    """The admission of one agent in one run (see the module's docstring).

    Args:
        agent: The agent's name.
        policies: Its ``admit=``.
        spent: What model calls cost (for a ``SpendCap``).
    """

    def __init__(self, agent: str, policies: Sequence[AdmissionPolicy], spent: Spent) -> None:
        self.agent = agent
        self.policies = tuple(policies)
        self.spent = spent
        self.waiting: list[Waiting] = []
        self.buckets: dict[str, float] = {}  # a throttle's bucket -> when its next token is
        self._keys = {id(policy): self._keyer(key_of(policy)) for policy in self.policies}

    def offer(self, signal: Signal, now: float) -> None:
        """``signal`` triggered the agent at ``now``: it waits to be decided on."""
        self.waiting.append(Waiting(signal, now))

    def decide(
        self, now: float, wall: float, room: int | None, running: Sequence[Signal]
    ) -> Decision:
        """Which waiting triggers start now (at most ``room``), and what becomes of the rest.

        Args:
            now: The run's clock (seconds; what arrival times are in).
            wall: The time since the epoch (spend caps' periods are aligned to it).
            room: How many activations may start (``None``: any number).
            running: The triggers of the agent's activations running now.
        """
        picks = [
            Pick(item.signal, item.at, item.signal.seq, item.signal.name) for item in self.waiting
        ]
        state = _Round(now, wall, picks, running)
        for policy in self.policies:
            state.ready = self._apply(policy, state)
        self._settle(state, room)
        return state.decision

    def _apply(self, policy: AdmissionPolicy, state: _Round) -> list[Pick[Signal]]:
        key = self._keys[id(policy)]
        if isinstance(policy, Latest):
            return apply_latest(policy, state, key, state.running)
        if isinstance(policy, Debounce):
            return apply_debounce(policy, state, key)
        if isinstance(policy, Batch):
            return apply_batch(policy, state, key)
        if isinstance(policy, Throttle):
            return apply_throttle(policy, state, key, self.buckets, prefix=f"{id(policy)}:")
        return self._cap(policy, state)

    # -- the spend cap (the other policies: reactor._agents.admission) -------------

    def _cap(self, policy: SpendCap, state: _Round) -> list[Pick[Signal]]:
        period = policy.per.total_seconds()
        start = math.floor(state.wall / period) * period
        if self.spent(self.agent if policy.scope == "agent" else None, start) < policy.usd:
            return state.ready
        for pick in state.ready:
            state.decision.capped.extend(each.item for each in (*pick.merged, pick))
        return []

    # -- the decision ---------------------------------------------------------------

    def _settle(self, state: _Round, room: int | None) -> None:
        """Take what may go (within ``room``); forget what was decided on."""
        decision = state.decision
        taken = state.ready if room is None else state.ready[: max(room, 0)]
        gone = {id(signal) for signal, _ in decision.superseded}
        gone.update(id(signal) for signal in decision.capped)
        for pick in taken:
            signals = tuple(each.item for each in in_order(pick.merged))
            batched = (*signals, pick.item) if pick.batch else None
            decision.take.append(Take(pick.item, signals, batched))
            gone.update(id(signal) for signal in (*signals, pick.item))
            self.buckets.update(pick.tokens)
        self.waiting = [item for item in self.waiting if id(item.signal) not in gone]

    def _keyer(self, key: Any) -> Keyer:
        """What groups triggers: one group, a template or a function of the trigger."""
        if key is None:
            return lambda signal: ""
        if callable(key):
            return lambda signal: str(key(signal))
        template = compile_template(key, agent=self.agent, field="admission key")
        return lambda signal: str(
            render(template, {"signal": signal}, agent=self.agent, field="admission key")
        )


# -- a replay's decisions -------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class RecordedDecision:
    """One recorded decision of an agent's admission.

    Attributes:
        seq: The ``seq`` of its signal (``skipped`` or ``activated``).
        trigger: The ``seq`` of the trigger it decided on.
        skip: The reason of a skip; ``None`` for an activation.
        batch: The ``seq`` of each trigger of an activation's ``ctx.batch``.
        by: The ``seq`` of the trigger that took a superseded or merged one.
    """

    seq: int
    trigger: int
    skip: str | None = None
    batch: tuple[int, ...] | None = None
    by: int | None = None

    @property
    def needs(self) -> tuple[int, ...]:
        """The triggers that must have arrived before it is repeated."""
        return (*(self.batch or ()), self.trigger)


class Recorded:
    """The admission decisions a recorded run made for one agent, in their order.

    A trigger none of them names (the run refused to launch it, or the replay diverged)
    is decided live.
    """

    def __init__(self, agent: str, signals: Sequence[Signal]) -> None:
        activated, _, _, skipped, _ = agent_names(agent)
        seqs = {signal.id: signal.seq for signal in signals}
        self.decisions: list[RecordedDecision] = []
        for signal in signals:
            if signal.name not in (activated, skipped) or signal.caused_by not in seqs:
                continue
            payload = signal.payload if isinstance(signal.payload, Mapping) else {}
            trigger = seqs[signal.caused_by]
            if signal.name == skipped:
                reason = payload.get("reason")
                if reason in SKIP_REASONS:
                    taker = payload.get("superseded_by")
                    by = taker if isinstance(taker, int) else None
                    self.decisions.append(RecordedDecision(signal.seq, trigger, str(reason), by=by))
                continue
            self.decisions.append(RecordedDecision(signal.seq, trigger, batch=batch_seqs(signal)))
        self.triggers = {seq for decision in self.decisions for seq in decision.needs}
        """The triggers a recorded decision was made on (the others are decided live)."""
