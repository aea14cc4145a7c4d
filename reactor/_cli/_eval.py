"""``reactor eval`` and ``reactor runs tag``: recorded runs as a regression suite.

``reactor eval --graph MODULE:GRAPH`` runs recorded runs again on the graph as the
code is now (``graph.evaluate``); ``reactor eval --app MODULE:SERVICE --agent NAME``
does it for a reaction agent of a service, with the object each run saw (see
``_eval_plan``). It prints a case per run and exits 0 when every case passes, 1 when
one does not, and 2 when the command cannot start (a bad option, a graph, provider or
scorer it cannot load, no run selected, a recording of another graph). The new runs
are recorded to ``--into``, by default a scratch store beside the run database, never
into the store the recordings are read from unless ``--into`` names it. A dataset is
a tag: ``reactor runs tag RUN... dataset=golden``, then ``reactor eval --tag
dataset=golden``.

No provider is the default: an evaluation spends nothing unless asked, and a case
whose model request changed ends ``diverged`` until ``--provider`` answers it.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import reactor.logging
from reactor._cli._base import (
    CommandError,
    db_argument,
    db_option,
    db_path,
    is_url,
    positive_arg,
    writable_db,
)
from reactor._cli._eval_plan import Plan, Stores, UsageError, plan, stores
from reactor._cli._output import Output
from reactor._cli._render import Table, clean, money
from reactor._graph.report import EvalReport
from reactor._recording.info import RunInfo, parse_duration

__all__ = [
    "EVAL_EXAMPLE",
    "EVAL_SUMMARY",
    "TAG_EXAMPLE",
    "add_eval_arguments",
    "add_tag_command",
    "cmd_eval",
    "cmd_runs_tag",
]

EVAL_SUMMARY = "Run recorded runs again on the graph as it is now; exit 1 if a case fails."
EVAL_EXAMPLE = (
    "reactor eval --graph examples.trading_bot.app:graph --tag dataset=golden "
    "--scorer 'decision_kept(decision)' --junit eval.xml\n"
    "  reactor eval --app examples.crm_enrichment.service:service --agent enrich"
)
TAG_EXAMPLE = "reactor runs tag run_3f2a run_9c1d dataset=golden"
DEFAULT_LIMIT = 100
"""How many runs ``reactor eval`` takes, newest first, unless ``--limit`` says."""


def _duration(text: str) -> timedelta:
    try:
        return parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc).rstrip(".")) from None


def add_eval_arguments(parser: argparse.ArgumentParser, *, statuses: Sequence[str]) -> None:
    """Give ``reactor eval`` its options (``statuses``: what ``--status`` accepts)."""
    many: dict[str, Any] = {"action": "append", "default": []}
    parser.add_argument(
        "--graph", metavar="MODULE:GRAPH", help="the graph as the code is now (a module or file.py)"
    )
    parser.add_argument(
        "--app",
        metavar="MODULE:SERVICE",
        help="a service (as reactor serve --app takes it) whose reaction agent --agent "
        "is evaluated",
    )
    parser.add_argument(
        "--agent",
        metavar="NAME",
        help="with --app: the reaction agent whose recorded reactions are evaluated, "
        "each with the object it saw",
    )
    parser.add_argument(
        "--db",
        metavar="PATH",
        type=db_argument,
        help="where the runs are recorded: a path, sqlite:///path or postgresql://... "
        "(default: $REACTOR_DB, else .reactor/runs.db; with --app, the service's store); "
        "it is only read",
    )
    parser.add_argument(
        "--into",
        metavar="URL",
        help="where the new runs are recorded, with a copy of each run evaluated "
        "(default: a scratch store beside --db, runs-eval.db beside runs.db; name --db "
        "itself to record there)",
    )
    parser.add_argument(
        "--any-graph",
        action="store_true",
        help="evaluate runs recorded by another graph too (by default a run whose agents "
        "are not all in the graph is refused)",
    )
    parser.add_argument(
        "--graph-name",
        metavar="NAME",
        help="evaluate the runs recorded under this graph name (default: the graph's name)",
    )
    parser.add_argument(
        "--tag",
        **many,
        metavar="KEY[=VALUE]",
        help="only runs with this tag (repeat it: runs with every one)",
    )
    parser.add_argument(
        "--status",
        choices=[*statuses, "finished", "any"],
        default="finished",
        help="only runs with this status (default: finished, i.e. completed or ended by "
        "end_when; any: all)",
    )
    parser.add_argument(
        "--since",
        metavar="AGE",
        type=_duration,
        help="only runs started in the last AGE: 7d, 12h, 90m, 2w",
    )
    parser.add_argument(
        "--limit",
        metavar="N",
        type=positive_arg,
        default=DEFAULT_LIMIT,
        help=f"at most this many runs, newest first (default {DEFAULT_LIMIT})",
    )
    parser.add_argument(
        "--provider",
        default="none",
        help="who answers a model request that changed: none (default: the case ends "
        "diverged, nothing is spent), anthropic, scripted (the module's "
        "`scripted_provider`) or MODULE:ATTR",
    )
    parser.add_argument(
        "--scorer",
        **many,
        metavar="SCORER",
        help="a check every case must pass (repeatable): MODULE:ATTR, a function "
        "scorer(old, new) -> bool | float, or 'decision_kept(KEY)', "
        "'state_equal(KEY, ...)', 'cost_within(RATIO)'",
    )
    parser.add_argument(
        "--live-tool",
        **many,
        metavar="NAME",
        help="a tool that may really run when its call was not recorded (repeatable)",
    )
    parser.add_argument(
        "--concurrency",
        metavar="N",
        type=positive_arg,
        default=8,
        help="cases run at once (default 8)",
    )
    parser.add_argument("--junit", metavar="FILE", help="also write the report as JUnit XML")
    parser.add_argument("--json", metavar="FILE", help="also write the report as JSON")
    parser.add_argument(
        "--plain", action="store_true", help="plain text, no tables or colours (as when piped)"
    )


def cmd_eval(args: argparse.Namespace) -> int:
    """Evaluate recorded runs on the graph; 0 every case passed, 1 one did not, 2 usage."""
    try:
        chosen = plan(args)
        opened = stores(args, chosen.source)
    except UsageError as exc:
        print(f"reactor eval: error: {exc}", file=sys.stderr)
        return 2
    reactor.logging.configure(level="error")  # a diverged case is in the table, not a warning
    out = Output(plain=args.plain)
    try:
        infos = _selected(opened.source, args, chosen)
        target = args.graph or f"{args.app} --agent {args.agent}"
        runs = _many(len(infos), "run")
        out.line(f"Evaluating {runs} of {clean(chosen.name)} on {target}; {chosen.words}.")
        report = asyncio.run(_evaluated(chosen, opened, infos, args))
    except (UsageError, ValueError) as exc:
        print(f"reactor eval: error: {str(exc).rstrip('.')}", file=sys.stderr)
        return 2
    finally:
        opened.close()
    _print_report(out, report, chosen.name, db_option(opened.where))
    if args.junit:
        report.to_junit_xml(args.junit)
        out.line(f"JUnit XML written to {args.junit}")
    if args.json:
        Path(args.json).write_text(report.to_json() + "\n", encoding="utf-8")
        out.line(f"JSON written to {args.json}")
    return 0 if report.passed else 1


async def _evaluated(
    chosen: Plan, opened: Stores, infos: list[RunInfo], args: argparse.Namespace
) -> EvalReport:
    """Evaluate the runs; an app's objects are open meanwhile (its cases read them)."""
    service = chosen.service
    if service is not None:
        await service.objects.open()
    try:
        return await chosen.graph.evaluate(
            infos,
            store=opened.source,
            into=opened.into,
            provider=chosen.provider,
            scorers=chosen.scorers,
            live_tools=tuple(args.live_tool),
            concurrency=args.concurrency,
            scope=chosen.scope,
            any_graph=args.any_graph,
        )
    finally:
        if service is not None:
            await service.objects.close()


