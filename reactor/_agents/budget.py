"""Budgets: what a run, or one agent, may spend on model calls before they stop.

``run(budget=Budget(usd=2.0))`` bounds the whole run, ``agent(budget=...)`` one agent
(its calls across the run). Before each model call the run compares what was spent
with every budget that applies; a call that would start over one is not made: the run
stops with status ``failed`` and a :class:`~reactor.BudgetExceededError` naming the
budget, what was spent and the agent. A budget is reached when what was spent is at
the limit (tokens and dollars are known only after a call, so the call that crosses a
limit finishes, and the next one is refused); ``model_calls`` counts the calls made.

A cost that is unknown (a model with no price in :data:`reactor.model_prices` or the
provider's ``prices=``) counts as over a USD budget: the error says which and how to
give the price, rather than letting an unpriced run spend without bound.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from reactor._signals.payloads import input_tokens
from reactor.exceptions import BudgetExceededError

__all__ = [
    "Budget",
    "Spending",
    "check_budget",
    "dollars",
]

_LIMITS = ("usd", "input_tokens", "output_tokens", "model_calls")


def dollars(amount: float) -> str:
    """An amount of US dollars as people write it: ``$5.00``, ``$0.0157``, ``$0.0000001``.

    Cents from a dollar up; below, the digits that are there (a model call costs a
    fraction of a cent), never a float's exponent (``$1e-07``).
    """
    if amount >= 1:
        return f"${amount:,.2f}"
    digits = f"{amount:.10f}".rstrip("0")
    whole, _, fraction = digits.partition(".")
    return f"${whole}.{fraction.ljust(2, '0')}"


@dataclasses.dataclass(frozen=True, slots=True)
class Budget:
    """Limits on model calls: ``Budget(usd=0.50, model_calls=20)``; ``None`` is no limit.

    Attributes:
        usd: Dollars, as the providers price the calls (unknown prices count as over).
        input_tokens: Input tokens (cache reads and writes included).
        output_tokens: Output tokens.
        model_calls: Calls to a model (a call's tool rounds are one call).

    Raises:
        ValueError: A limit is negative or not a number.
    """

    usd: float | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    model_calls: int | None = None

    def __post_init__(self) -> None:
        for name in _LIMITS:
            value = getattr(self, name)
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0
            ):
                raise ValueError(
                    f"Budget({name}=...) must be a number >= 0 (or None for no limit), "
                    f"got {value!r}."
                )


@dataclasses.dataclass(slots=True)
class Spending:
    """What was spent on model calls (by a run, or by one agent in it)."""

    usd: float | None = 0.0  # None once a call's cost is unknown
    input_tokens: int = 0
    output_tokens: int = 0
    model_calls: int = 0
    unpriced: str | None = None  # a model whose calls have no price

    def add(self, usage: Mapping[str, int], cost_usd: float | None, model: str | None) -> None:
        """Count one call's usage (``provider:end``'s) and cost."""
        self.input_tokens += input_tokens(usage)
        self.output_tokens += int(usage.get("output_tokens", 0))
        if cost_usd is None:
            self.usd = None
            self.unpriced = self.unpriced or model
        elif self.usd is not None:
            self.usd += cost_usd

    def to_dict(self) -> dict[str, Any]:
        """JSON data, for a snapshot of the run."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Spending:
        """The inverse of :meth:`to_dict`."""
        return cls(**{f.name: data[f.name] for f in dataclasses.fields(cls) if f.name in data})


def check_budget(
    budget: Budget,
    spent: Spending,
    *,
    agent: str,
    scope: str,
    price_known: bool | None,
) -> None:
    """Refuse a model call of ``agent`` that would start over ``budget``.

    Args:
        budget: The budget.
        spent: What its scope spent so far.
        agent: The agent about to call a model.
        scope: ``run`` or ``agent``, for the message.
        price_known: Whether the call's model has a price (``None`` when the provider
            cannot say; then only costs already unknown count).

    Raises:
        BudgetExceededError: A limit is reached.
    """
    whose = "The run's budget" if scope == "run" else f"The budget of agent {agent!r}"

    def of(amount: str) -> str:  # "The run's budget of 100 input tokens"
        return f"{whose} of {amount}" if scope == "run" else f"{whose} ({amount})"

    if budget.model_calls is not None and spent.model_calls >= budget.model_calls:
        raise _exceeded(
            f"{whose} allows {budget.model_calls} model call(s), and {spent.model_calls} "
            f"were made: agent {agent!r} was not allowed another.",
            "model_calls",
            budget.model_calls,
            spent.model_calls,
            agent,
            scope,
        )
    for name in ("input_tokens", "output_tokens"):
        limit, used = getattr(budget, name), getattr(spent, name)
        if limit is not None and used >= limit:
            amount = f"{limit:,} {name.replace('_', ' ')}"
            raise _exceeded(
                f"{of(amount)} is spent ({used:,} used): "
                f"agent {agent!r} was not allowed another model call.",
                name,
                limit,
                used,
                agent,
                scope,
            )
    if budget.usd is None:
        return
    if spent.usd is None or price_known is False:
        model = spent.unpriced if spent.usd is None else "the model this call would use"
        raise _exceeded(
            f"{whose} is {dollars(budget.usd)}, and the cost of {model} is unknown (no price), "
            f"so agent {agent!r} was not allowed the call: an unknown cost counts as over a "
            "USD budget. Give the model's price (AnthropicProvider(prices={...}) or "
            "reactor.model_prices), or budget tokens instead of dollars.",
            "usd",
            budget.usd,
            None,
            agent,
            scope,
        )
    if spent.usd >= budget.usd:
        raise _exceeded(
            f"{of(dollars(budget.usd))} is spent ({dollars(spent.usd)} so far): agent {agent!r} "
            "was not allowed another model call.",
            "usd",
            budget.usd,
            round(spent.usd, 6),
            agent,
            scope,
        )


def _exceeded(
    message: str, budget: str, limit: float, spent: float | None, agent: str, scope: str
) -> BudgetExceededError:
    return BudgetExceededError(
        message + " Raise the budget if the run should go on.",
        budget=budget,
        limit=limit,
        spent=spent,
        agent=agent,
        scope=scope,
    )
