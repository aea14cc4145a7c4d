"""Run the trading bot: ``python -m examples.trading_bot [--scenario bear] [--live]``."""

from __future__ import annotations

import argparse
import os
import sys

from examples.trading_bot.app import describe, graph
from examples.trading_bot.scripted import SCENARIOS, scripted_provider
from reactor import ProgressReporter, Provider, RunKwargs, RunResult, SQLiteSignalStore
from reactor._backends.sqlite import DEFAULT_PATH
from reactor._providers.pricing import DEFAULT_MODEL


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m examples.trading_bot",
        description="A trading bot on reactor: analyst and risk in parallel, a joined "
        "trade decision, review and execution. Offline by default.",
    )
    parser.add_argument("--symbol", default="AAPL")
    parser.add_argument("--scenario", choices=sorted(SCENARIOS), default="bull")
    parser.add_argument("--prices", help="closing prices, comma-separated (instead of --scenario)")
    parser.add_argument("--cash", type=float, default=10_000.0)
    parser.add_argument("--live", action="store_true", help="ask Claude (needs ANTHROPIC_API_KEY)")
    parser.add_argument("--latency", type=float, default=0.4, help="offline answer delay, s")
    parser.add_argument("--db", default=str(DEFAULT_PATH), help="where to record the run")
    parser.add_argument("--no-record", action="store_true")
    parser.add_argument("--quiet", action="store_true", help="no progress line, no tree")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    try:
        prices = (
            [float(p) for p in args.prices.split(",")] if args.prices else SCENARIOS[args.scenario]
        )
    except ValueError:
        print("--prices must be numbers separated by commas, e.g. 10,10.5,11", file=sys.stderr)
        return 2
    market = {"symbol": args.symbol, "prices": prices, "cash": args.cash}
    if args.live:
        if not os.environ.get("ANTHROPIC_API_KEY"):
            print(
                "--live asks Claude: set ANTHROPIC_API_KEY, or run offline without --live.",
                file=sys.stderr,
            )
            return 2
        from reactor import AnthropicProvider

        provider: Provider = AnthropicProvider()
        mode = "live (Claude)"
    else:
        provider = scripted_provider(args.latency)
        mode = "offline (scripted answers)"
    source = "custom prices" if args.prices else f"scenario {args.scenario}"
    print(f"reactor trading bot · {args.symbol} · {source} · {mode}\n")
    store = None if args.no_record else SQLiteSignalStore(args.db)
    options: RunKwargs = {
        "input": market,
        "provider": provider,
        "reporters": [] if args.quiet else [ProgressReporter()],
        "target": "examples.trading_bot.app:graph",
    }
    if store is not None:
        options["record"] = store
        options["tags"] = [
            args.scenario if not args.prices else "custom",
            "live" if args.live else "offline",
        ]
    result = graph.run_sync(**options)
    if store is not None:
        store.close()
    print(summary(result, args, store is not None))
    return 0 if result.ok else 1


def summary(result: RunResult, args: argparse.Namespace, recorded: bool) -> str:
    metrics = result.metrics
    lines = ["", *describe(dict(result.state))]
    if result.error is not None:
        lines.append(f"Error: {type(result.error).__name__}: {result.error}")
    if not args.quiet:
        lines += ["", "What happened (causal tree):", result.tree()]
    cost = f"${metrics.cost_usd:.4f}" + (
        "" if args.live else f" (estimated at {DEFAULT_MODEL} prices)"
    )
    lines += [
        "",
        f"Run {result.status} in {metrics.duration_ms / 1000:.2f}s · "
        f"{metrics.activations} activations · {metrics.input_tokens:,} tokens in / "
        f"{metrics.output_tokens:,} out · {cost}",
    ]
    if recorded:
        where = "" if args.db == str(DEFAULT_PATH) else f" --db {args.db}"
        lines += [
            f"Recorded as {result.run_id} in {args.db}",
            f"  inspect: reactor show {result.run_id}{where}",
            f"  replay:  reactor replay {result.run_id}{where}",
        ]
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
