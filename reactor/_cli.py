"""The ``reactor`` command line: run graphs, list, show, replay and compare recordings."""

from __future__ import annotations

import argparse
import asyncio
import importlib
import importlib.util
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

import reactor
import reactor.logging
from reactor._graph import Reactive
from reactor._progress import ProgressReporter
from reactor._providers.replay import ReplayProvider
from reactor._recording.recording import Recording
from reactor._recording.sqlite import DEFAULT_PATH, SQLiteSignalStore
from reactor._render import render_runs, render_show
from reactor._result import RunResult
from reactor._signal import to_jsonable
from reactor.exceptions import ReactorError

__all__ = ["main"]


class CommandError(Exception):
    """A user-facing error: printed on one line, exit status 1."""


class _Parser(argparse.ArgumentParser):
    """Bad arguments give one line (and the way to help), not a usage dump."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


def build_parser() -> argparse.ArgumentParser:
    """Return the argument parser of the ``reactor`` command."""
    parser = _Parser(
        prog="reactor",
        description="Run reactive agent graphs, and inspect, replay and compare their recordings.",
        epilog="Run `reactor COMMAND --help` for a command's options and an example.",
    )
    parser.add_argument("--version", action="version", version=f"reactor {reactor.__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    def command(name: str, summary: str, example: str) -> argparse.ArgumentParser:
        return commands.add_parser(
            name,
            help=summary,
            description=summary,
            epilog=f"Example:\n  {example}",
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )

    run = command(
        "run",
        "Run a graph, record it, and print what it did.",
        'reactor run examples.trading_bot.app:graph --input \'{"symbol": "AAPL"}\'',
    )
    run.add_argument("target", metavar="MODULE:GRAPH", help="where the graph is (or a factory)")
    run.add_argument("--input", help="the run's input: JSON, or @file.json")
    run.add_argument(
        "--provider",
        help="scripted (the module's `scripted_provider`), anthropic, or MODULE:ATTR; "
        "default: scripted when the module has one, else anthropic",
    )
    run.add_argument(
        "--record", metavar="PATH", default=str(DEFAULT_PATH), help="database to record to"
    )
    run.add_argument("--no-record", action="store_true", help="do not record the run")
    run.add_argument("--tag", action="append", default=[], help="tag the recording (repeatable)")
    run.add_argument("--timeout", type=float, help="seconds before the run is stopped")
    _logging_options(run)
    run.set_defaults(handler=cmd_run)

    runs = command(
        "runs", "List recorded runs, newest first.", "reactor runs --graph trading-bot --limit 5"
    )
    runs.add_argument("path", nargs="?", default=str(DEFAULT_PATH), metavar="PATH")
    runs.add_argument("--graph", help="only runs of this graph")
    runs.add_argument("--tag", help="only runs with this tag (KEY or KEY=VALUE)")
    runs.add_argument("--limit", type=int, default=20, help="how many (default 20)")
    runs.add_argument("--json", action="store_true", help="print JSON lines")
    runs.set_defaults(handler=cmd_runs)

    show = command(
        "show",
        "Show a recorded run: agents, timeline and causal tree.",
        "reactor show last   (or a run id, or a unique prefix of one)",
    )
    show.add_argument("refs", nargs="+", metavar="[PATH] RUN_ID")
    show.add_argument("--payloads", action="store_true", help="show payloads in the tree")
    show.add_argument("--deltas", action="store_true", help="list every text/thinking delta")
    show.add_argument("--json", action="store_true", help="print the recording as JSON lines")
    show.set_defaults(handler=cmd_show)

    replay = command(
        "replay",
        "Re-run a recorded run offline with the recorded answers, and compare.",
        "reactor replay last",
    )
    replay.add_argument("refs", nargs="+", metavar="[PATH] RUN_ID")
    replay.add_argument("--graph", metavar="MODULE:GRAPH", help="the graph, if not recorded")
    replay.add_argument("--fallback", help="provider for requests with no recorded answer")
    replay.add_argument("--no-record", action="store_true", help="do not record the replay")
    _logging_options(replay)
    replay.set_defaults(handler=cmd_replay)

    diff = command(
        "diff", "Show where two recorded runs first differ.", "reactor diff run_a1 run_b2"
    )
    diff.add_argument("refs", nargs="+", metavar="[PATH] RUN_A RUN_B")
    diff.set_defaults(handler=cmd_diff)

    graph = command(
        "graph",
        "Print a graph as a Mermaid flowchart.",
        "reactor graph examples.trading_bot.app:graph",
    )
    graph.add_argument("target", metavar="MODULE:GRAPH")
    graph.set_defaults(handler=cmd_graph)

    from migration import _cli as migrate_cli  # the migrate command lives with the migration

    migrate = command("migrate", migrate_cli.SUMMARY, migrate_cli.EXAMPLE)
    migrate_cli.add_arguments(migrate)
    migrate.set_defaults(handler=migrate_cli.run)
    return parser


def _logging_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--json-logs", action="store_true", help="log every signal as JSON lines on stdout"
    )
    parser.add_argument(
        "--log-level", default="info", help="lowest level logged (debug shows every signal)"
    )
    parser.add_argument("--quiet", action="store_true", help="no progress line")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``reactor`` console script; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    handler: Callable[[argparse.Namespace], int] | None = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return 0
    try:
        return handler(args)
    except (CommandError, ReactorError, OSError) as exc:
        print(f"reactor {args.command}: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"reactor {args.command}: interrupted", file=sys.stderr)
        return 130


# -- commands ------------------------------------------------------------------------


def cmd_run(args: argparse.Namespace) -> int:
    module, graph = load_graph(args.target)
    options: dict[str, Any] = {"provider": _provider(args.provider, module), "target": args.target}
    if args.input is not None:
        options["input"] = _json_argument(args.input, "--input")
    if args.timeout is not None:
        options["timeout"] = args.timeout
    store = None if args.no_record else _store(args.record)
    if store is not None:
        options["record"] = store
        options["tags"] = args.tag
    result = _run(graph, args, options)
    if store is not None:
        store.close()
    _summary(result, store, to_stderr=args.json_logs)
    return 0 if result.ok else 1


def cmd_runs(args: argparse.Namespace) -> int:
    with _store(args.path, must_exist=True) as store:
        infos = store.runs(graph=args.graph, tag=args.tag, limit=args.limit)
    if args.json:
        for info in infos:
            print(json.dumps(info.to_dict()))
    else:
        print(render_runs(infos) if infos else "No recorded runs.")
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    path, (ref,) = _split_refs(args.refs, 1, "show")
    with _store(path, must_exist=True) as store:
        recording = store.load(store.resolve(ref))
    if args.json:
        sys.stdout.write(recording.to_jsonl())
    else:
        print(render_show(recording, payloads=args.payloads, deltas=args.deltas))
    return 0


def cmd_replay(args: argparse.Namespace) -> int:
    path, (ref,) = _split_refs(args.refs, 1, "replay")
    store = _store(path, must_exist=True)
    try:
        original = store.load(store.resolve(ref))
        target = args.graph or original.info.target
        if not target:
            raise CommandError(
                f"the recording of {original.run_id} does not say which graph ran it (it was "
                "recorded through the API); pass --graph MODULE:GRAPH"
            )
        module, graph = load_graph(target)
        fallback = _provider(args.fallback, module) if args.fallback else None
        options: dict[str, Any] = {
            "replay": ReplayProvider(original, fallback=fallback),
            "input": original.input,
            "target": target,
        }
        if not args.no_record:
            options["record"] = store
            options["tags"] = {"replay_of": original.run_id}
        result = _run(graph, args, options)
        _summary(result, None if args.no_record else store, to_stderr=args.json_logs)
        if args.no_record:
            replayed = Recording.from_signals(result.signals)
        else:
            replayed = store.load(result.run_id)
    finally:
        store.close()
    divergence = original.diff(replayed)
    if divergence is None:
        print(f"Replay matches {original.run_id}: same signals, payloads and final state.")
        return 0 if result.ok else 1
    print(f"Replay differs from {original.run_id}.\n{divergence}")
    return 1


def cmd_diff(args: argparse.Namespace) -> int:
    path, (left_ref, right_ref) = _split_refs(args.refs, 2, "diff")
    with _store(path, must_exist=True) as store:
        left = store.load(store.resolve(left_ref))
        right = store.load(store.resolve(right_ref))
    divergence = left.diff(right)
    if divergence is None:
        print(f"{left.run_id} and {right.run_id} match ({len(left.signals)} signals).")
        return 0
    print(f"{left.run_id} (left) and {right.run_id} (right) differ.\n{divergence}")
    return 1


def cmd_graph(args: argparse.Namespace) -> int:
    _, graph = load_graph(args.target)
    print(graph.to_mermaid())
    return 0


# -- helpers -------------------------------------------------------------------------


def _run(graph: Reactive, args: argparse.Namespace, options: dict[str, Any]) -> RunResult:
    reporters: list[Any] = []
    if args.json_logs:
        reactor.logging.configure(json=True, level=args.log_level)
        reporters.append(reactor.logging.StructlogReporter())
    else:
        reactor.logging.configure(level="warning" if args.log_level == "info" else args.log_level)
        if args.log_level != "info":
            reporters.append(reactor.logging.StructlogReporter())
    if not args.quiet:
        reporters.append(ProgressReporter())
    options["reporters"] = reporters
    return asyncio.run(graph.run(**options))


def _summary(result: RunResult, store: SQLiteSignalStore | None, *, to_stderr: bool) -> None:
    out = sys.stderr if to_stderr else sys.stdout
    metrics = result.metrics
    output = json.dumps(to_jsonable(result.output), indent=2, default=str)
    if len(output) > 2000:
        output = output[:2000] + "\n... (truncated; see `reactor show`)"
    lines = [
        f"run {result.run_id} ({result.graph or 'graph'}): {result.status} - {result.reason}",
        f"output: {output}",
        f"{metrics.activations} activations · {metrics.input_tokens:,} tokens in / "
        f"{metrics.output_tokens:,} out · ${metrics.cost_usd:.4f} · "
        f"{metrics.duration_ms / 1000:.2f}s",
    ]
    if result.error is not None and str(result.error) not in result.reason:
        lines.append(f"error: {type(result.error).__name__}: {result.error}")
    if store is not None:
        where = "" if store.path == DEFAULT_PATH else f" {store.path}"
        lines.append(
            f"inspect: reactor show{where} {result.run_id}   "
            f"replay: reactor replay{where} {result.run_id}"
        )
    print("\n".join(lines), file=out)


def load_graph(ref: str) -> tuple[Any, Reactive]:
    """Import ``MODULE:ATTR`` (or ``path/to/file.py:ATTR``) and return the graph.

    A function attribute is called to build the graph.
    """
    module_name, _, attr = ref.partition(":")
    if not module_name or not attr:
        raise CommandError(
            f"expected MODULE:GRAPH, e.g. examples.trading_bot.app:graph, got {ref!r}"
        )
    module = _import(module_name)
    obj: Any = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise CommandError(f"{module_name} has no attribute {attr!r}")
        obj = getattr(obj, part)
    if not isinstance(obj, Reactive) and callable(obj):
        obj = obj()
    if not isinstance(obj, Reactive):
        raise CommandError(f"{ref} is {type(obj).__name__}, not a graph built with reactive()")
    return module, obj


def _import(name: str) -> Any:
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        if name.endswith(".py") or os.sep in name:
            path = Path(name)
            spec = importlib.util.spec_from_file_location(path.stem, path)
            if spec is None or spec.loader is None:
                raise CommandError(f"cannot load {name}")
            module = importlib.util.module_from_spec(spec)
            sys.modules[path.stem] = module
            spec.loader.exec_module(module)
            return module
        return importlib.import_module(name)
    except (ImportError, FileNotFoundError) as exc:
        raise CommandError(f"cannot import {name!r}: {exc}") from exc


def _provider(choice: str | None, module: Any) -> Any:
    scripted = getattr(module, "scripted_provider", None)
    if choice is None:
        choice = "scripted" if scripted is not None else "anthropic"
    if choice == "scripted":
        if scripted is None:
            raise CommandError(
                f"{module.__name__} defines no `scripted_provider`; add one, or use "
                "--provider anthropic / --provider MODULE:ATTR"
            )
        return scripted() if callable(scripted) and not hasattr(scripted, "stream") else scripted
    if choice == "anthropic":
        provider_class = getattr(reactor, "AnthropicProvider", None)
        if provider_class is None:
            raise CommandError("the Anthropic provider is not available in this installation")
        return provider_class()
    if ":" not in choice:
        raise CommandError(f"unknown provider {choice!r}: use scripted, anthropic or MODULE:ATTR")
    provider = _attribute(choice, "--provider")
    return provider() if callable(provider) and not hasattr(provider, "stream") else provider


def _attribute(ref: str, option: str) -> Any:
    """The object ``MODULE:ATTR`` names."""
    module_name, _, attr = ref.partition(":")
    if not module_name or not attr:
        raise CommandError(f"{option} takes MODULE:ATTR, got {ref!r}")
    found = getattr(_import(module_name), attr, None)
    if found is None:
        raise CommandError(f"{module_name} has no attribute {attr!r}")
    return found


def _json_argument(value: str, option: str) -> Any:
    text = value
    if value.startswith("@"):
        text = Path(value[1:]).read_text()
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise CommandError(f"{option} is not valid JSON ({exc.msg} at column {exc.colno})") from exc


def _store(path: str, *, must_exist: bool = False) -> SQLiteSignalStore:
    if must_exist and not Path(path).exists():
        raise CommandError(f"no run database at {path} (record runs with `reactor run`)")
    return SQLiteSignalStore(path)


def _split_refs(refs: list[str], count: int, command: str) -> tuple[str, list[str]]:
    if len(refs) == count:
        return str(DEFAULT_PATH), refs
    if len(refs) == count + 1:
        return refs[0], refs[1:]
    expected = " ".join(["[PATH]", *(["RUN_ID"] if count == 1 else ["RUN_A", "RUN_B"])])
    raise CommandError(f"expected {expected}, got {len(refs)} arguments")
