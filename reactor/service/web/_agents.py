"""The agents page: every agent, when it runs, its last runs, its lag; change it, or run it.

A reaction agent shows how far behind it is: its entries waiting in the processing
log, how long the oldest has waited, and its entries by outcome (``admitted``, and
every other status by name), as ``GET /api/agents/{name}`` and ``/metrics`` say.

What each agent can change follows its trigger, as the catalog behind
``PATCH /api/agents/{name}`` does (the scheduler follows at once): a manual or cron
agent has a schedule (giving one makes it a cron agent, clearing it a manual one) and
an enabled switch; a reaction agent shows the object events it reacts to (its filter)
and only its enabled switch, since whether it reacts is not a schedule. A manual or cron
agent can be run now, with a JSON input, as ``POST /api/agents/{name}/run`` does.
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

import fastapi
import pydantic
from starlette.requests import Request
from starlette.responses import Response

from reactor._agents.admission import SpendCap
from reactor.exceptions import ReactorError
from reactor.service._reactions.definitions import AgentChanges
from reactor.service.web._render import (
    Administering,
    Operating,
    Viewing,
    back,
    json_field,
    page,
    service_of,
)

__all__ = ["router"]

router = fastapi.APIRouter(include_in_schema=False)

LAST_RUNS = 3
"""Runs the agents page shows per agent."""

Field = Annotated[str, fastapi.Form()]


@router.get("/agents")
async def agents(request: Request, session: Viewing) -> Response:
    """Every agent: trigger (a reaction's filter), schedule, enabled, next run, last runs, lag."""
    service = service_of(request)
    records = await service.catalog.records()
    store = service.record
    last: dict[str, list[Any]] = {}
    for record in records:
        last[record.name] = (
            await asyncio.to_thread(store.runs, graph=record.name, limit=LAST_RUNS)
            if store is not None
            else []
        )
    lags = await service.lag()
    caps = {name: cap for name in service.reactions if (cap := _cap(service, name)) is not None}
    return page(request, "agents.html", session, agents=records, last=last, lags=lags, caps=caps)


def _cap(service: Any, name: str) -> float | None:
    """The cap of a reaction agent's own ``SpendCap`` in its code (``None``: it has none)."""
    for policy in service.reactions[name].admission.policies:
        if isinstance(policy, SpendCap) and policy.scope == "agent":
            return float(policy.usd)
    return None


@router.post("/agents/{name}")
async def edit_agent(
    request: Request,
    name: str,
    session: Administering,
    cron_schedule: Field = "",
    enabled: Field = "",
    spend_cap_usd: Field | None = None,
) -> Response:
    """Change an agent's schedule (not a reaction agent's), its spend cap, whether it runs."""
    service = service_of(request)
    try:
        record = await service.catalog.record(name)
        changes: dict[str, Any] = {"enabled": enabled == "on"}
        schedule = cron_schedule.strip() or None
        if record.trigger_type != "reaction" and schedule != record.cron_schedule:
            changes["cron_schedule"] = schedule
            changes["trigger_type"] = "manual" if schedule is None else "cron"
        if spend_cap_usd is not None:  # the form has the field: the agent has a cap
            changes["spend_cap_usd"] = spend_cap_usd.strip() or None
        await service.catalog.update(name, AgentChanges(**changes))
    except pydantic.ValidationError as exc:
        session.notify("error", f"Agent {name} was not saved: {_problem(exc)}")
    except ReactorError as exc:
        session.notify("error", str(exc))
    else:
        session.notify("ok", f"Agent {name} was saved.")
    return back(request, "/agents")


def _problem(exc: pydantic.ValidationError) -> str:
    """The first problem of a change, in a sentence naming its field."""
    first = exc.errors()[0]
    field = ".".join(map(str, first["loc"])) or "the change"
    if field == "spend_cap_usd":
        return (
            "the spend cap must be an amount of US dollars above 0 (12.5), or empty for the code's."
        )
    return f"{field}: {first['msg']}."


@router.post("/agents/{name}/run")
async def run_agent(request: Request, name: str, session: Operating, input: Field = "") -> Response:
    """Run an agent now with the JSON ``input``, as the signed-in user; open the run."""
    try:
        given = json_field(input)
        run_id = await service_of(request).run_agent(
            name, given, trigger="manual", user=session.user.id
        )
    except (ValueError, ReactorError) as exc:
        session.notify("error", f"Agent {name} was not run: {exc}")
        return back(request, "/agents")
    session.notify("ok", f"Run {run_id} of agent {name} was started.")
    return back(request, f"/runs/{run_id}")
