"""The app the HTTP tests serve: `reactor serve --app tests.service.served:make_service`.

A CRM's agent that suggests employers (scripted), graphs to start by name (one quick,
one that pauses ``input.seconds`` or until its ``go`` signal is echoed, one that runs
until it is stopped), and a scripted provider that answers every agent defined through
the API.
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

from reactor import AgentContext, ProviderRequest, ScriptedProvider, agent, reactive
from reactor.service import (
    Capabilities,
    Changes,
    Create,
    ObjectStore,
    Reaction,
    ReactionService,
    Update,
)
from tests.service.support import TYPES


def _enrich(request: ProviderRequest) -> Changes:
    person_id = request.prompt.rsplit(" ", 1)[-1]
    return Changes(
        reasoning="Their email is at Acme.",
        operations=(Create("Company", {"name": "Acme"}), Update(person_id, {"employer": "Acme"})),
    )


def _anyone(request: ProviderRequest) -> str:
    return f"done: {request.prompt}"


enrich = agent(
    prompt="Who employs {{ object.data.name }}? {{ object.id }}",
    output=Changes,
    reaction=Reaction(types=["Person"], events=["created"]),
    execution_mode="suggest",
    capabilities=Capabilities(can_delete=False, allowed_types=["Person", "Company"]),
)


_GONE: dict[str, asyncio.Event] = {}
"""Per run of ``relay``: set once its ``go`` is echoed, which ends its pause."""


async def _pause(ctx: AgentContext[Any]) -> str:
    gone = _GONE.setdefault(ctx.run_id, asyncio.Event())
    try:
        await asyncio.wait_for(gone.wait(), float((ctx.input or {}).get("seconds", 1.0)))
    except TimeoutError:
        pass
    finally:
        _GONE.pop(ctx.run_id, None)
    return "rested"


async def _sleep(ctx: AgentContext[Any]) -> float:
    await ctx.sleep(float((ctx.input or {}).get("seconds", 1.0)))
    return time.time()  # when it woke


async def _echo(ctx: AgentContext[Any]) -> Any:
    _GONE.setdefault(ctx.run_id, asyncio.Event()).set()
    return ctx.signal.payload


GRAPHS = {
    "count": reactive({"count": agent(run=lambda ctx: (ctx.input or 0) + 1)}, name="count"),
    "relay": reactive(
        {
            "pause": agent(run=_pause),
            "echo": agent(run=_echo, activate_on="go", emits="echoed"),
        },
        external=["go"],
        name="relay",
    ),
    "nap": reactive({"nap": agent(run=_pause)}, name="nap"),
    "sleeper": reactive({"sleeper": agent(run=_sleep, updates="woke")}, name="sleeper"),
    "approval": reactive(
        {
            "approve": agent(
                ask=os.environ.get("SERVED_APPROVAL", "Ship {{ input }}?"), choices=["yes", "no"]
            )
        },
        name="approval",
    ),
}
"""``SERVED_APPROVAL`` changes the approval's question: a deploy of new code."""


def make_service(url: str) -> ReactionService:
    """The served service, on the database at ``url``."""
    latency = float(os.environ.get("SERVED_LATENCY", "0"))
    provider = ScriptedProvider({"enrich": _enrich}, default=_anyone, latency=latency)
    return ReactionService(
        objects=ObjectStore(url, types=TYPES),
        agents={"enrich": enrich, "helper": agent(run=lambda ctx: "helped")},
        graphs=GRAPHS,
        provider=provider,
        stuck_check_every=5.0,
    )
