"""The bot's data: market input, each agent's structured output, and the state."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from stores import Store, action


class MarketData(BaseModel):
    """What the bot is given: a symbol, recent closing prices, and the cash it may use."""

    symbol: str
    prices: list[float] = Field(min_length=5)
    cash: float = Field(default=10_000.0, gt=0)

    @property
    def last(self) -> float:
        """The latest price."""
        return self.prices[-1]


class Analysis(BaseModel):
    """The analyst's read of the trend."""

    trend: Literal["up", "down", "sideways"]
    confidence: float = Field(ge=0, le=1)
    rationale: str


class RiskAssessment(BaseModel):
    """How risky a position is now, and how large one may be."""

    level: Literal["low", "medium", "high"]
    volatility: float = Field(ge=0, description="standard deviation of daily returns")
    max_position: int = Field(ge=0, description="most shares to hold")
    rationale: str


class TradeProposal(BaseModel):
    """What the trader wants to do."""

    action: Literal["buy", "sell", "hold"]
    quantity: int = Field(ge=0)
    limit_price: float = Field(gt=0)
    rationale: str


class Review(BaseModel):
    """The reviewer's verdict on a proposal."""

    approved: bool
    notes: str


class Execution(BaseModel):
    """A filled order."""

    order_id: str
    action: Literal["buy", "sell"]
    quantity: int
    price: float
    notional: float


class TradeState(BaseModel):
    """Everything the agents know and decide during one run."""

    market: MarketData | None = None
    analysis: Analysis | None = None
    risk: RiskAssessment | None = None
    proposal: TradeProposal | None = None
    review: Review | None = None
    execution: Execution | None = None
    ledger: list[Execution] = []


class TradeStore(Store[TradeState]):
    """The bot's state, written through actions (each write is one transaction)."""

    @action
    def record_market(self, draft: TradeState, market: MarketData) -> None:
        """Take in the market data the run started with."""
        draft.market = market

    @action
    def record_execution(self, draft: TradeState, execution: Execution) -> None:
        """Book a fill: the latest execution, and one more line in the ledger."""
        draft.execution = execution
        draft.ledger.append(execution)
