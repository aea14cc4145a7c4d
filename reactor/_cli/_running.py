"""``reactor run``, ``replay``, ``resume`` and ``fork``: run a graph, record it, say what it did."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import reactor.logging
from reactor._agents.asking import PendingPrompt
from reactor._cli._base import (
    CommandError,
    db_option,
    db_path,
    json_argument,
    open_db,
    tags_argument,
    writable_db,
)
from reactor._cli._load import load_graph, provider, recorded_graph, script_target
from reactor._cli._output import Output
from reactor._cli._render import clean, cost_of, money, status_text
from reactor._engine.result import RunResult
from reactor._graph.compat import resume_plan
from reactor._graph.console import ConsoleChannel
from reactor._graph.handle import Channel, RunHandle
from reactor._graph.reactive import Reactive
from reactor._providers.replay import ReplayProvider
from reactor._recording.info import RunInfo
from reactor._recording.recording import Recording
from reactor._reporting.progress import ProgressReporter
from reactor._signals.diagnostics import short_repr
from reactor._signals.names import PROVIDER_START
from reactor._signals.signal import to_jsonable
from reactor.exceptions import RunFinishedError, RunSuspendedError

__all__ = ["cmd_fork", "cmd_replay", "cmd_resume", "cmd_run", "summary"]


def cmd_run(args: argparse.Namespace) -> int:
    """Run a graph, record it, and print a summary (exit 1 unless the run went cleanly)."""
    module, graph = load_graph(args.target)
    chosen, words = provider(args.provider, module)
    options: dict[str, Any] = {"provider": chosen, "target": script_target(args.target)}
    if args.input is not None:
        options["input"] = json_argument(args.input, "--input")
    if args.timeout is not None:
        options["timeout"] = args.timeout
    path = db_path(args)
    store = None if args.no_record else writable_db(args)
    if store is not None:
        options["record"] = store
        options["tags"] = tags_argument(args.tag)
    try:
        result = _run(graph, args, options)
    finally:
        if store is not None:
            store.close()
    _print_summary(args, summary(result, words, path if store else None, state=args.state))
    return 0 if result.ok else 1


def cmd_replay(args: argparse.Namespace) -> int:
    """Run a recorded run again on its recorded answers, and compare the two."""
    with open_db(args) as reader:
        original = reader.load(reader.resolve(args.run))
    if args.graph:
        module, graph = load_graph(args.graph)
        target = script_target(args.graph)
    else:
        module, graph = recorded_graph(original.info)
        target = original.info.target or ""
    fallback = provider(args.fallback, module)[0] if args.fallback else None
    options: dict[str, Any] = {
        "replay": ReplayProvider(original, fallback=fallback),
        "input": original.input,
        "target": target,
    }
    path = db_path(args)
    store = None if args.no_record else writable_db(args)
    if store is not None:
        options["record"] = store
        options["tags"] = {"replay_of": original.run_id}
    try:
        result = _run(graph, args, options)
        replayed = (
            store.load(result.run_id)
            if store is not None
            else Recording.from_signals(result.signals)
        )
    finally:
        if store is not None:
            store.close()
    original_id = clean(original.run_id)
    words = f"the answers recorded in {original_id}"
    _print_summary(args, summary(result, words, path if store else None, state=args.state))
    divergence = original.diff(replayed)
    out = Output(plain=args.plain)
    if divergence is None:
        out.line(
            f"Replay matches {original_id}: same signals, payloads and final state.",
            style="green",
        )
        return 0 if result.ok else 1
    out.line(f"Replay differs from {original_id}.", style="bold red")
    out.line(clean(divergence, newlines=True))
    return 1


def cmd_resume(args: argparse.Namespace) -> int:
    """Continue a recorded run that stopped before its end (exit 1 unless it went cleanly).

    With ``--check``, only say whether the graph (the code as it is now) can resume it:
    exit 0 if it can, 1 if it changed what the run's log says was done.
    """
    with open_db(args) as reader:
        run_id = reader.resolve(args.run)
        info = reader.info(run_id)
        module, graph = _graph_of(args, info, "resume")
        if args.check:
            _, verdict = resume_plan(graph, reader, run_id)
            Output(plain=args.plain).line(clean(verdict, newlines=True))
            return 0 if verdict.compatible else 1
    chosen, words = provider(args.provider, module)
    options: dict[str, Any] = {"provider": chosen, "resume": run_id}
    options["on_change"] = "force" if args.force else "fail"
    if args.timeout is not None:
        options["timeout"] = args.timeout
    store = writable_db(args)
    options["record"] = store
    try:
        result = _run(graph, args, options)
    finally:
        store.close()
    _print_summary(args, summary(result, words, db_path(args), state=args.state))
    return 0 if result.ok else 1


def cmd_fork(args: argparse.Namespace) -> int:
    """Start a new run from a recorded run's log up to a signal (exit 1 unless it went cleanly)."""
    with open_db(args) as reader:
        run_id = reader.resolve(args.run)
        module, graph = _graph_of(args, reader.info(run_id), "fork")
    state: dict[str, Any] = {}
    for assignment in args.set or ():
        key, equals, value = assignment.partition("=")
        if not equals or not key:
            raise CommandError(f"--set takes KEY=JSON, e.g. --set limit=5, got {assignment!r}")
        state[key] = json_argument(value, f"--set {key}")
    chosen, words = provider(args.provider, module)
    options: dict[str, Any] = {"provider": chosen, "fork": {"run_id": run_id, "at": args.at}}
    options["fork"]["state"] = state
    if args.timeout is not None:
        options["timeout"] = args.timeout
    store = writable_db(args)
    options["record"] = store
    try:
        result = _run(graph, args, options)
    except ValueError as exc:  # the signal to fork at, or the state, does not fit
        raise CommandError(str(exc).rstrip(".")) from None
    finally:
        store.close()
    lines = summary(result, words, db_path(args), state=args.state)
    lines.insert(1, f"forked from {run_id} at signal {args.at}")
    _print_summary(args, lines)
    return 0 if result.ok else 1


