"""The service's agents: those of its code and those of its ``agents`` rows, kept in step.

:class:`AgentCatalog` reads and writes the ``agents`` table, builds the agents that
rows define, schedules the enabled cron agents, and tells the service which reaction
agents to dispatch to, at start and whenever an agent is created, changed or deleted
(through the API): a change takes effect at once, without a restart.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime
from typing import Any, Literal

import sqlalchemy as sa

from reactor._agents.admission import SpendCap
from reactor._agents.agent import Agent
from reactor._signals.diagnostics import log
from reactor.exceptions import AgentConfigError, AgentConflictError, AgentNotFoundError
from reactor.service._objects.db import Database
from reactor.service._objects.schema import agents as agents_table
from reactor.service._reactions.cron import CronJobs
from reactor.service._reactions.definitions import (
    DEFINITION_FIELDS,
    SCHEDULE_FIELDS,
    AgentChanges,
    AgentDefinition,
    AgentRecord,
    build_agent,
    check_definition,
)

__all__ = ["AgentCatalog"]

Reacting = Literal["keep", "new", "gone"]
"""Where a reaction agent starts: where it stopped (``keep``), at the next change
(``new``: it was just created), or nowhere (``gone``: it was deleted)."""

SetReaction = Callable[[str, Agent | None, Reacting], Awaitable[None]]
"""``(name, agent or None, reacting)``: dispatch to a reaction agent, or stop (``None``)."""


class AgentCatalog:
    """Every agent of a service by name, with its row; the cron jobs follow the rows.

    Args:
        db: The service's database.
        code: The agents defined in code (their rows are written when the service starts).
        cron: The scheduler of cron agents.
        set_reaction: How the service starts or stops dispatching to a reaction agent.
    """

    def __init__(
        self, db: Database, code: Mapping[str, Agent], cron: CronJobs, set_reaction: SetReaction
    ) -> None:
        self.db = db
        self.code = dict(code)
        self.cron = cron
        self._set_reaction = set_reaction
        self.agents: dict[str, Agent] = {}
        self.enabled: dict[str, bool] = {}

    # -- loading -------------------------------------------------------------------

    async def load(self) -> dict[str, Agent]:
        """Read every row: build the agents, schedule the cron ones; return the reactions.

        A row that no longer defines a valid agent is logged and left out (fix it
        through the API).
        """
        reactions: dict[str, Agent] = {}
        for row in await self._rows():
            built = self._build(row)
            if built is None:
                continue
            self.agents[row["name"]] = built
            self.enabled[row["name"]] = bool(row["enabled"])
            if row["enabled"] and built.reaction is not None:
                reactions[row["name"]] = built
            self._schedule(row)
        return reactions

    def _build(self, row: Mapping[str, Any]) -> Agent | None:
        name = row["name"]
        if row["defined_in"] == "code":
            return self.code.get(name)  # a row of code that is gone: nothing to run
        try:
            return build_agent(name, {key: row[key] for key in DEFINITION_FIELDS})
        except AgentConfigError as exc:
            log("reactor.service", "error", "agent row left out", agent=name, error=str(exc))
            return None

    def _schedule(self, row: Mapping[str, Any]) -> None:
        name = row["name"]
        on = row["enabled"] and row["trigger_type"] == "cron" and name in self.agents
        try:
            self.cron.set(name, row["cron_schedule"] if on else None)
        except ValueError as exc:  # stored before the checks were: say so, run the rest
            log("reactor.service", "error", "agent schedule left out", agent=name, error=str(exc))

    # -- reading -------------------------------------------------------------------

    def agent(self, name: str) -> Agent:
        """The agent called ``name``.

        Raises:
            AgentNotFoundError: There is none.
        """
        found = self.agents.get(name)
        if found is None:
            raise _not_found(name)
        return found

    async def records(self) -> list[AgentRecord]:
        """Every agent's row, by name, with when it runs next."""
        return [self._record(row) for row in await self._rows()]

    async def record(self, name: str) -> AgentRecord:
        """One agent's row.

        Raises:
            AgentNotFoundError: There is none.
        """
        return self._record(await self._row(name))

    def _record(self, row: Mapping[str, Any]) -> AgentRecord:
        return AgentRecord.model_validate(
            {**row, "next_run_at": self.cron.next_run_at(row["name"])}
        )

    async def _rows(self, name: str | None = None) -> list[dict[str, Any]]:
        query = sa.select(agents_table).order_by(agents_table.c.name)
        if name is not None:
            query = query.where(agents_table.c.name == name)
        async with self.db.read() as conn:
            return [dict(row._mapping) for row in await conn.execute(query)]

    async def _row(self, name: str) -> dict[str, Any]:
        found = await self._rows(name)
        if not found:
            raise _not_found(name)
        return found[0]

    # -- changing ------------------------------------------------------------------

    async def create(self, definition: AgentDefinition) -> AgentRecord:
        """Store a new agent defined by its row, and start it (schedule, reactions).

        Raises:
            AgentConfigError: The definition is invalid (the message names the field).
            AgentConflictError: An agent of that name exists.
        """
        name = definition.name
        fields = definition.model_dump(exclude={"name", "enabled"})
        built = build_agent(name, fields)
        row = check_definition(name, fields)
        now = datetime.now(UTC)
        async with self.db.write() as conn:
            taken = await conn.scalar(
                sa.select(agents_table.c.name).where(agents_table.c.name == name)
            )
            if taken is not None:
                raise AgentConflictError(
                    f"An agent named {name!r} exists already; change it with PATCH "
                    f"/api/agents/{name}, or choose another name."
                )
            await conn.execute(
                agents_table.insert().values(
                    name=name,
                    enabled=definition.enabled,
                    defined_in="database",
                    created_at=now,
                    updated_at=now,
                    **row,
                )
            )
        await self._apply(name, built, "new")
        return await self.record(name)

    async def update(self, name: str, changes: AgentChanges) -> AgentRecord:
        """Change an agent's row and apply it at once (its schedule, its reactions).

        Raises:
            AgentNotFoundError: There is no such agent.
            AgentConflictError: It is defined in code and the change is to its definition.
            AgentConfigError: The changed definition is invalid (the message names the field).
        """
        given = changes.given()
        current = await self._row(name)
        code = current["defined_in"] == "code"
        if code:
            refused = sorted(set(given) - SCHEDULE_FIELDS)
            if refused:
                raise AgentConflictError(
                    f"Agent {name!r} is defined in code: change its {', '.join(refused)} "
                    "there. Through the service only trigger_type, cron_schedule, enabled "
                    "and spend_cap_usd change."
                )
        fields = {key: current[key] for key in DEFINITION_FIELDS}
        fields.update({key: value for key, value in given.items() if key in DEFINITION_FIELDS})
        changed = fields["trigger_type"] != current["trigger_type"]
        if changed and fields["trigger_type"] != "cron" and "cron_schedule" not in given:
            fields["cron_schedule"] = None  # no longer on a schedule: its schedule goes too
        if changed and current["trigger_type"] == "reaction":
            # No longer reacting: what it reacted to goes, and the Changes it answered with.
            if "reaction_config" not in given:
                fields["reaction_config"] = None
            if "output_schema" not in given:
                fields["output_schema"] = None
        if code and changed and "reaction" in (fields["trigger_type"], current["trigger_type"]):
            raise AgentConflictError(
                f"Agent {name!r} is defined in code: whether it reacts to objects is "
                "decided there (reaction=...)."
            )
        row = check_definition(name, fields)
        built = self.code.get(name) if code else build_agent(name, fields)
        enabled = bool(given.get("enabled", current["enabled"]))
        values = {key: row[key] for key in ("trigger_type", "cron_schedule")} if code else row
        if code and {"trigger_type", "cron_schedule"} & set(given):
            values["schedule_source"] = _source(values, current["code_schedule"])
        if given.get("spend_cap_usd") is not None:
            _check_cap(name, built)
        cap = given.get("spend_cap_usd", current["spend_cap_usd"])
        async with self.db.write() as conn:
            await conn.execute(
                agents_table.update()
                .where(agents_table.c.name == name)
                .values(**values, enabled=enabled, spend_cap_usd=cap, updated_at=datetime.now(UTC))
            )
        await self._apply(name, built)
        return await self.record(name)

    async def delete(self, name: str) -> AgentRecord:
        """Delete an agent defined by its row; return its last row.

        Raises:
            AgentNotFoundError: There is no such agent.
            AgentConflictError: It is defined in code (disable it instead).
        """
        current = await self.record(name)
        if current.defined_in == "code":
            raise AgentConflictError(
                f"Agent {name!r} is defined in code, so it comes back at every start: "
                'disable it instead (PATCH {"enabled": false}), or remove it from the code.'
            )
        async with self.db.write() as conn:
            await conn.execute(agents_table.delete().where(agents_table.c.name == name))
        self.agents.pop(name, None)
        self.enabled.pop(name, None)
        await self._apply(name, None, "gone")
        return current.model_copy(update={"next_run_at": None})

    async def _apply(self, name: str, agent: Agent | None, how: Reacting = "keep") -> None:
        """Make the running service follow a row: its schedule and its reactions.

        ``agent`` is ``None`` for a deleted agent; a disabled one stays known, idle.
        """
        rows = await self._rows(name)
        if rows:
            if agent is not None:
                self.agents[name] = agent
            self.enabled[name] = bool(rows[0]["enabled"])
            self._schedule(rows[0])
        else:
            self.cron.set(name, None)
        on = agent is not None and agent.reaction is not None and self.enabled.get(name, False)
        await self._set_reaction(name, agent if on else None, how)


def _check_cap(name: str, agent: Agent | None) -> None:
    """An admin's cap goes over an agent's ``SpendCap(scope="agent")``: it must have one."""
    admit = agent.reaction.admit if agent is not None and agent.reaction is not None else ()
    if not any(isinstance(policy, SpendCap) and policy.scope == "agent" for policy in admit):
        raise AgentConfigError(
            f"Agent {name!r}: spend_cap_usd: it has no SpendCap(scope='agent') in its "
            "reaction's admit=, so there is no cap to change; add one (in code, or in "
            'reaction_config "admit") first.',
            agent=name,
        )


def _source(schedule: Mapping[str, Any], coded: str | None) -> str:
    """``code`` when a code agent's schedule is the code's again, else ``api``."""
    same = schedule["cron_schedule"] == coded
    return "code" if same and (schedule["trigger_type"] == "cron") == (coded is not None) else "api"


def _not_found(name: str) -> AgentNotFoundError:
    return AgentNotFoundError(
        f"No agent named {name!r}; list the agents with GET /api/agents (or define one "
        "with POST /api/agents).",
        agent=name,
    )