def _selected(store: Any, args: argparse.Namespace, chosen: Plan) -> list[RunInfo]:
    """The runs to evaluate, newest first: the filters, less the runs evaluations made."""
    tags, name = chosen.tags, chosen.name
    status = None if args.status in ("any", "finished") else args.status
    finished = args.status == "finished"  # a run that ended well: completed, or end_when held
    cutoff = None if args.since is None else time.time() - args.since.total_seconds()
    evaluations = any(tag.startswith("eval") for tag in tags)  # asked for their runs
    asked = args.limit * 2
    while True:
        listed = store.runs(graph=name, tag=tags[0] if tags else None, status=status, limit=asked)
        kept: list[RunInfo] = []
        for info in listed:
            if cutoff is not None and info.started_at < cutoff:
                return _some(kept, args, chosen)  # newest first: the rest are older
            if (
                (evaluations or "eval" not in info.tags)
                and (not finished or info.status in FINISHED)
                and all(_tagged(info, tag) for tag in tags[1:])
            ):
                kept.append(info)
                if len(kept) == args.limit:
                    return kept
        if len(listed) < asked:
            return _some(kept, args, chosen)
        asked *= 4


FINISHED = frozenset({"completed", "ended"})
"""What ``--status finished`` (the default) selects: the runs that ended as designed."""


