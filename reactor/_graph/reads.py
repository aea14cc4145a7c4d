"""What a run reads of its store before it begins: blocking reads, made off the event loop.

A resumed run's plan (its log from the latest snapshot, checked against the graph), a
fork's (its source's log up to ``at``), and the messages posted to the run before it
began: only a run whose id was known before (a resumed one, or one given ``run_id=``)
can have any, and not one whose id its caller made just now (``graph.run(fresh=True)``:
a reaction's first run). ``graph.run()`` makes these reads in a thread; ``start()``,
synchronous, makes them in place.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, TypeAlias

from reactor._activation.resume import ResumePlan
from reactor._engine.opening import Forked
from reactor._engine.options import RunOptions
from reactor._engine.runspec import GraphSpec
from reactor._graph.compat import resume_plan
from reactor._graph.forking import fork_plan
from reactor._recording.inbox import Posted
from reactor._signals.diagnostics import log

__all__ = ["NOTHING", "Read", "needs_reading", "read_store", "with_input"]

Read: TypeAlias = tuple[ResumePlan | None, Forked | None, list[Posted]]
"""What a run read of its store: its plan, its fork, the messages waiting for it."""

NOTHING: Read = (None, None, [])
"""What a new run with a fresh id reads: nothing."""


def needs_reading(options: RunOptions, fresh: bool = False) -> bool:
    """Whether a run has anything to read of its store before it begins.

    ``fresh``: its ``run_id`` was made just now, so nothing was posted to it yet (what
    is posted from now on, its store's inbox watch delivers): no read, no thread.
    """
    return options.record is not None and (
        options.resume is not None
        or options.fork is not None
        or (options.run_id is not None and not fresh)
    )


def read_store(graph: GraphSpec, options: RunOptions) -> Read:
    """Read what the run needs before it begins (blocking: call it off the loop).

    Raises:
        RunNotFoundError: The run to resume, or the fork's source, is not in the store.
        RunFinishedError: The run to resume has ended.
        GraphChangedError: The graph changed what the log says was done (and
            ``on_change="fail"``).
    """
    plan: ResumePlan | None = None
    forked: Forked | None = None
    if options.resume is not None:
        plan = _resume_plan(graph, options)
    elif options.fork is not None:
        plan, forked = fork_plan(graph, options)
    waiting: list[Posted] = []
    known = options.resume or options.run_id
    if options.record is not None and known is not None:
        try:
            waiting = options.record.waiting_messages([known])
        except Exception as exc:  # the store is away: its inbox watch delivers them later
            log("reactor.inbox", "warning", "inbox read failed", run_id=known, error=repr(exc))
    return plan, forked, waiting


def with_input(options: RunOptions, given: Mapping[str, Any], read: Read) -> RunOptions:
    """A resumed run (or a fork) takes its recorded input, unless it was given one."""
    plan = read[0]
    if plan is not None and "input" not in given:
        return dataclasses.replace(options, input=plan.input)
    return options


def _resume_plan(graph: GraphSpec, options: RunOptions) -> ResumePlan:
    assert options.resume is not None
    assert options.record is not None
    plan, verdict = resume_plan(graph, options.record, options.resume, options.scope)
    if not verdict.compatible:
        if options.on_change == "fail":
            raise verdict.error()
        log(
            "reactor.run",
            "warning",
            "resumed on a changed graph",
            run_id=plan.run_id,
            changes="; ".join(f"{a}: {why}" for a, why in verdict.changes.items()),
        )
    return plan
