"""The ``reactor`` command's arguments: one subcommand per task, each with an example."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import NoReturn

import reactor
from reactor._cli._audit import AUDIT_EXAMPLE, AUDIT_SUMMARY, add_audit_arguments, cmd_audit
from reactor._cli._base import DB_ENV, db_argument, positive_arg
from reactor._cli._eval import (
    EVAL_EXAMPLE,
    EVAL_SUMMARY,
    TAG_EXAMPLE,
    add_eval_arguments,
    add_tag_command,
    cmd_eval,
)
from reactor._cli._graphs import FORMATS, cmd_graph
from reactor._cli._records import cmd_diff, cmd_runs, cmd_show
from reactor._cli._running import cmd_fork, cmd_replay, cmd_resume, cmd_run
from reactor._cli._service import (
    DB_EXAMPLE,
    DB_SUMMARY,
    SERVE_EXAMPLE,
    SERVE_SUMMARY,
    add_db_arguments,
    add_serve_arguments,
    cmd_db,
    cmd_serve,
)
from reactor._cli._workers import (
    WORKER_EXAMPLE,
    WORKER_SUMMARY,
    WORKERS_EXAMPLE,
    WORKERS_SUMMARY,
    add_worker_arguments,
    cmd_worker,
    cmd_workers,
)

__all__ = ["LOG_LEVELS", "build_parser"]

LOG_LEVELS = ("debug", "info", "warning", "error", "critical")


class _Parser(argparse.ArgumentParser):
    """Bad arguments give one line (and the way to help), not a usage dump."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


STATUSES = (
    "running",
    "waiting",
    "completed",
    "ended",
    "timeout",
    "aborted",
    "failed",
    "loop_limit",
)
"""What ``reactor runs --status`` filters on."""


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be a number of seconds above 0, got {text!r}")
    return value


def _add_run_commands(command: Callable[[str, str, str], argparse.ArgumentParser]) -> None:
    """The commands that run graphs and read their recordings, from ``run`` to ``diff``."""
    run = command(
        "run",
        "Run a graph, record it, and print what it did.",
        'reactor run examples.trading_bot.app:graph --input \'{"symbol": "AAPL"}\'',
    )
    _run_arguments(run)
    run.set_defaults(handler=cmd_run)

    runs = command(
        "runs",
        "List recorded runs, newest first; `reactor runs tag` tags them (a dataset is a tag).",
        f"reactor runs --graph trading-bot --limit 5\n  {TAG_EXAMPLE}",
    )
    _runs_arguments(runs)
    runs.set_defaults(handler=cmd_runs)
    add_tag_command(runs)

    show = command(
        "show",
        "Show a recorded run: agents, timeline and causal tree.",
        "reactor show last   (or a run id, or a unique prefix of one)",
    )
    _show_arguments(show)
    show.set_defaults(handler=cmd_show)

    replay = command(
        "replay",
        "Re-run a recorded run offline with the recorded answers, and compare.",
        "reactor replay last",
    )
    _replay_arguments(replay)
    replay.set_defaults(handler=cmd_replay)

    resume = command(
        "resume",
        "Continue a recorded run that stopped before its end (its process died, say).",
        "reactor resume last   (runs that did not end: reactor runs --status running)",
    )
    _resume_arguments(resume)
    resume.set_defaults(handler=cmd_resume)

    fork = command(
        "fork",
        "Start a new run from a recorded run's log up to a signal, and go on live.",
        "reactor fork last --at 42 --set limit=5 --set 'note=\"try again\"'",
    )
    _fork_arguments(fork)
    fork.set_defaults(handler=cmd_fork)

    diff = command(
        "diff", "Show where two recorded runs first differ.", "reactor diff run_a1 run_b2"
    )
    _diff_arguments(diff)
    diff.set_defaults(handler=cmd_diff)


