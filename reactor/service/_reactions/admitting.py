"""A reaction agent's admission: which waiting events start now, and what becomes of the rest.

The processing log hands :meth:`Admission.decide` the agent's waiting entries (in its
transaction, one process at a time per agent) and writes back what it decides. The
policies of ``Reaction(admit=...)`` apply in the order given, each to what the one
before let through, as an agent's do in a run, and by the same code
(``reactor._agents.admission``; a spend cap is each side's own):

* ``Latest(key)``: per key, only the newest entry waits; the older ones are
  ``superseded`` by it. While an entry of the key is processing, the newest waits.
* ``Debounce(seconds, deliver, max_wait, key)``: per key, the entries of a burst wait
  until none came for ``seconds`` (or the first has waited ``max_wait``); then the
  newest goes, the others ``merged`` into it (with ``deliver="batch"`` they are its
  batch, ``ctx.batch``).
* ``Batch(max_items, max_wait, key)``: per key (one batch for the agent by default),
  ``max_items`` entries go as one, or fewer once the first has waited ``max_wait``.
* ``Throttle(rate, per, burst)``: a token bucket per key (one for the agent by
  default), shared by every process through the database; what finds no token waits.
* ``SpendCap(usd, per, scope)``: past the cap of the period (aligned to the epoch:
  hours start on the hour), entries are ``held`` until the period rolls or an admin
  raises the cap.

Entries whose object type matches a policy's ``keep=`` are never superseded or merged
by it: they go alone. Nothing is merged into an entry that does not start now: its
batch is decided when it goes. The key is the object id unless a policy names one
(a template over the object, ``"{{ object.data.symbol }}"``, or a function of it).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
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
from reactor._agents.budget import dollars
from reactor._agents.templates import compile_template, render
from reactor.service._objects.processing import Decision, Spent, Waiting

__all__ = ["Admission"]

Keyer = Callable[[Waiting], str]


@dataclass
class _Round:
    """One decision in the making (a :class:`~reactor._agents.admission.Round`)."""

    now: float
    ready: list[Pick[Waiting]]
    cap_usd: float | None = None  # an admin's cap over the agent's SpendCap
    decision: Decision = field(default_factory=Decision)

    def wake(self, at: float) -> None:
        """Decide again at ``at`` at the latest: what waits may go then."""
        wake = self.decision.wake_at
        self.decision.wake_at = at if wake is None else min(wake, at)

    def release(self, at: float) -> None:
        """What a cap holds may go at ``at`` (its period rolls)."""
        release = self.decision.release_at
        self.decision.release_at = at if release is None else min(release, at)

    def supersede(self, older: Pick[Waiting], newer: Pick[Waiting]) -> None:
        self.decision.superseded[older.item.id] = newer.item.id

    def token(self, pick: Pick[Waiting], bucket: str, due: float) -> None:
        self.decision.buckets[bucket] = due  # every process shares the bucket


class Admission:
    """The admission of one reaction agent (see the module's docstring).

    Args:
        agent: The agent's name.
        policies: Its ``Reaction(admit=...)``.
        service_cap: The service's cap (``REACTOR_SPEND_CAP_USD``), applied last.
    """

    def __init__(
        self,
        agent: str,
        policies: Sequence[AdmissionPolicy],
        *,
        service_cap: SpendCap | None = None,
    ) -> None:
        self.agent = agent
        self.policies = (*policies, *([service_cap] if service_cap is not None else []))
        keys = [key_of(policy) for policy in self.policies]
        self.reads_data = any(key is not None for key in keys)
        """Whether a key reads the objects' data (the processing log then reads it too)."""

    def __bool__(self) -> bool:
        return bool(self.policies)

    @property
    def period(self) -> float | None:
        """The period of the agent's own spend cap, in seconds (``None``: it has none)."""
        for policy in self.policies:
            if isinstance(policy, SpendCap) and policy.scope == "agent":
                return policy.per.total_seconds()
        return None

    def decide(
        self,
        waiting: Sequence[Waiting],
        buckets: Mapping[str, float],
        spent: Spent,
        now: float,
        room: int,
        cap_usd: float | None = None,
    ) -> Decision:
        """Which waiting entries start now (at most ``room``), and what becomes of the rest.

        ``cap_usd``: an admin's cap over the agent's ``SpendCap(scope="agent")``
        (``agents.spend_cap_usd``; ``None``: the policy's own).
        """
        busy = [entry for entry in waiting if entry.status == "processing"]
        candidates = [entry for entry in waiting if entry.status != "processing"]
        picks = [Pick(entry, entry.created_at, entry.id, entry.object_type) for entry in candidates]
        state = _Round(now, picks, cap_usd)
        for policy in self.policies:
            state.ready = self._apply(policy, state, busy, buckets, spent)
        self._settle(state, candidates, room)
        return state.decision

    def _apply(
        self,
        policy: AdmissionPolicy,
        state: _Round,
        busy: Sequence[Waiting],
        buckets: Mapping[str, float],
        spent: Spent,
    ) -> list[Pick[Waiting]]:
        if isinstance(policy, Latest):
            return apply_latest(policy, state, self._keyer(policy.key, default_object=True), busy)
        if isinstance(policy, Debounce):
            return apply_debounce(policy, state, self._keyer(policy.key, default_object=True))
        if isinstance(policy, Batch):
            return apply_batch(policy, state, self._keyer(policy.key, default_object=False))
        if isinstance(policy, Throttle):
            return apply_throttle(
                policy, state, self._keyer(policy.per, default_object=False), buckets
            )
        return self._cap(policy, state, spent)

    # -- the spend cap (the other policies: reactor._agents.admission) -------------

    def _cap(self, policy: SpendCap, state: _Round, spent: Spent) -> list[Pick[Waiting]]:
        period = policy.per.total_seconds()
        start = math.floor(state.now / period) * period
        raised = state.cap_usd is not None and policy.scope == "agent"
        cap = state.cap_usd if raised and state.cap_usd is not None else policy.usd
        used = spent(self.agent if policy.scope == "agent" else None, start)
        if used < cap:
            return state.ready
        whose = "this agent's" if policy.scope == "agent" else "the service's"
        why = (
            f"spend cap: {whose} model calls cost {dollars(used)} of {dollars(cap)} this "
            "period; held until the period rolls or an admin raises the cap"
        )
        for pick in state.ready:
            state.decision.held[pick.item.id] = why
        state.release(start + period)
        return []

    # -- the decision ---------------------------------------------------------------

    def _settle(self, state: _Round, candidates: Sequence[Waiting], room: int) -> None:
        """Take what may go (within ``room``); release what a cap no longer holds."""
        decision = state.decision
        for pick in state.ready[: max(room, 0)]:
            merged = [each.item.id for each in in_order(pick.merged)]
            for entry in merged:
                decision.merged[entry] = pick.item.id
            batched = (*merged, pick.item.id) if pick.batch else ()
            decision.take.append((pick.item.id, batched))
        held = {entry.id for entry in candidates if entry.status == "held"}
        decision.released = sorted(held - set(decision.held))

    def _keyer(self, key: Any, *, default_object: bool) -> Keyer:
        """What groups entries: the object id, one group, a template or a function."""
        if key is None:
            return (lambda entry: entry.object_id) if default_object else (lambda entry: "")
        if callable(key):
            return lambda entry: str(key(_object_of(entry)))
        template = compile_template(key, agent=self.agent, field="admission key")
        return lambda entry: str(
            render(template, {"object": _object_of(entry)}, agent=self.agent, field="admission key")
        )


def _object_of(entry: Waiting) -> dict[str, Any]:
    """The entry's object as a key sees it: a dict, as templates see objects."""
    return {"id": entry.object_id, "type": entry.object_type, "data": dict(entry.data or {})}
