"""Code-defined agents as rows of ``agents``, and the reaction agents the service runs."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from reactor._agents.agent import Agent
from reactor._agents.reaction import Reaction
from reactor._graph.reactive import Reactive, reactive
from reactor._signals.names import HARNESS_START
from reactor.exceptions import AgentConfigError
from reactor.service._objects.db import Database
from reactor.service._objects.schema import agents as agents_table

__all__ = ["ReactionAgent", "agent_row", "named_agents", "register"]


@dataclasses.dataclass(frozen=True)
class ReactionAgent:
    """A reaction agent as the service runs it: its definition and its one-agent graph.

    Each reaction is a run of ``graph`` (built and validated once, when the service is
    made), so it is recorded, replayable and shows in ``reactor runs`` under the
    agent's name.
    """

    name: str
    agent: Agent
    reaction: Reaction
    graph: Reactive

    @classmethod
    def of(cls, name: str, agent: Agent) -> ReactionAgent:
        """Build the one-agent graph of a reaction agent.

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
        return cls(name, agent, agent.reaction, reactive({name: agent}, name=name))


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
    return {
        "name": name,
        "prompt": agent.prompt_text,
        "role": agent.system,
        "trigger_type": "reaction" if reaction is not None else "manual",
        "cron_schedule": None,
        "reaction_config": reaction.model_dump(mode="json") if reaction is not None else None,
        "execution_mode": agent.execution_mode,
        "capabilities": agent.capabilities.model_dump(mode="json"),
        "output_schema": agent.output_schema,
        "defined_in": "code",
    }


async def register(db: Database, agents: Mapping[str, Agent]) -> dict[str, bool]:
    """Write the agents' rows (keeping each row's ``enabled``); return whether each is enabled.

    A row's definition columns follow the code at every start; ``enabled`` and the
    schedule (``cron_schedule``, and ``trigger_type`` ``cron`` of an agent the code
    leaves ``manual``) are the operators' and survive restarts.
    """
    if not agents:
        return {}
    now = datetime.now(UTC)
    rows = [
        {**agent_row(name, agent), "created_at": now, "updated_at": now}
        for name, agent in sorted(agents.items())
    ]
    dialect = postgresql if db.dialect == "postgresql" else sqlite
    insert = dialect.insert(agents_table).values(rows)
    keep = {"name", "created_at", "trigger_type", "cron_schedule"}
    coded, stored = insert.excluded, agents_table.c
    scheduled = sa.and_(coded.trigger_type == "manual", stored.trigger_type == "cron")
    async with db.write() as conn:
        await conn.execute(
            insert.on_conflict_do_update(
                index_elements=["name"],
                set_={
                    **{key: coded[key] for key in rows[0] if key not in keep},
                    "trigger_type": sa.case((scheduled, "cron"), else_=coded.trigger_type),
                    "cron_schedule": sa.case((scheduled, stored.cron_schedule), else_=None),
                },
            )
        )
        found = await conn.execute(
            sa.select(agents_table.c.name, agents_table.c.enabled).where(
                agents_table.c.name.in_(sorted(agents))
            )
        )
        return {row.name: bool(row.enabled) for row in found}