def _run_arguments(run: argparse.ArgumentParser) -> None:
    run.add_argument(
        "target", metavar="MODULE:GRAPH", help="where the graph is (a module or file.py)"
    )
    run.add_argument("--input", help="the run's input: JSON, or @file.json")
    run.add_argument(
        "--provider",
        help="scripted (the module's `scripted_provider`), anthropic, or MODULE:ATTR; "
        "default: scripted when the module has one, else anthropic",
    )
    _db(run, "the database to record to", "--record")
    run.add_argument("--no-record", action="store_true", help="do not record the run")
    run.add_argument(
        "--tag", metavar="KEY[=VALUE]", action="append", default=[], help="tag the run (repeatable)"
    )
    run.add_argument("--timeout", type=_positive_float, help="seconds before the run is stopped")
    run.add_argument("--state", action="store_true", help="print the whole final state")
    _interactive(run)
    _run_output(run)


def _runs_arguments(runs: argparse.ArgumentParser) -> None:
    _db(runs, "the run database")
    runs.add_argument("--graph", help="only runs of this graph")
    runs.add_argument("--tag", metavar="KEY[=VALUE]", help="only runs with this tag")
    runs.add_argument(
        "--status",
        choices=STATUSES,
        help="only runs with this status (running: not ended, as after a crash)",
    )
    runs.add_argument(
        "--limit", type=positive_arg, default=20, help="how many, at least 1 (default 20)"
    )
    runs.add_argument("--json", action="store_true", help="print JSON lines")
    _plain(runs)


def _show_arguments(show: argparse.ArgumentParser) -> None:
    show.add_argument("run", metavar="RUN", help="a run id, a unique prefix of one, or last")
    _db(show, "the run database")
    show.add_argument("--payloads", action="store_true", help="show payloads in the tree")
    show.add_argument("--deltas", action="store_true", help="list every text/thinking delta")
    show.add_argument("--json", action="store_true", help="print the recording as JSON lines")
    _plain(show)


def _replay_arguments(replay: argparse.ArgumentParser) -> None:
    replay.add_argument("run", metavar="RUN", help="a run id, a unique prefix of one, or last")
    _db(replay, "the run database (the replay is recorded to it too)")
    replay.add_argument(
        "--graph",
        metavar="MODULE:GRAPH",
        help="the graph to replay on (default: the one recorded, if it is a file in this "
        "directory that has not changed since)",
    )
    replay.add_argument("--fallback", help="provider for requests with no recorded answer")
    replay.add_argument("--no-record", action="store_true", help="do not record the replay")
    replay.add_argument("--state", action="store_true", help="print the whole final state")
    _run_output(replay)


def _resume_arguments(resume: argparse.ArgumentParser) -> None:
    resume.add_argument("run", metavar="RUN", help="a run id, a unique prefix of one, or last")
    _db(resume, "the run database (the run goes on recording to it)")
    resume.add_argument(
        "--graph",
        metavar="MODULE:GRAPH",
        help="the graph to resume on (default: the one recorded, as its file in this "
        "directory is now)",
    )
    resume.add_argument(
        "--provider",
        help="scripted (the module's `scripted_provider`), anthropic, or MODULE:ATTR",
    )
    resume.add_argument("--timeout", type=_positive_float, help="seconds before the run is stopped")
    resume.add_argument("--state", action="store_true", help="print the whole final state")
    resume.add_argument(
        "--check",
        action="store_true",
        help="only say whether the graph as it is now can resume the run (exit 0) or "
        "changed what its log says was done (exit 1); resume nothing",
    )
    resume.add_argument(
        "--force",
        action="store_true",
        help="resume even if the graph changed what the run's log says was done",
    )
    _interactive(resume)
    _run_output(resume)


def _fork_arguments(fork: argparse.ArgumentParser) -> None:
    fork.add_argument("run", metavar="RUN", help="a run id, a unique prefix of one, or last")
    fork.add_argument(
        "--at", type=positive_arg, required=True, metavar="SEQ", help="the signal to fork at"
    )
    fork.add_argument(
        "--set",
        action="append",
        metavar="KEY=JSON",
        help="a state key's new value, as JSON (repeat it; written by the actor user)",
    )
    _db(fork, "the run database (the source run is read from it, the fork recorded to it)")
    fork.add_argument(
        "--graph",
        metavar="MODULE:GRAPH",
        help="the graph to go on with (default: the one recorded, as its file is now)",
    )
    fork.add_argument(
        "--provider",
        help="scripted (the module's `scripted_provider`), anthropic, or MODULE:ATTR",
    )
    fork.add_argument("--timeout", type=_positive_float, help="seconds before the run is stopped")
    fork.add_argument("--state", action="store_true", help="print the whole final state")
    _interactive(fork)
    _run_output(fork)


