"""The app of the audit-trail tests: `reactor serve --app tests.service.audited:make_service`.

``count`` adds one to its input. ``chatty`` waits for the file ``input.gate`` to exist
(if given), then emits ``input.count`` signals of 4 KB each: a run whose recording
fails part way on a full disk. ``notes`` reacts to ``Note`` objects: it writes its run
id to the file ``REACTOR_TEST_REACTIONS`` names (``start <run_id>``), waits for the file
``<object data.gate>`` to exist, then writes ``end <run_id>``; one object at a time.
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

from reactor import AgentContext, agent, reactive
from reactor.service import ObjectStore, Reaction, ReactionService


def _note(line: str) -> None:
    """Append a line to the file ``REACTOR_TEST_REACTIONS`` names (atomically)."""
    path = os.environ.get("REACTOR_TEST_REACTIONS")
    if path:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, f"{line}\n".encode())
        finally:
            os.close(fd)


def _wait_for_file(path: str) -> None:
    while not os.path.exists(path):
        time.sleep(0.05)


async def _chat(ctx: AgentContext[Any]) -> str:
    given = ctx.input or {}
    if given.get("gate"):
        await asyncio.to_thread(_wait_for_file, given["gate"])
    for n in range(int(given.get("count", 100))):
        ctx.emit("chatter", {"n": n, "text": "x" * 4096})
        await asyncio.sleep(0.001)
    return "said it all"


async def _take_note(ctx: AgentContext[Any]) -> str:
    _note(f"start {ctx.run_id}")
    gate = (ctx.input or {}).get("data", {}).get("gate")
    if gate:
        await asyncio.to_thread(_wait_for_file, gate)
    _note(f"end {ctx.run_id}")
    return "noted"


def make_service(db: str) -> ReactionService:
    return ReactionService(
        objects=ObjectStore(db),
        graphs={
            "count": reactive({"count": agent(run=lambda ctx: (ctx.input or 0) + 1)}, name="count"),
            "chatty": reactive({"chatty": agent(run=_chat, emits=["chatter"])}, name="chatty"),
        },
        agents={"notes": agent(run=_take_note, reaction=Reaction(types=["Note"]))},
    )
