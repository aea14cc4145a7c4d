"""The trading bot: five agents, no edges.

``market`` records the input. ``analyst`` and ``risk`` run concurrently on
``harness:start``. ``trader`` joins them through the state: it activates on either
state signal but its guard waits for both, and for enough confidence. ``reviewer``
checks the proposal and announces its verdict (``review:done``); ``executor`` fills
the order only if the verdict approves it. The run ends on an execution, a rejection
or a hold.

    python -m examples.trading_bot                       # offline, scripted answers
    python -m examples.trading_bot --scenario bear       # bull, bear, choppy, flat
    python -m examples.trading_bot --live                # Claude (ANTHROPIC_API_KEY)
    reactor run examples.trading_bot.app:graph --input '{"symbol": "AAPL", "prices": [...]}'
"""

from __future__ import annotations

from typing import Any

from examples.trading_bot.models import (
    Analysis,
    Execution,
    MarketData,
    Review,
    RiskAssessment,
    TradeProposal,
    TradeStore,
)
from examples.trading_bot.scripted import SCENARIOS
from examples.trading_bot.scripted import scripted_provider as _scripted
from reactor import AgentContext, Reactive, RunView, ScriptedProvider, agent, reactive

__all__ = [
    "CONFIDENCE",
    "TRADER",
    "PaperBroker",
    "broker",
    "describe",
    "desk",
    "finished",
    "graph",
    "scripted_provider",
]

CONFIDENCE = 0.6
"""The trader acts only on an analysis at least this confident."""

SYSTEM = "You are part of a disciplined trading desk. Answer only with the JSON asked for."

ANALYST = """Analyze the recent prices of {{ input.symbol }} and say whether the trend is
up, down or sideways, how confident you are (0 to 1), and why.

```json
{{ input | tojson }}
```"""

RISK = """Assess the risk of holding {{ input.symbol }} now: the volatility of daily
returns, a risk level (low, medium, high), and the largest position (in shares) the
cash allows at that risk.

```json
{{ input | tojson }}
```"""

TRADER = """Propose one trade in {{ state.market.symbol }} (buy, sell or hold), with a
quantity within the risk limit and a limit price near the last price.

```json
{"analysis": {{ state.analysis | tojson }}, "risk": {{ state.risk | tojson }},
 "price": {{ state.market.prices[-1] }}, "cash": {{ state.market.cash }}}
```"""

REVIEWER = """Review this proposal against the risk limits and the cash available;
approve it or reject it, with a short note.

```json
{"proposal": {{ state.proposal | tojson }}, "risk": {{ state.risk | tojson }},
 "cash": {{ state.market.cash }}}
```"""


async def record_market(ctx: AgentContext) -> MarketData:
    """Take the run's input into the state (validated as MarketData).

    ``async``, though it awaits nothing: it does not block, so it runs on the event
    loop at once, before the analysts start (a plain ``def`` would run in a worker
    thread, for code that blocks).
    """
    market = MarketData.model_validate(ctx.input)
    ctx.store.record_market(market)
    return market


class PaperBroker:
    """A paper broker that dedupes orders by ``client_order_id``, as real brokers do.

    An order is placed once per ``client_order_id``; the same id again returns the
    order already placed.

    A resumed run runs again an activation its process was in when it died; with the
    activation's idempotency key as ``client_order_id``, the broker sees the order
    twice and places it once.
    """

    def __init__(self) -> None:
        self.orders: dict[str, Execution] = {}

    def place(self, proposal: TradeProposal, *, client_order_id: str) -> Execution:
        """Fill the proposal at its limit price, unless this order was placed already."""
        if proposal.action == "hold":
            raise ValueError("A hold is not an order: the broker is sent buys and sells only.")
        placed = self.orders.get(client_order_id)
        if placed is None:
            placed = self.orders[client_order_id] = Execution(
                order_id=f"ord_{client_order_id[:10]}",
                action=proposal.action,
                quantity=proposal.quantity,
                price=proposal.limit_price,
                notional=round(proposal.quantity * proposal.limit_price, 2),
            )
        return placed


