"""``/api/agents``: the agents of the service, their rows, schedules and manual runs.

Reading them is a ``viewer``'s; running one now an ``operator``'s; creating, changing
(its schedule, its switch) and deleting one an ``admin``'s. One reaction agent's answer
carries its ``lag``: how many of its entries wait, how long the oldest has, and its
entries by outcome.
"""

from __future__ import annotations

from typing import Any

import fastapi
import pydantic

from reactor.service._api.base import ADMINISTERS, CHECKS, VIEWS, Operator, Service
from reactor.service._objects.changes import Lag
from reactor.service._reactions.definitions import AgentChanges, AgentDefinition, AgentRecord

__all__ = ["AgentDetail", "RunStarted", "router"]

router = fastapi.APIRouter(prefix="/api/agents", tags=["agents"], dependencies=CHECKS)


class RunInput(pydantic.BaseModel):
    """The input of a run (``input`` in templates)."""

    input: Any = None


class RunStarted(pydantic.BaseModel):
    """A run was started: follow it at ``/api/runs/{run_id}`` (and ``/events``)."""

    run_id: str


@router.get("", dependencies=[VIEWS])
async def list_agents(service: Service) -> list[AgentRecord]:
    """Every agent: those of the code and those defined by their rows."""
    return await service.catalog.records()


@router.post("", status_code=201, dependencies=[ADMINISTERS])
async def create_agent(definition: AgentDefinition, service: Service) -> AgentRecord:
    """Define a prompt agent by its row; it is scheduled or reacts at once."""
    return await service.catalog.create(definition)


class AgentDetail(AgentRecord):
    """One agent, and (a reaction agent) how far behind it is."""

    lag: Lag | None = pydantic.Field(
        default=None,
        description="A reaction agent's lag: its waiting entries, how long the oldest has "
        "waited (seconds), and its entries by outcome and by status; null for others.",
    )


@router.get("/{name}", dependencies=[VIEWS])
async def get_agent(name: str, service: Service) -> AgentDetail:
    """One agent, with ``next_run_at`` (null when it is not scheduled) and its ``lag``."""
    record = await service.catalog.record(name)
    lag = (await service.lag(name))[name] if record.trigger_type == "reaction" else None
    return AgentDetail(**dict(record), lag=lag)


@router.patch("/{name}", dependencies=[ADMINISTERS])
async def update_agent(name: str, changes: AgentChanges, service: Service) -> AgentRecord:
    """Change an agent's row: a new ``cron_schedule`` or ``enabled`` applies at once."""
    return await service.catalog.update(name, changes)


@router.delete("/{name}", dependencies=[ADMINISTERS])
async def delete_agent(name: str, service: Service) -> AgentRecord:
    """Delete an agent defined by its row (one defined in code can only be disabled)."""
    return await service.catalog.delete(name)


@router.post("/{name}/run", status_code=202)
async def run_agent(
    name: str, service: Service, user: Operator, body: RunInput | None = None
) -> RunStarted:
    """Run an agent now, with ``input``; answers at once with the run's id."""
    given = body.input if body is not None else None
    run_id = await service.run_agent(name, given, trigger="manual", user=user.id)
    return RunStarted(run_id=run_id)
