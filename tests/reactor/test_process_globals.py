"""Importing reactor and running graphs leave the process's global settings alone.

The garbage collector, the logging configuration, the signal handlers and the hooks for
uncaught exceptions belong to the application: each check runs in a fresh interpreter
that sets its own collector thresholds, imports reactor, and holds 200 small runs in
flight at once (an async agent, a sync handler in a worker thread, a model call,
recorded to SQLite). Only :func:`reactor.tune_gc` changes the collector, and only while
the runs are in flight.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

RUNS = 200

SCRIPT = textwrap.dedent(
    """
    import asyncio, gc, json, logging, signal, sys, threading, warnings
    import structlog

    def handler(signum):
        found = signal.getsignal(signum)  # asyncio.run has its own SIGINT handler meanwhile
        return f"{type(found).__name__} {id(found)}"

    def observed():
        root = logging.getLogger()
        return {
            "gc.get_threshold": list(gc.get_threshold()),
            "gc.isenabled": gc.isenabled(),
            "gc.get_freeze_count": gc.get_freeze_count(),
            "gc.callbacks": len(gc.callbacks),
            "root handlers": [repr(h) for h in root.handlers],
            "root level": root.level,
            "SIGINT": handler(signal.SIGINT),
            "SIGTERM": handler(signal.SIGTERM),
            "sys.excepthook": repr(sys.excepthook),
            "threading.excepthook": repr(threading.excepthook),
            "warnings.showwarning": repr(warnings.showwarning),
            "structlog configured": structlog.is_configured(),
        }

    gc.set_threshold(700, 10, 10)  # the application's own
    seen = {"before": observed()}

    import reactor
    from reactor import ScriptedProvider, SQLiteSignalStore, agent, reactive

    seen["imported"] = observed()
    if sys.argv[1] == "tuned":
        reactor.tune_gc()

    async def main():
        inside, arrived, release = 0, asyncio.Event(), asyncio.Event()

        async def wait(ctx):
            nonlocal inside
            inside += 1
            if inside == RUNS:
                arrived.set()
            await release.wait()
            return "waited"

        def add(ctx):
            return ctx.state["said"] + "!"

        graph = reactive(
            {
                "ask": agent(prompt="Say something", updates="said"),
                "add": agent(run=add, activate_on="state:said:changed", updates="added"),
                "wait": agent(run=wait, updates="waited"),
            },
            state={"said": None, "added": None, "waited": None},
        )
        seen["loop"] = observed()  # what asyncio.run itself set, before any run
        store = SQLiteSignalStore(sys.argv[2])
        provider = ScriptedProvider(default=lambda request: "hi")
        runs = [
            asyncio.create_task(graph.run(provider=provider, record=store)) for _ in range(RUNS)
        ]
        await asyncio.wait_for(arrived.wait(), 120)
        seen["in flight"] = observed()
        release.set()
        results = await asyncio.gather(*runs)
        store.close()
        assert [r.state["added"] for r in results] == ["hi!"] * RUNS, results[0]

    asyncio.run(main())
    seen["after"] = observed()
    print(json.dumps(seen))
    """
).replace("RUNS", str(RUNS))


def observe(tmp_path: Path, mode: str) -> dict[str, dict[str, Any]]:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, mode, str(tmp_path / "runs.db")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    seen: dict[str, dict[str, Any]] = json.loads(done.stdout)
    return seen


def test_importing_reactor_and_running_graphs_change_nothing_global(tmp_path: Path) -> None:
    seen = observe(tmp_path, "untuned")
    before = seen["before"]
    assert before["gc.get_threshold"] == [700, 10, 10]
    assert seen["imported"] == before
    assert seen["in flight"] == seen["loop"]
    assert {**seen["loop"], "SIGINT": before["SIGINT"]} == before
    assert seen["after"] == before


def test_tune_gc_changes_only_the_collector_and_only_while_runs_are_in_flight(
    tmp_path: Path,
) -> None:
    seen = observe(tmp_path, "tuned")
    before = seen["before"]
    assert seen["imported"] == before
    assert seen["in flight"] == {**seen["loop"], "gc.get_threshold": [700, 10, 1_000]}
    assert seen["after"] == before
