"""Scorers for evaluations: what must hold between a recorded run and its new run.

``graph.evaluate(runs, store=store, provider=provider, scorers=[...])`` runs recorded
runs again on the current graph; a scorer is any callable ``scorer(old, new)``, given
the recorded run (a :class:`~reactor.Recording`) and the new run's result (a
:class:`~reactor.RunResult`), that returns a ``bool`` or a ``float``: a case passes
when every scorer's result is truthy (a float of ``0.0`` fails it). These are the
usual ones::

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
from reactor._graph.report import EvalCase, EvalReport
from reactor._recording.recording import Recording
from reactor._signals.names import PROVIDER_END
from reactor._signals.signal import to_jsonable

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

    Raises:
        TypeError: A key is not a string.
    """
    for key in keys:
        if not isinstance(key, str):
            raise TypeError(f"state_equal takes state keys (strings), got {key!r}.")

    def check(old: Recording, new: RunResult) -> bool:
        before, after = old.state, _plain(new.state)
        chosen = keys or tuple(dict.fromkeys([*before, *after]))
        return all(before.get(key) == after.get(key) for key in chosen)

    shown = ", ".join(map(repr, keys))
    return Scorer(f"state_equal({shown})", check)


def decision_kept(key: str) -> Scorer:
    """The decision the run wrote at ``key`` (its final value) did not flip.

    Raises:
        TypeError: ``key`` is not a string.
    """
    if not isinstance(key, str):
        raise TypeError(f"decision_kept takes a state key (a string), got {key!r}.")

    def check(old: Recording, new: RunResult) -> bool:
        return bool(old.state.get(key) == _plain(new.state).get(key))

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
        before, after = _cost(old), new.metrics.cost_usd
        if before is None or after is None:
            return False
        return after <= before * ratio + 1e-12

    return Scorer(f"cost_within({ratio})", check)


def _cost(recording: Recording) -> float | None:
    total = 0.0
    for signal in recording.signals:
        if signal.name == PROVIDER_END:
            payload = signal.payload if isinstance(signal.payload, Mapping) else {}
            price = payload.get("cost_usd")
            if not isinstance(price, int | float):
                return None
            total += price
    return total


def _plain(state: Any) -> dict[str, Any]:
    """A run's state as JSON data (as a recording holds it)."""
    return dict(to_jsonable(state))