def _diff_arguments(diff: argparse.ArgumentParser) -> None:
    diff.add_argument("run_a", metavar="RUN_A", help="a run id, a prefix of one, or last")
    diff.add_argument("run_b", metavar="RUN_B", help="the run to compare it with")
    _db(diff, "the run database")
    _plain(diff)


def build_parser() -> argparse.ArgumentParser:
    """Return the argument parser of the ``reactor`` command."""
    parser = _Parser(
        prog="reactor",
        description="Run reactive agent graphs, and inspect, replay and compare their recordings.",
        epilog="Run `reactor COMMAND --help` for a command's options and an example. Recordings "
        f"are kept in .reactor/runs.db, or where --db or ${DB_ENV} says.",
    )
    parser.add_argument("--version", action="version", version=f"reactor {reactor.__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    def command(name: str, summary: str, example: str) -> argparse.ArgumentParser:
        sub = commands.add_parser(
            name,
            help=summary,
            description=summary,
            epilog=f"Example:\n  {example}",
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        sub.set_defaults(parser=sub)
        return sub

    _add_run_commands(command)

    evaluation = command("eval", EVAL_SUMMARY, EVAL_EXAMPLE)
    add_eval_arguments(evaluation, statuses=STATUSES)
    evaluation.set_defaults(handler=cmd_eval)

    graph = command(
        "graph",
        "Print a graph: its agents, signals and edges, as Mermaid, Graphviz DOT or JSON.",
        "reactor graph examples.trading_bot.app:graph --format dot | dot -Tsvg > graph.svg",
    )
    graph.add_argument("target", metavar="MODULE:GRAPH")
    graph.add_argument(
        "--format", choices=FORMATS, default="mermaid", help="mermaid (default), dot or json"
    )
    graph.add_argument(
        "--from-run",
        metavar="RUN",
        help="also draw the state writes observed in this recorded run",
    )
    _db(graph, "the run database (for --from-run)")
    graph.set_defaults(handler=cmd_graph)

    from migration._convert import cli as migrate_cli  # migrate lives with the migration

    migrate = command("migrate", migrate_cli.SUMMARY, migrate_cli.EXAMPLE)
    migrate_cli.add_arguments(migrate)
    migrate.set_defaults(handler=migrate_cli.run)

    audit = command("audit", AUDIT_SUMMARY, AUDIT_EXAMPLE)
    add_audit_arguments(audit)
    audit.set_defaults(handler=cmd_audit)

    db = command("db", DB_SUMMARY, DB_EXAMPLE)
    add_db_arguments(db)
    db.set_defaults(handler=cmd_db)

    serve = command("serve", SERVE_SUMMARY, SERVE_EXAMPLE)
    add_serve_arguments(serve)
    serve.set_defaults(handler=cmd_serve)

    worker = command("worker", WORKER_SUMMARY, WORKER_EXAMPLE)
    add_worker_arguments(worker)
    worker.set_defaults(handler=cmd_worker)
    command("workers", WORKERS_SUMMARY, WORKERS_EXAMPLE).set_defaults(handler=cmd_workers)
    return parser


def _db(parser: argparse.ArgumentParser, what: str, *aliases: str) -> None:
    parser.add_argument(
        "--db",
        *aliases,
        dest="db",
        metavar="PATH",
        type=db_argument,
        help=f"{what}: a file path, sqlite:///path or postgresql://... "
        f"(default: ${DB_ENV}, else .reactor/runs.db)",
    )


def _plain(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--plain", action="store_true", help="plain text, no tables or colours (as when piped)"
    )


def _interactive(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--interactive",
        "-i",
        action="store_true",
        help="show the run live and answer its questions from the keyboard (Ctrl-C aborts)",
    )


def _run_output(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--json-logs", action="store_true", help="log every signal as JSON lines on stdout"
    )
    parser.add_argument(
        "--log-level",
        default="info",
        choices=LOG_LEVELS,
        help="lowest level logged: debug (every signal), info, warning, error or critical",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress line")
    _plain(parser)