broker = PaperBroker()
"""Where ``executor`` sends its orders."""


async def execute(ctx: AgentContext) -> Execution:
    """Send the approved proposal to the broker, keyed by this activation."""
    execution = broker.place(ctx.state.proposal, client_order_id=ctx.idempotency_key("order"))
    ctx.store.record_execution(execution)
    return execution


def finished(run: RunView) -> bool:
    """An order was filled, the proposal rejected, or the trader chose to hold."""
    state = run.state
    return bool(
        state.execution is not None
        or (state.review is not None and not state.review.approved)
        or (state.proposal is not None and state.proposal.action == "hold")
    )


def desk(trader: str = TRADER) -> Reactive:
    """The bot's graph; ``trader`` is the trader's prompt (``make eval`` tries another)."""
    return reactive(
        {
            "market": agent(run=record_market, output=MarketData),
            "analyst": agent(system=SYSTEM, prompt=ANALYST, output=Analysis, updates="analysis"),
            "risk": agent(system=SYSTEM, prompt=RISK, output=RiskAssessment, updates="risk"),
            "trader": agent(
                system=SYSTEM,
                prompt=trader,
                output=TradeProposal,
                activate_on=["state:analysis:changed", "state:risk:changed"],
                when=f"state.analysis is not none and state.risk is not none "
                f"and state.market is not none and state.analysis.confidence >= {CONFIDENCE}",
                updates="proposal",
                emits=["trade:proposed"],
            ),
            "reviewer": agent(
                system=SYSTEM,
                prompt=REVIEWER,
                output=Review,
                activate_on="trade:proposed",
                when="state.proposal.action != 'hold'",
                updates="review",
                emits=["review:done"],
            ),
            "executor": agent(
                run=execute,
                output=Execution,
                activate_on="review:done",
                when="signal.payload.approved",
            ),
        },
        state=TradeStore,
        end_when=finished,
        name="trading-bot",
        input={"symbol": "AAPL", "prices": SCENARIOS["bull"], "cash": 10_000.0},
    )


graph = desk()
"""The trading bot."""


def scripted_provider() -> ScriptedProvider:
    """The offline provider used by ``reactor run`` and ``make demo``."""
    return _scripted()


def describe(state: dict[str, Any]) -> list[str]:
    """The decision in a few lines, from the final state."""
    market, analysis, risk = state.get("market"), state.get("analysis"), state.get("risk")
    proposal, review, execution = state.get("proposal"), state.get("review"), state.get("execution")
    symbol = market["symbol"] if market else "?"
    lines = []
    if execution:
        lines.append(
            f"Decision: {execution['action'].upper()} {execution['quantity']} {symbol} @ "
            f"{execution['price']:.2f}, approved and filled ({execution['order_id']}, "
            f"{execution['notional']:,.2f})"
        )
    elif review and not review["approved"]:
        lines.append(f"Decision: no trade, the reviewer rejected it: {review['notes']}")
    elif proposal and proposal["action"] == "hold":
        lines.append(f"Decision: HOLD {symbol}: {proposal['rationale']}")
    elif analysis and analysis["confidence"] < CONFIDENCE:
        lines.append(
            f"Decision: no trade, analysis confidence {analysis['confidence']:.2f} is below "
            f"{CONFIDENCE}"
        )
    else:
        lines.append("Decision: none (the run stopped early)")
    if analysis:
        lines.append(
            f"  analyst:  {analysis['trend']}, confidence {analysis['confidence']:.2f}: "
            f"{analysis['rationale']}"
        )
    if risk:
        lines.append(
            f"  risk:     {risk['level']} (volatility {risk['volatility']:.2%}), at most "
            f"{risk['max_position']} shares"
        )
    if proposal:
        lines.append(
            f"  trader:   {proposal['action']} {proposal['quantity']} @ "
            f"{proposal['limit_price']:.2f}: {proposal['rationale']}"
        )
    if review:
        verdict = "approved" if review["approved"] else "rejected"
        lines.append(f"  reviewer: {verdict}: {review['notes']}")
    return lines