def _graph_of(args: argparse.Namespace, info: RunInfo, command: str) -> tuple[Any, Reactive]:
    """The graph ``--graph`` names, else the recorded one (the code as it is now)."""
    if args.graph:
        return load_graph(args.graph)
    return recorded_graph(info, command, changed=True)


def _run(graph: Reactive, args: argparse.Namespace, options: dict[str, Any]) -> RunResult:
    reporters: list[Any] = []
    if args.json_logs:
        reactor.logging.configure(json=True, level=args.log_level)
        reporters.append(reactor.logging.StructlogReporter())
    else:
        reactor.logging.configure(level="warning" if args.log_level == "info" else args.log_level)
        if args.log_level != "info":
            reporters.append(reactor.logging.StructlogReporter())
    progress = None
    channels: list[Channel] = []
    unattended = None
    if getattr(args, "interactive", False):  # the console shows the run: no progress line
        channels.append(ConsoleChannel(plain=args.plain))
    else:
        if "replay" not in options:  # nobody can answer a question: say so, not wait
            channels.append(unattended := Unattended())
        if not args.quiet:
            progress = ProgressReporter(rich=False if args.plain else None)
            reporters.append(progress)
    options["reporters"] = reporters
    try:
        return asyncio.run(graph.run(channels=channels, **options))
    except RunSuspendedError as exc:
        db = db_option(db_path(args))
        asks = "" if unattended is None else unattended.what()
        raise CommandError(
            f"run {exc.run_id} was suspended while it waits for an answer{asks}; continue "
            f"it with: reactor resume {exc.run_id}{db} --interactive"
        ) from None
    finally:
        if progress is not None:
            progress.close()


class Unattended:
    """A run's channel when nobody is at the keyboard (no ``--interactive``).

    A question nobody can answer is not waited on in silence: a recorded run is
    suspended at once (``reactor resume RUN --interactive`` answers it), one recorded
    nowhere (``--no-record``) is aborted, its reason naming the question; either way the
    command says what was asked, and how to answer.
    """

    def __init__(self) -> None:
        self.asked: PendingPrompt | None = None

    async def attach(self, handle: RunHandle) -> None:
        """Wait for the run's first question, then stop the run (see the class)."""
        try:
            self.asked = await handle.next_prompt()
        except RunFinishedError:
            return
        if handle.recorded:
            await handle.suspend(f"nobody could answer {self.asked.prompt_id}: no --interactive")
        else:
            handle.abort(f"it asks{self.what()} and nobody can answer without --interactive")

    def what(self) -> str:
        """What the run asked, for a message (empty when it asked nothing)."""
        asked = self.asked
        if asked is None:
            return ""
        choices = f" ({', '.join(asked.choices)})" if asked.choices else ""
        return f" ({asked.agent}: {clean(asked.question)}{choices})"


def _print_summary(args: argparse.Namespace, lines: list[str]) -> None:
    if args.json_logs:  # stdout carries the JSON lines
        print("\n".join(lines), file=sys.stderr)
        return
    out = Output(plain=args.plain)
    for line in lines:
        out.line(line)


def summary(
    result: RunResult, provider_words: str, recorded_to: Path | str | None, *, state: bool = False
) -> list[str]:
    """What a finished run says: status, provider, state (in brief), figures, what next."""
    metrics = result.metrics
    lines = [
        f"run {result.run_id} ({clean(result.graph or 'graph')}): "
        f"{status_text(result.status, len(result.failures))} - {clean(result.reason)}",
    ]
    if result.select(PROVIDER_START):  # a run of handlers only asked no model
        lines.append(f"provider: {provider_words}")
    if state:
        lines.append("state: " + json.dumps(to_jsonable(result.state), indent=2, default=str))
    else:
        lines.append(f"state: {brief_state(result.state)}")
    if not _same(result.output, result.state):
        lines.append(f"output: {clean(short_repr(to_jsonable(result.output), 200))}")
    lines.append(
        f"{metrics.activations} activations · {metrics.input_tokens:,} tokens in / "
        f"{metrics.output_tokens:,} out · cost {money(cost_of(result.signals))} · "
        f"{metrics.duration_ms / 1000:.2f}s"
    )
    for failure in result.failures[:3]:
        lines.append(f"failed: {failure.agent}: {type(failure.error).__name__}: {failure.error}")
    if result.error is not None and str(result.error) not in result.reason:
        lines.append(f"error: {type(result.error).__name__}: {clean(result.error)}")
    if recorded_to is not None:
        where = db_option(recorded_to)
        lines.append(
            f"inspect: reactor show {result.run_id}{where}   "
            f"replay: reactor replay {result.run_id}{where}"
        )
    return lines


def brief_state(state: Mapping[str, Any], *, width: int = 100) -> str:
    """The state on one line: each key with its value cut short; ``--state`` has it all."""
    if not state:
        return "(empty)"
    parts: list[str] = []
    used = 0
    for key, value in state.items():
        part = f"{key}={short_repr(to_jsonable(value), 40)}"
        if parts and used + len(part) > width:
            left = len(state) - len(parts)
            parts.append(f"... {left} more (--state prints the whole state)")
            break
        parts.append(part)
        used += len(part) + 2
    return clean(", ".join(parts))


def _same(output: Any, state: Mapping[str, Any]) -> bool:
    try:
        return bool(to_jsonable(output) == to_jsonable(state))
    except Exception:  # an output that cannot be compared is shown
        return False
