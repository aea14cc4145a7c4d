"""``reactor migrate``: an edge-based flow (FlowSpec YAML) as reactor Python, or checked."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import reactor.logging
from reactor._cli._base import json_argument
from reactor._cli._load import attribute

__all__ = ["cmd_migrate"]


def cmd_migrate(args: argparse.Namespace) -> int:
    """Print the flow as Python, or with ``--check`` compare both executors."""
    import migration

    # Loading a flow logs what it ignores (old keys such as nodePacks): keep stdout for
    # the Python or the report.
    reactor.logging.configure(level="warning")
    registry = attribute(args.registry, "--registry") if args.registry else None
    if registry is not None and not isinstance(registry, migration.NodeRegistry):
        registry = registry()
    if args.check:
        options: dict[str, Any] = {"registry": registry}
        if args.input is not None:
            options["input"] = json_argument(args.input, "--input")
        result = migration.check_sync(args.file, **options)
        print(result.report())
        return 0 if result.agrees else 1
    code = migration.to_python(args.file, registry=registry)
    if args.output:
        Path(args.output).write_text(code)
        print(f"wrote {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(code)
    return 0