def _tagged(info: RunInfo, tag: str) -> bool:
    key, equals, value = tag.partition("=")
    return key in info.tags and (not equals or info.tags[key] == value)


def _some(kept: list[RunInfo], args: argparse.Namespace, chosen: Plan) -> list[RunInfo]:
    """``kept``, unless it is empty: then say which filters selected nothing."""
    if kept:
        return kept
    what = [f"of graph {chosen.name!r}"]
    listing = [f"--graph {chosen.name}"]
    if args.status == "finished":
        what.append("that finished (completed, or ended by end_when)")
    elif args.status != "any":
        what.append(f"with status {args.status!r}")
        listing.append(f"--status {args.status}")
    for tag in chosen.tags:
        what.append(f"tagged {tag!r}")
    if chosen.tags:
        listing.append(f"--tag {chosen.tags[0]}")
    if args.since is not None:
        what.append(f"started in the last {args.since}")
    source = chosen.source if isinstance(chosen.source, Path | str) else None
    shown = clean(str(source)) if source is not None else f"the store of {args.app}"
    where = db_option(source) if source is not None else ""
    raise UsageError(
        f"no runs {' '.join(what)} in {shown} (runs made by evaluations are "
        f"left out); list what is recorded with `reactor runs {' '.join(listing)}{where}`, "
        "and choose with --graph-name, --tag, --status (any) or --since"
    )


def _print_report(out: Output, report: EvalReport, name: str, where: str) -> None:
    """The cases as a table, the counts, and how to look at a case."""
    rows = [
        (
            clean(case.run_id),
            clean(case.new_run_id or "-"),
            case.status,
            "yes" if case.passed else "no",
            f"{case.tokens[0]} -> {case.tokens[1]}",
            f"{money(case.cost_usd[0])} -> {money(case.cost_usd[1])}",
            clean(case.describe()),
        )
        for case in report.cases
    ]
    heads = ("RUN", "NEW RUN", "STATUS", "PASSED", "TOKENS", "COST", "WHAT")
    out.table(Table(heads, tuple(rows)), title=f"eval {report.id} of {clean(name)}")
    counts = report.summary()
    cost = counts["cost_usd"]
    out.line(
        f"{_many(counts['cases'], 'case')}: {counts['same']} same, {counts['changed']} changed, "
        f"{counts['diverged']} diverged, {counts['failed']} failed; {counts['passed']} "
        f"passed, {counts['failed_cases']} did not; {counts['model_calls']} model calls; "
        f"cost {money(cost['old'])} recorded, {money(cost['new'])} now",
        style="green" if report.passed else "bold red",
    )
    shown = next((case for case in report.cases if case.status != "same"), None)
    if shown is not None and shown.new_run_id is not None:
        out.line(
            f"compare a case: reactor diff {clean(shown.run_id)} {clean(shown.new_run_id)}{where}"
            f"   its new runs: reactor runs --tag eval={report.id}{where}"
        )


