"""Ship a run's signal stream to your logs: JSON lines through structlog.

Every signal becomes one JSON object on stdout (ready for a log pipeline: Vector,
Fluent Bit, Loki, Datadog...), with the run's context on every line; a metrics summary
goes to stderr. Run it with::

    python -m examples.structured_logging                 # info: milestones and errors
    python -m examples.structured_logging --level debug   # every signal
    python -m examples.structured_logging | jq -c '{event, agent, duration_ms}'
"""

from __future__ import annotations

import argparse
import sys

import reactor.logging
from examples.trading_bot.app import graph
from examples.trading_bot.scripted import SCENARIOS, scripted_provider
from reactor import MetricsReporter, StructlogReporter


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m examples.structured_logging")
    parser.add_argument("--level", default="info", choices=["debug", "info", "warning", "error"])
    parser.add_argument("--scenario", choices=sorted(SCENARIOS), default="bull")
    args = parser.parse_args(argv)

    # The application configures logging once; the library never does it on import.
    reactor.logging.configure(json=True, level=args.level)
    metrics = MetricsReporter()
    result = graph.run_sync(
        input={"symbol": "AAPL", "prices": SCENARIOS[args.scenario]},
        provider=scripted_provider(latency=0.05),
        reporters=[StructlogReporter(), metrics],
        tags={"service": "trading-bot", "env": "demo"},
    )
    print(metrics, file=sys.stderr)
    return 0 if result.ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
