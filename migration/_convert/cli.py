"""``reactor migrate``: print a flow as reactor Python, or check it against the old executor.

The ``reactor`` command delegates the subcommand here: :func:`add_arguments` declares
its options, :func:`run` runs it. It prints only its results on stdout (the Python,
or the check's report), so they can be piped; diagnostics go to stderr, and are
quiet unless asked for with ``-v`` (warnings) or ``-vv`` (everything).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import reactor.logging
from reactor import ReactorError

if TYPE_CHECKING:
    from migration._nodes.registry import RegistrySource

__all__ = ["EXAMPLE", "SUMMARY", "add_arguments", "run"]

SUMMARY = "Print an edge-based flow (FlowSpec YAML) as reactor Python, or check it."
EXAMPLE = "reactor migrate flows/triage.yaml --check --registry my_nodes:registry"

_LEVELS = ("critical", "info", "debug")


class _UsageError(Exception):
    """A bad option value: one line on stderr, exit status 2."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the options of ``reactor migrate`` on its subparser."""
    parser.add_argument("file", metavar="FILE", help="a FlowSpec YAML file")
    parser.add_argument(
        "--check",
        action="store_true",
        help="run the edge-based executor and the converted graph, and compare their outputs",
    )
    parser.add_argument("--input", help="the flow's input for --check: JSON, or @file.json")
    parser.add_argument(
        "--registry",
        metavar="MODULE:ATTR",
        help="your node types: a NodeRegistry, or a function returning one (called once per "
        "executor); installed packs (entry points reactor.node_types) are used otherwise",
    )
    parser.add_argument(
        "--timeout", type=float, metavar="SECONDS", help="stop --check after this many seconds"
    )
    parser.add_argument("-o", "--output", metavar="PATH", help="write the Python to PATH")
    parser.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=0,
        help="show diagnostics on stderr: -v warnings and notes, -vv everything",
    )


def run(args: argparse.Namespace) -> int:
    """Run ``reactor migrate``; return the exit status (0 passed/written, 1 not, 2 usage).

    ``--check`` passes when both executors run the flow to its end and agree; it fails
    when they disagree, when either stops on a failure, or when no node ran.
    """
    from migration._convert.codegen import to_python  # not when only declared, or --help

    reactor.logging.configure(level=_LEVELS[min(args.verbose, 2)], stream=sys.stderr)
    try:
        registry = _registry(args.registry) if args.registry else None
        if args.check:
            return _check(args, registry)
        code = to_python(args.file, registry=registry, saved_as=args.output)
    except _UsageError as exc:
        print(f"reactor migrate: error: {exc}", file=sys.stderr)
        return 2
    except (ReactorError, OSError, ValueError, TypeError) as exc:
        print(f"reactor migrate: error: {exc}", file=sys.stderr)
        return 1
    if args.output:
        Path(args.output).parent.mkdir(parents=True, exist_ok=True)
        Path(args.output).write_text(code, encoding="utf-8")
        print(f"wrote {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(code)
    return 0


def _check(args: argparse.Namespace, registry: RegistrySource | None) -> int:
    from migration._convert.check import check_sync

    if args.timeout is not None and args.timeout <= 0:
        raise _UsageError(f"--timeout takes a number of seconds > 0, got {args.timeout:g}")
    options: dict[str, Any] = {"registry": registry, "timeout": args.timeout}
    if args.input is not None:
        options["input"] = _json(args.input, "--input")
    result = check_sync(args.file, **options)
    print(result.report())
    return 0 if result.passed else 1


def _registry(ref: str) -> RegistrySource:
    """The registry (or registry factory) ``MODULE:ATTR`` names."""
    from migration._nodes.registry import NodeRegistry

    module_name, _, attr = ref.partition(":")
    if not module_name or not attr:
        raise _UsageError(f"--registry takes MODULE:ATTR, got {ref!r}")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise _UsageError(f"--registry: cannot import {module_name!r}: {exc}") from exc
    found = getattr(module, attr, None)
    if isinstance(found, NodeRegistry):
        return found
    if callable(found):
        return found  # type: ignore[no-any-return]
    raise _UsageError(
        f"--registry: {module_name}.{attr} is {'missing' if found is None else repr(found)}; "
        "name a NodeRegistry, or a function returning one"
    )


def _json(value: str, option: str) -> Any:
    text = Path(value[1:]).read_text(encoding="utf-8") if value.startswith("@") else value
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise _UsageError(f"{option} is not valid JSON ({exc.msg} at column {exc.colno})") from exc
