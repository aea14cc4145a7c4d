"""Recorded runs and evaluations of them, for the comparison tests.

A desk: an analyst (a model) reads the trend of a symbol, a trader (code) decides on
it. Each symbol's run is recorded; then the desk is evaluated unchanged (every case
the same), and with a pessimist's prompt (the trends and decisions of AAPL and NVDA
flip, MSFT's stay), both answered by :func:`market` where the recording has no answer.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from reactor import (
    EvalReport,
    ProviderRequest,
    Reactive,
    ScriptedProvider,
    SignalStore,
    agent,
    reactive,
)

TRENDS = {"AAPL": "up", "MSFT": "down", "NVDA": "up"}
ANALYST = "Is {{ input.symbol }} trending up or down? One word."
PESSIMIST = "As a pessimist: is {{ input.symbol }} trending up or down? One word."


def desk(analyst: str = ANALYST) -> Reactive:
    """The desk, its analyst asked ``analyst``."""
    return reactive(
        {
            "analyst": agent(prompt=analyst, updates="trend"),
            "trader": agent(
                run=lambda ctx: "buy" if ctx.state["trend"] == "up" else "hold",
                activate_on="state:trend:changed",
                updates="decision",
            ),
        },
        state={"trend": None, "decision": None, "desk": "fx"},
        name="desk",
    )


def _trend(request: ProviderRequest) -> str:
    symbol = next(symbol for symbol in TRENDS if symbol in request.prompt)
    return "down" if "pessimist" in request.prompt else TRENDS[symbol]


def market() -> ScriptedProvider:
    """The model: the trend of the symbol its prompt names (a pessimist's, if asked so).

    Dear (USD 3,000 and 15,000 a million tokens), so that a page's costs differ in
    their fourth decimal.
    """
    return ScriptedProvider({"analyst": _trend}, pricing=(3_000.0, 15_000.0))


@dataclasses.dataclass(frozen=True)
class Evaluated:
    """What :func:`evaluated` recorded: the runs by symbol, and the two evaluations."""

    recorded: dict[str, str]
    same: EvalReport
    changed: EvalReport

    def new_run(self, report: EvalReport, symbol: str) -> str:
        """The run ``report`` made of the recorded run of ``symbol``."""
        old = self.recorded[symbol]
        new: Any = next(case.new_run_id for case in report.cases if case.run_id == old)
        assert isinstance(new, str)
        return new


def evaluated(store: SignalStore) -> Evaluated:
    """Record a run of the desk per symbol in ``store``, then evaluate them twice."""
    recorded = {}
    for symbol in TRENDS:
        result = desk().run_sync(input={"symbol": symbol}, provider=market(), record=store)
        assert result.status == "completed", result.error
        recorded[symbol] = result.run_id
    ids = list(recorded.values())
    same = desk().evaluate_sync(ids, store=store, provider=market())
    changed = desk(PESSIMIST).evaluate_sync(ids, store=store, provider=market())
    assert [case.status for case in same.cases] == ["same"] * 3
    assert {case.status for case in changed.cases} == {"changed"}
    store.flush()
    return Evaluated(recorded, same, changed)
