"""Offline answers for the bot's LLM agents, computed from what their prompts contain.

Each prompt carries its data as a fenced JSON block; the functions here read it and
answer the way a careful model would, so different markets give different, sensible
decisions, and the same request always gets the same answer (replays stay exact).
"""

from __future__ import annotations

import itertools
import json
import re
import statistics
from typing import Any, Literal

from examples.trading_bot.models import Analysis, MarketData, Review, RiskAssessment, TradeProposal
from reactor import ProviderRequest, ScriptedProvider
from reactor._providers.pricing import DEFAULT_MODEL

__all__ = ["SCENARIOS", "scripted_provider"]

_JSON = re.compile(r"```json\n(.*?)\n```", re.DOTALL)
_FLOOR = re.compile(r"only when the analysis is at least (\d+)% confident")

SCENARIOS: dict[str, list[float]] = {
    "bull": [182.0, 183.1, 184.0, 183.6, 185.2, 186.4, 187.9, 188.6],
    "bear": [412.0, 409.5, 405.8, 407.1, 401.2, 398.4, 395.0, 392.3],
    "choppy": [96.0, 103.5, 94.2, 104.8, 93.1, 105.6, 92.8, 106.9],
    "flat": [50.0, 50.2, 49.9, 50.1, 50.0, 50.2, 49.9, 50.05],
}
"""Closing prices for the bundled scenarios (``--scenario``)."""


def _data(request: ProviderRequest) -> dict[str, Any]:
    found = _JSON.findall(request.prompt)
    if not found:
        raise ValueError(f"The {request.agent} prompt carries no ```json block.")
    data: dict[str, Any] = json.loads(found[-1])
    if "prices" in data:  # the market data itself: apply the model's defaults
        data = MarketData.model_validate(data).model_dump()
    return data


def _returns(prices: list[float]) -> list[float]:
    return [b / a - 1 for a, b in itertools.pairwise(prices)]


def analyze(request: ProviderRequest) -> Analysis:
    """Trend from the short average against the long one; confidence from the gap."""
    prices = _data(request)["prices"]
    short, long = statistics.fmean(prices[-3:]), statistics.fmean(prices)
    gap = short / long - 1
    trend: Literal["up", "down", "sideways"] = (
        "up" if gap > 0.004 else "down" if gap < -0.004 else "sideways"
    )
    consistency = sum(1 for r in _returns(prices) if (r > 0) == (gap > 0)) / (len(prices) - 1)
    confidence = round(min(0.95, 0.35 + abs(gap) * 25 + consistency * 0.3), 2)
    return Analysis(
        trend=trend,
        confidence=confidence,
        rationale=f"3-day average {short:.2f} vs {len(prices)}-day {long:.2f} "
        f"({gap:+.2%}); {consistency:.0%} of days moved with the trend.",
    )


def assess(request: ProviderRequest) -> RiskAssessment:
    """Risk from the volatility of daily returns; position size from cash and risk."""
    data = _data(request)
    volatility = statistics.pstdev(_returns(data["prices"]))
    level: Literal["low", "medium", "high"] = (
        "low" if volatility < 0.012 else "medium" if volatility < 0.03 else "high"
    )
    budget = {"low": 0.5, "medium": 0.25, "high": 0.0}[level] * data["cash"]
    return RiskAssessment(
        level=level,
        volatility=round(volatility, 4),
        max_position=int(budget // data["prices"][-1]),
        rationale=f"Daily returns vary by {volatility:.2%}; {level} risk allows "
        f"{budget / data['cash']:.0%} of cash.",
    )


def trade(request: ProviderRequest) -> TradeProposal:
    """Buy into an up trend, sell into a down trend, otherwise hold.

    An eager trader: when the risk budget is zero it still probes with a small
    position (and the reviewer is there to say no). A prompt that asks to trade "only
    when the analysis is at least N% confident" is followed (``make eval`` tries one).
    """
    data = _data(request)
    analysis, risk, price = data["analysis"], data["risk"], data["price"]
    actions: dict[str, Literal["buy", "sell"]] = {"up": "buy", "down": "sell"}
    action: Literal["buy", "sell", "hold"] = actions.get(analysis["trend"], "hold")
    quantity = int(risk["max_position"] * analysis["confidence"])
    why = f"{analysis['trend'].capitalize()} trend at {analysis['confidence']:.0%} confidence"
    floor = _FLOOR.search(request.prompt)
    if action == "hold":
        quantity, why = 0, "No trend worth the risk."
    elif floor is not None and analysis["confidence"] * 100 < int(floor.group(1)):
        action, quantity = "hold", 0
        why = f"{analysis['confidence']:.0%} confidence is below the {floor.group(1)}% asked."
    elif risk["max_position"] == 0:
        quantity = max(1, int(0.05 * data["cash"] / price))
        why += f"; a small probe despite {risk['level']} risk."
    else:
        why += f", within a {risk['level']} risk budget."
    if quantity == 0 and action != "hold":
        action, why = "hold", "The position the risk allows rounds to nothing."
    limit = round(price * (1.002 if action == "buy" else 0.998), 2)
    return TradeProposal(action=action, quantity=quantity, limit_price=limit, rationale=why)


def review(request: ProviderRequest) -> Review:
    """Approve what fits the risk limits; reject what does not."""
    data = _data(request)
    proposal, risk, cash = data["proposal"], data["risk"], data["cash"]
    notional = proposal["quantity"] * proposal["limit_price"]
    if risk["level"] == "high":
        return Review(approved=False, notes="Risk is high: no new positions.")
    if proposal["quantity"] > risk["max_position"]:
        return Review(approved=False, notes="Quantity exceeds the risk limit.")
    if proposal["action"] == "buy" and notional > cash:
        return Review(approved=False, notes=f"Needs {notional:,.2f} but only {cash:,.2f} in cash.")
    return Review(
        approved=True, notes=f"Within limits: {notional:,.2f} notional, {risk['level']} risk."
    )


def scripted_provider(latency: float = 0.4) -> ScriptedProvider:
    """The offline provider: each agent answered by its function above.

    ``latency`` (seconds, varied a little per agent) makes the run look like a real
    one: the analyst and the risk agent visibly work at the same time.
    """
    delays = {"analyst": 1.0, "risk": 0.7, "trader": 0.8, "reviewer": 0.6}
    return ScriptedProvider(
        {"analyst": analyze, "risk": assess, "trader": trade, "reviewer": review},
        latency=lambda request: latency * delays.get(request.agent, 1.0),
        model="scripted (offline)",
        pricing=DEFAULT_MODEL,  # what the same tokens would cost on the live model
    )
