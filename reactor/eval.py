"""Scorers for evaluations: what must hold between a recorded run and its new run.

``graph.evaluate(runs, store=store, provider=provider, scorers=[...])`` runs recorded
runs again on the current graph; a scorer is any callable ``scorer(old, new)``, given
the recorded run (a :class:`~reactor.Recording`) and the new run's result (a
:class:`~reactor.RunResult` whose ``state`` and ``output`` are JSON data, as the
recording holds them: the same types on both sides), that returns a ``bool`` or a
``float``: a case passes when every scorer's result is truthy (a float of ``0.0``
fails it). The scorers below read a run's final state as evaluations compare it: for
a graph of one agent (a reaction's), its output, its decision, is there too, under
``"output"``. These are the usual ones::

    from reactor.eval import cost_within, decision_kept, state_equal

    report = await graph.evaluate(
        {"tag": "dataset=golden"}, store=store, provider=provider,
        scorers=[decision_kept("decision"), cost_within(1.2)],
    )
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from reactor._engine.result import RunResult
from reactor._graph.recorded import outcome
from reactor._graph.report import EvalCase, EvalReport, spent
from reactor._recording.recording import Recording

__all__ = [
    "EvalCase",
    "EvalReport",
    "Scorer",
    "cost_within",
    "decision_kept",
    "state_equal",
]


@dataclasses.dataclass(frozen=True)
class Scorer:
    """A named check of a new run against its recording (what the scorers below return).

    Attributes:
        name: How the report names it, e.g. ``decision_kept('decision')``.
        check: ``check(old, new) -> bool | float``.
    """

    name: str
    check: Callable[[Recording, RunResult], bool | float]

    @property
    def __name__(self) -> str:  # the report names a scorer by it
        return self.name

    def __call__(self, old: Recording, new: RunResult) -> bool | float:
        """Score ``new`` against ``old``."""
        return self.check(old, new)


def state_equal(*keys: str) -> Scorer:
    """The final state is the same: at ``keys`` (every key when none are given).

    A key may be a dotted path into the state (``"proposal.action"``).

    Raises:
        TypeError: A key is not a string.
    """
    for key in keys:
        if not isinstance(key, str):
            raise TypeError(f"state_equal takes state keys (strings), got {key!r}.")

    def check(old: Recording, new: RunResult) -> bool:
        before, after = outcome(old), outcome(new)
        chosen = keys or tuple(dict.fromkeys([*before, *after]))
        return all(_at(before, key) == _at(after, key) for key in chosen)

    shown = ", ".join(map(repr, keys))
    return Scorer(f"state_equal({shown})", check)


def decision_kept(key: str) -> Scorer:
    """The decision the run wrote at ``key`` (its final value) did not flip.

    ``key`` is a state key or a dotted path into it: ``decision_kept("proposal.action")``
    passes when the action is the same, whatever the proposal's rationale says. A
    reaction's decision is its output: ``decision_kept("output.operations")``.

    Raises:
        TypeError: ``key`` is not a string.
    """
    if not isinstance(key, str):
        raise TypeError(f"decision_kept takes a state key (a string), got {key!r}.")

    def check(old: Recording, new: RunResult) -> bool:
        return bool(_at(outcome(old), key) == _at(outcome(new), key))

    return Scorer(f"decision_kept({key!r})", check)


def cost_within(ratio: float) -> Scorer:
    """The new run cost at most ``ratio`` times the recorded one (a cost not known fails).

    Raises:
        ValueError: ``ratio`` is not a positive number.
    """
    if isinstance(ratio, bool) or not isinstance(ratio, int | float) or ratio <= 0:
        raise ValueError(
            f"cost_within takes a positive ratio (1.2: at most 20% more), got {ratio!r}."
        )

    def check(old: Recording, new: RunResult) -> bool:
        before, after = spent(old)[1], new.metrics.cost_usd
        if before is None or after is None:
            return False
        return after <= before * ratio + 1e-12

    return Scorer(f"cost_within({ratio})", check)


def _at(state: Mapping[str, Any], path: str) -> Any:
    """The value at a dotted ``path`` of ``state`` (``None`` where it is missing)."""
    value: Any = state
    for part in path.split("."):
        if not isinstance(value, Mapping):
            return None
        value = value.get(part)
    return value
