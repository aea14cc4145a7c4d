"""The app of the scale-out tests: `reactor worker --app tests.service.queued:make_service`.

``steps`` is a two-step graph: ``first`` notes each execution in the file named by
``REACTOR_TEST_STEPS`` (one line per execution, from any process), then ``second``
waits (for the file ``input.gate`` to exist, if given, then ``input.seconds``, default 1,
or until the file ``input.release`` exists) before the run ends, its output naming its
process. ``tick`` is an agent to run on schedule. ``orders`` reacts to ``Order``
objects, one object's events in order: it notes ``start``/``end <pid> <object>
<version>`` in the file ``REACTOR_TEST_REACTIONS`` names, waiting ``data.seconds``
(default 0) between the two. ``sleeper`` sleeps on a durable timer (``input.seconds``)
and keeps when it woke. Agents defined through the API are answered by a scripted
provider: no changes, the prompt as the reasoning.
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

from reactor import AgentContext, ScriptedProvider, agent, reactive
from reactor.service import Changes, ObjectStore, Reaction, ReactionService


def _note(variable: str, line: str) -> None:
    """Append a line to the file ``variable`` names (from any process, atomically)."""
    path = os.environ.get(variable)
    if path:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, f"{line}\n".encode())
        finally:
            os.close(fd)


def _first(ctx: AgentContext[Any]) -> str:
    _note("REACTOR_TEST_STEPS", ctx.run_id)
    return "done"


async def _order(ctx: AgentContext[Any]) -> str:
    event = ctx.input
    what = f"{os.getpid()} {event['id']} {event['version']}"
    _note("REACTOR_TEST_REACTIONS", f"start {what}")
    await asyncio.sleep(float(event["data"].get("seconds", 0)))
    _note("REACTOR_TEST_REACTIONS", f"end {what}")
    return "noted"


def _wait_for_file(path: str) -> None:
    while not os.path.exists(path):
        time.sleep(0.05)


async def _second(ctx: AgentContext[Any]) -> str:
    given = ctx.input or {}
    if given.get("gate"):
        await asyncio.to_thread(_wait_for_file, given["gate"])
    deadline = time.monotonic() + float(given.get("seconds", 1.0))
    release = given.get("release")
    while time.monotonic() < deadline:  # a poll, not a thread: a worker's stop ends it at once
        if release and os.path.exists(release):  # noqa: ASYNC240 (a test's marker file)
            break
        await asyncio.sleep(0.05)
    return f"done by {os.getpid()}"


async def _sleep(ctx: AgentContext[Any]) -> float:
    await ctx.sleep(float((ctx.input or {}).get("seconds", 1.0)))
    return time.time()  # when it woke


def steps_graph() -> Any:
    return reactive(
        {
            "first": agent(run=_first, updates="first"),
            "second": agent(run=_second, activate_on="state:first:changed", updates="second"),
        },
        state={"first": None, "second": None},
        name="steps",
    )


def make_service(db: str) -> ReactionService:
    return ReactionService(
        objects=ObjectStore(db),
        provider=ScriptedProvider(default=lambda request: Changes(reasoning=request.prompt)),
        graphs={
            "steps": steps_graph(),
            "sleeper": reactive(
                {"sleep": agent(run=_sleep, updates="woke")}, state={"woke": None}, name="sleeper"
            ),
        },
        agents={
            "tick": agent(run=lambda ctx: "tick"),
            "orders": agent(run=_order, reaction=Reaction(types=["Order"], concurrency="queue")),
        },
    )
