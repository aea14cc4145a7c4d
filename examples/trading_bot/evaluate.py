"""Yesterday's runs as today's regression suite: which decisions would a prompt change flip?

    python -m examples.trading_bot.evaluate          # or: make eval

The bot's runs on sixteen markets are recorded first (once: the golden set, tagged
``dataset=golden`` in ``.reactor/eval.db``). Then :data:`stricter`, the same bot with
a trader told to trade only on a strong analysis, is evaluated on them: every request
that did not change is answered from the recordings (no model call), the trader's new
ones by the offline model. The report shows each run, and the decisions that flip.

The same check from the command line, as a CI job runs it (exit 1: a decision flipped)::

    reactor eval --graph examples.trading_bot.evaluate:stricter --db .reactor/eval.db
        --tag dataset=golden --provider scripted --scorer "decision_kept(proposal.action)"
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path
from typing import Any

from examples.trading_bot.app import TRADER, desk
from examples.trading_bot.scripted import SCENARIOS
from examples.trading_bot.scripted import scripted_provider as offline
from reactor import EvalReport, Recording, ScriptedProvider, SQLiteSignalStore
from reactor.eval import cost_within, decision_kept

__all__ = ["action_kept", "golden_markets", "main", "scripted_provider", "stricter"]

STRICTER = TRADER + "\n\nTrade only when the analysis is at least 90% confident; else hold."
"""The change under test: the trader's prompt, with a confidence floor."""

stricter = desk(STRICTER)
"""The bot with the stricter trader (what ``reactor eval --graph`` is given)."""

action_kept = decision_kept("proposal.action")
"""The scorer: the trader's action (buy, sell or hold) is the one it recorded."""


def scripted_provider() -> ScriptedProvider:
    """The offline model, with no delay (``--provider scripted`` finds it here)."""
    return offline(latency=0.0)


def golden_markets() -> list[dict[str, Any]]:
    """The golden set's inputs: the four scenarios, and twelve seeded random markets."""
    markets = [
        {"symbol": name.upper(), "prices": prices, "cash": 10_000.0}
        for name, prices in SCENARIOS.items()
    ]
    rng = random.Random(7)
    for symbol in ("AAPL", "MSFT", "NVDA", "AMZN", "GOOG", "META"):
        for _ in range(2):
            drift, volatility = rng.uniform(-0.012, 0.012), rng.uniform(0.003, 0.02)
            prices = [round(rng.uniform(50, 400), 2)]
            for _ in range(7):
                prices.append(round(prices[-1] * (1 + drift + rng.gauss(0, volatility)), 2))
            markets.append({"symbol": symbol, "prices": prices, "cash": 10_000.0})
    return markets


def record_golden(store: SQLiteSignalStore) -> list[str]:
    """The golden runs' ids: recorded now, unless the store has them already."""
    found = store.runs(graph="trading-bot", tag="dataset=golden")
    if found:
        return [info.run_id for info in found]
    bot = desk()
    ids = []
    for market in golden_markets():
        result = bot.run_sync(
            input=market,
            provider=scripted_provider(),
            record=store,
            tags={"dataset": "golden"},
            target="examples.trading_bot.app:graph",
        )
        ids.append(result.run_id)
    return ids


def _action(state: Any) -> str:
    proposal = state.get("proposal") if state else None
    return str(proposal["action"]) if proposal else "no trade"


def flips(report: EvalReport, store: SQLiteSignalStore) -> list[str]:
    """A line per decision that flipped: the market, the old action and the new."""
    lines = []
    for case in report.cases:
        if case.new_run_id is None or case.passed:
            continue
        old: Recording = store.load(case.run_id)
        new = store.state(case.new_run_id)
        symbol = (old.state.get("market") or {}).get("symbol", "?")
        why = (new.get("proposal") or {}).get("rationale", case.describe())
        lines.append(f"  {symbol:6} {_action(old.state):>8} -> {_action(new):8} {why}")
    return lines


def main(argv: list[str] | None = None) -> int:
    """Record the golden set (once), evaluate the stricter trader on it, show what flips."""
    parser = argparse.ArgumentParser(prog="python -m examples.trading_bot.evaluate")
    parser.add_argument("--db", default=".reactor/eval.db", help="where the golden set is")
    parser.add_argument("--junit", help="also write the report as JUnit XML here")
    args = parser.parse_args(argv)
    Path(args.db).parent.mkdir(parents=True, exist_ok=True)
    with SQLiteSignalStore(args.db) as store:
        ids = record_golden(store)
        report = stricter.evaluate_sync(
            ids,
            store=store,
            provider=scripted_provider(),
            scorers=[action_kept, cost_within(1.5)],
        )
        _show(report)
        changed = flips(report, store)
    if args.junit:
        report.to_junit_xml(args.junit)
    summary = report.summary()
    print(
        f"\n{summary['cases']} recorded runs: {summary['same']} same, {summary['changed']} "
        f"changed; {summary['model_calls']} model calls (the rest answered from the log)."
    )
    if changed:
        print(f"{len(changed)} decisions flip with the stricter trader:")
        print("\n".join(changed))
        print("In CI, `reactor eval` exits 1 here: the change is held back for review.")
    return 0


def _show(report: EvalReport) -> None:
    try:
        from rich.console import Console
    except ImportError:  # without the cli extra: plain text
        print(report)
        return
    Console().print(report)


if __name__ == "__main__":
    raise SystemExit(main())
