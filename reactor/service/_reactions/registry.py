"""Code-defined agents as rows of ``agents``, and the reaction agents the service runs."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from reactor._agents.admission import SpendCap
from reactor._agents.agent import Agent
from reactor._agents.reaction import Reaction
from reactor._graph.reactive import Reactive, reactive
from reactor._signals.diagnostics import log
from reactor._signals.names import HARNESS_START
from reactor._signals.settings import settings
from reactor.exceptions import AgentConfigError
from reactor.service._objects.db import Database
from reactor.service._objects.schema import agents as agents_table
from reactor.service._reactions.admitting import Admission

__all__ = [
    "ReactionAgent",
    "agent_row",
    "chosen_schedule",
    "named_agents",
    "register",
    "service_spend_cap",
]


@dataclasses.dataclass(frozen=True)
class ReactionAgent:
    """A reaction agent as the service runs it: its definition and its one-agent graph.

    Each reaction is a run of ``graph`` (built and validated once, when the service is
    made), so it is recorded, replayable and shows in ``reactor runs`` under the
    agent's name. The graph's agent has no ``when``: the guard is evaluated once per
    event, when the event is logged for the agent (:mod:`~reactor.service._reactions.guard`),
    never again inside the run.
    """

    name: str
    agent: Agent
    reaction: Reaction
    graph: Reactive
    admission: Admission

    @classmethod
    def of(cls, name: str, agent: Agent) -> ReactionAgent:
        """Build the one-agent graph of a reaction agent, and its admission.

        The service's cap (``REACTOR_SPEND_CAP_USD``) applies to every reaction agent.

        Raises:
            AgentConfigError: It also has ``activate_on`` (the service starts it).
        """
        assert agent.reaction is not None
        if agent.activate_on != (HARNESS_START,):
            listed = ", ".join(map(repr, agent.activate_on))
            raise AgentConfigError(
                f"Agent {name!r} has reaction= and activate_on={listed}: a reaction agent "
                "runs when its objects change, so leave activate_on out.",
                agent=name,
            )
        unguarded = dataclasses.replace(agent, when=None, when_expression=None)
        admission = Admission(name, agent.reaction.admit, service_cap=service_spend_cap())
        graph = reactive({name: unguarded}, name=name)
        return cls(name, agent, agent.reaction, graph, admission)


def service_spend_cap() -> SpendCap | None:
    """The service's spend cap (``REACTOR_SPEND_CAP_USD`` per ``REACTOR_SPEND_CAP_PER``)."""
    config = settings()
    if config.spend_cap_usd is None:
        return None
    return SpendCap(config.spend_cap_usd, per=config.spend_cap_per, scope="service")


def named_agents(agents: Mapping[str, Agent] | Iterable[Agent]) -> dict[str, Agent]:
    """Agents by name (a list's agents must be named), each checked as ``reactive`` does.

    Raises:
        AgentConfigError: An item is not an agent, is unnamed, or is defined badly.
    """
    items = agents.items() if isinstance(agents, Mapping) else ((a.name, a) for a in agents)
    named: dict[str, Agent] = {}
    for key, agent in items:
        if not isinstance(agent, Agent):
            raise AgentConfigError(
                f"{agent!r} is not an agent; build agents with reactor.agent(...).", agent=key
            )
        if key is None:
            raise AgentConfigError(
                "An agent in the list has no name; give it name= or pass agents as a dict "
                "{name: agent}."
            )
        if key in named:
            raise AgentConfigError(f"Two agents are named {key!r}; give each its own name.")
        named[key] = agent if agent.name == key else agent.named(key)
    return named


def agent_row(name: str, agent: Agent) -> dict[str, Any]:
    """The ``agents`` row of a code-defined agent (its definition, as JSON data)."""
    reaction = agent.reaction
    schedule = agent.schedule if reaction is None else None
    trigger = "reaction" if reaction is not None else "cron" if schedule else "manual"
    return {
        "name": name,
        "prompt": agent.prompt_text,
        "role": agent.system,
        "trigger_type": trigger,
        "cron_schedule": schedule,
        "reaction_config": reaction.model_dump(mode="json") if reaction is not None else None,
        "execution_mode": agent.execution_mode,
        "capabilities": agent.capabilities.model_dump(mode="json"),
        "approval": agent.approval.model_dump(mode="json"),
        "output_schema": agent.output_schema,
        "defined_in": "code",
        "schedule_source": "code",
        "code_schedule": schedule,
    }