def _many(count: int, thing: str) -> str:
    return f"{count} {thing}{'' if count == 1 else 's'}"


def add_tag_command(runs: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Give ``reactor runs`` its ``tag`` action (``reactor runs`` alone still lists)."""
    actions = runs.add_subparsers(dest="runs_command", metavar="", help=argparse.SUPPRESS)
    tag = actions.add_parser(
        "tag",
        description="Set tags on recorded runs, or remove them: a dataset is a tag.",
        usage="%(prog)s [-h] RUN... [KEY=VALUE ...] [--remove KEY] [--db PATH] [--plain]",
        epilog=f"Example:\n  {TAG_EXAMPLE}\n  reactor eval --graph MODULE:GRAPH --tag "
        "dataset=golden",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    tag.add_argument(
        "items",
        nargs="+",
        metavar="RUN|KEY=VALUE",
        help="runs (ids, unique prefixes, last) and the tags to set (KEY=VALUE; KEY= for none)",
    )
    tag.add_argument(
        "--remove", action="append", default=[], metavar="KEY", help="remove this tag (repeatable)"
    )
    tag.add_argument(
        "--db",
        default=argparse.SUPPRESS,  # `reactor runs --db X tag ...` keeps its X
        metavar="PATH",
        type=db_argument,
        help="the run database: a path, sqlite:///path or postgresql://... (default: "
        "$REACTOR_DB, else .reactor/runs.db)",
    )
    tag.add_argument("--plain", action="store_true", help="plain text, no colours (as when piped)")
    tag.set_defaults(parser=tag, handler=cmd_runs_tag)
    return tag


def cmd_runs_tag(args: argparse.Namespace) -> int:
    """Tag runs (every run is found before any is changed); print each run's tags after.

    Raises:
        CommandError: The database does not exist, or a tag cannot be stored.
        RunNotFoundError: A run is unknown, or a prefix is ambiguous.
    """
    refs = [item for item in args.items if "=" not in item]
    tags = {
        key: value for key, _, value in (item.partition("=") for item in args.items if "=" in item)
    }
    if "" in tags:
        args.parser.error("a tag needs a key: KEY=VALUE (or KEY= for a tag with no value)")
    if not refs:
        args.parser.error("name the runs to tag: ids, unique prefixes or last")
    if not tags and not args.remove:
        args.parser.error("give the tags to set (KEY=VALUE) or to remove (--remove KEY)")
    path = db_path(args)
    if not is_url(path) and not Path(path).exists():
        raise CommandError(
            f"no run database at {path}; record runs with `reactor run`, or name the "
            "database with --db PATH or $REACTOR_DB"
        )
    with writable_db(args) as store:
        run_ids = list(dict.fromkeys(store.resolve(ref) for ref in refs))
        try:
            infos = [store.tag(run_id, tags, remove=args.remove) for run_id in run_ids]
        except ValueError as exc:
            raise CommandError(str(exc).rstrip(".")) from None
    out = Output(plain=args.plain)
    for info in infos:
        shown = ", ".join(f"{key}={value}" if value else key for key, value in info.tags.items())
        out.line(f"{clean(info.run_id)} ({clean(info.graph or '-')}): {clean(shown or 'no tags')}")
    if tags:
        key, value = next(iter(tags.items()))
        out.line(
            f"evaluate them: reactor eval --graph MODULE:GRAPH --tag {clean(key)}={clean(value)}"
            f"{db_option(db_path(args))}"
        )
    return 0