def chosen_schedule(coded: dict[str, Any], stored: Mapping[str, Any] | None) -> str | None:
    """Keep the API's schedule in ``coded`` (a code agent's new row) if it still holds.

    The code's schedule wins, unless the schedule was changed over the API since the
    code last gave this one: then the API's is kept (``coded`` takes the stored
    ``trigger_type`` and ``cron_schedule``). Changing the schedule in code later makes
    the code's win again. Returns why an API schedule was kept, or ``None``.
    """
    if stored is None or stored["schedule_source"] != "api" or coded["trigger_type"] == "reaction":
        return None
    if stored["trigger_type"] == "reaction" or stored["code_schedule"] != coded["code_schedule"]:
        return None  # the code changed since the API did: the newer word wins
    coded.update(
        trigger_type=stored["trigger_type"],
        cron_schedule=stored["cron_schedule"],
        schedule_source="api",
    )
    return "changed over the API (the code's schedule is unchanged since)"


async def register(db: Database, agents: Mapping[str, Agent]) -> dict[str, bool]:
    """Write the agents' rows (keeping each row's ``enabled``); return whether each is enabled.

    A row's definition columns follow the code at every start; ``enabled`` is the
    operators' and survives restarts. The schedule (``trigger_type`` ``manual`` or
    ``cron``, ``cron_schedule``) is the code's (``agent(schedule=...)``) unless it was
    changed over the API since the code last gave it (:func:`chosen_schedule`); which
    one is used, and why, is logged.
    """
    if not agents:
        return {}
    now = datetime.now(UTC)
    names = sorted(agents)
    async with db.write() as conn:
        found = await conn.execute(sa.select(agents_table).where(agents_table.c.name.in_(names)))
        stored = {row.name: dict(row._mapping) for row in found}
        rows, reasons = [], {}
        for name in names:
            row = {**agent_row(name, agents[name]), "created_at": now, "updated_at": now}
            reasons[name] = chosen_schedule(row, stored.get(name))
            rows.append(row)
        dialect = postgresql if db.dialect == "postgresql" else sqlite
        insert = dialect.insert(agents_table).values(rows)
        keep = {"name", "created_at"}
        await conn.execute(
            insert.on_conflict_do_update(
                index_elements=["name"],
                set_={key: insert.excluded[key] for key in rows[0] if key not in keep},
            )
        )
        found = await conn.execute(
            sa.select(agents_table.c.name, agents_table.c.enabled).where(
                agents_table.c.name.in_(names)
            )
        )
        enabled = {row.name: bool(row.enabled) for row in found}
    for row in rows:
        _log_schedule(row, reasons[row["name"]], stored.get(row["name"]))
    return enabled


def _log_schedule(
    row: Mapping[str, Any], kept: str | None, stored: Mapping[str, Any] | None
) -> None:
    """Say which schedule a code agent runs on, and why (nothing for unscheduled ones)."""
    name, schedule, coded = row["name"], row["cron_schedule"], row["code_schedule"]
    if kept is not None:
        if schedule is None and coded is None:
            return
        log(
            "reactor.service",
            "info",
            "agent schedule from the API",
            agent=name,
            schedule=schedule,
            code_schedule=coded,
            reason=kept,
        )
        return
    if coded is None:
        return
    overridden = stored is not None and stored["schedule_source"] == "api"
    reason = (
        "the code's schedule changed since the API changed it"
        if overridden
        else "given in code (agent(schedule=...)); not changed over the API"
    )
    log(
        "reactor.service",
        "info",
        "agent schedule from code",
        agent=name,
        schedule=schedule,
        reason=reason,
    )
