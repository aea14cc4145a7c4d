"""Agents as rows of ``agents``: what the HTTP API reads and writes, checked like code.

A prompt agent can live entirely in its row (``defined_in = "database"``): its
``prompt``, ``role`` (the system prompt), ``trigger_type``, ``cron_schedule``,
``reaction_config``, ``execution_mode``, ``capabilities``, ``approval`` and ``output_schema``
become an :func:`reactor.agent` when the service loads it. Every definition is checked
before it is stored, and each problem is an :class:`~reactor.exceptions.AgentConfigError`
naming the field to fix (the API answers it with a 422).
"""

from __future__ import annotations

import copy
from datetime import datetime
from typing import Annotated, Any, Literal

import pydantic
from pydantic_core import core_schema as cs

from reactor._agents.agent import Agent, agent
from reactor._agents.reaction import Approval, Capabilities, ExecutionMode, Reaction
from reactor.exceptions import AgentConfigError, TemplateError, TemplateSecurityError
from reactor.service._objects.changes import Changes
from reactor.service._objects.values import NAME_LENGTH
from reactor.service._reactions.cron import cron_problem

__all__ = [
    "DEFINITION_FIELDS",
    "AgentChanges",
    "AgentDefinition",
    "AgentRecord",
    "TriggerType",
    "build_agent",
    "check_definition",
]

TriggerType = Literal["manual", "cron", "reaction"]

DEFINITION_FIELDS = (
    "prompt",
    "role",
    "trigger_type",
    "cron_schedule",
    "reaction_config",
    "execution_mode",
    "capabilities",
    "approval",
    "output_schema",
)
"""The columns that define an agent (besides its name and its ``enabled`` switch)."""

SCHEDULE_FIELDS = frozenset({"trigger_type", "cron_schedule", "enabled", "spend_cap_usd"})
"""What may change on an agent defined in code: when it runs and what it may spend, not
what it is."""

SpendCapUsd = Annotated[float, pydantic.Field(gt=0, allow_inf_nan=False)]
"""An admin's spend cap: US dollars above 0."""


class AgentDefinition(pydantic.BaseModel):
    """A prompt agent defined by its row (``POST /api/agents``).

    Attributes:
        name: Its name (no ``:``, ``*`` or whitespace: it appears in signal names).
        prompt: The prompt, a Jinja2 template (``input``; ``object`` for reactions).
        role: The system prompt, a Jinja2 template.
        trigger_type: ``manual`` (started through the API), ``cron`` (on
            ``cron_schedule``) or ``reaction`` (when objects change, per
            ``reaction_config``).
        cron_schedule: A 5-field cron expression, in UTC (cron agents only).
        reaction_config: ``{types, events, ignore_self, concurrency}`` (reaction agents
            only; required for them).
        execution_mode: What becomes of a reaction agent's changes: ``suggest``,
            ``execute`` or ``hybrid``.
        capabilities: ``{can_create, can_update, can_delete, allowed_types}``.
        approval: Who decides on its suggestions: ``{by, count, distinct_from_proposer,
            expires_after, justification}`` (``expires_after`` in seconds or as an
            ISO 8601 duration); omitted, ``Approval()``.
        output_schema: The JSON schema (an object) of the answer; a reaction agent
            answers with ``Changes`` and takes none.
        enabled: Whether it runs.
    """

    model_config = pydantic.ConfigDict(extra="forbid")

    name: str = pydantic.Field(min_length=1, max_length=NAME_LENGTH)
    prompt: str = pydantic.Field(min_length=1)
    role: str | None = None
    trigger_type: TriggerType = "manual"
    cron_schedule: str | None = pydantic.Field(default=None, max_length=NAME_LENGTH)
    reaction_config: dict[str, Any] | None = None
    execution_mode: ExecutionMode = "suggest"
    capabilities: dict[str, Any] | None = None
    approval: dict[str, Any] | None = None
    output_schema: dict[str, Any] | None = None
    enabled: bool = True


class AgentChanges(pydantic.BaseModel):
    """Changes to an agent's row (``PATCH /api/agents/{name}``): only the fields given.

    An agent defined in code takes only ``enabled``, ``cron_schedule``,
    ``trigger_type`` (``manual`` or ``cron``) and ``spend_cap_usd``; its definition stays
    in code. ``spend_cap_usd`` (an admin's cap over the agent's
    ``SpendCap(scope="agent")``, ``null`` to go back to the policy's) takes effect at
    the agent's next admission, in every process: entries it held go on when it is raised.
    """

    model_config = pydantic.ConfigDict(extra="forbid")

    prompt: str | None = pydantic.Field(default=None, min_length=1)
    role: str | None = None
    trigger_type: TriggerType | None = None
    cron_schedule: str | None = pydantic.Field(default=None, max_length=NAME_LENGTH)
    reaction_config: dict[str, Any] | None = None
    execution_mode: ExecutionMode | None = None
    capabilities: dict[str, Any] | None = None
    approval: dict[str, Any] | None = None
    output_schema: dict[str, Any] | None = None
    enabled: bool | None = None
    spend_cap_usd: SpendCapUsd | None = None

    def given(self) -> dict[str, Any]:
        """The fields the request set (``null`` included: it clears a field)."""
        return {name: getattr(self, name) for name in sorted(self.model_fields_set)}


class AgentRecord(pydantic.BaseModel):
    """An agent as the API shows it: its row, and when its schedule runs it next.

    Attributes:
        defined_in: ``code`` (registered by name) or ``database`` (by its row).
        next_run_at: When the scheduler runs it next (UTC), ``None`` when it is not
            scheduled (not a cron agent, disabled, or the service is stopping).
        schedule_source: Of an agent defined in code: whether its schedule is the
            code's (``code``) or was changed over the API (``api``, kept across
            restarts until the code's schedule changes).
        code_schedule: Of an agent defined in code: the schedule its code gives.
        spend_cap_usd: An admin's cap over its ``SpendCap(scope="agent")`` (``None``:
            the policy's own).
    """

    name: str
    prompt: str | None
    role: str | None
    trigger_type: TriggerType
    cron_schedule: str | None
    reaction_config: dict[str, Any] | None
    execution_mode: ExecutionMode
    capabilities: dict[str, Any]
    approval: dict[str, Any] | None = None
    output_schema: dict[str, Any] | None
    enabled: bool
    defined_in: Literal["code", "database"]
    created_at: datetime
    updated_at: datetime
    next_run_at: datetime | None = None
    schedule_source: Literal["code", "api"] | None = None
    code_schedule: str | None = None
    spend_cap_usd: float | None = None


def _problem(name: str, field: str, message: str) -> AgentConfigError:
    return AgentConfigError(f"Agent {name!r}: {field}: {message}", agent=name)


def check_definition(name: str, fields: dict[str, Any]) -> dict[str, Any]:
    """Check a whole definition (a row's columns); return them as they are stored.

    Raises:
        AgentConfigError: A field is missing or invalid; the message names it.
    """
    row = dict(fields)
    trigger = row.get("trigger_type") or "manual"
    schedule = row.get("cron_schedule")
    if trigger == "cron":
        problem = cron_problem(schedule) if schedule is not None else None
        if schedule is None:
            raise _problem(
                name, "cron_schedule", "a cron agent needs a schedule, e.g. '*/5 * * * *'."
            )
        if problem is not None:
            raise _problem(name, "cron_schedule", f"{problem}.")
    elif schedule is not None:
        raise _problem(
            name,
            "cron_schedule",
            f"only cron agents run on a schedule; set trigger_type to 'cron' (it is {trigger!r}) "
            "or leave cron_schedule null.",
        )
    config = row.get("reaction_config")
    if trigger == "reaction":
        if config is None:
            raise _problem(
                name,
                "reaction_config",
                'a reaction agent needs reaction_config, e.g. {"types": ["Person"], '
                '"events": ["created"]}.',
            )
        try:
            row["reaction_config"] = Reaction.from_config(config).model_dump(mode="json")
        except AgentConfigError as exc:
            raise _problem(name, "reaction_config", str(exc)) from None
        if row.get("output_schema") not in (None, _CHANGES_SCHEMA):
            raise _problem(
                name,
                "output_schema",
                "a reaction agent answers with Changes (reasoning and operations); leave "
                "output_schema null.",
            )
        row["output_schema"] = _CHANGES_SCHEMA
    elif config is not None:
        raise _problem(
            name,
            "reaction_config",
            f"only reaction agents react to objects; set trigger_type to 'reaction' (it is "
            f"{trigger!r}) or leave reaction_config null.",
        )
    for field, kind in (("capabilities", Capabilities), ("approval", Approval)):
        row[field] = _checked(name, field, kind, row.get(field)).model_dump(mode="json")
    schema = row.get("output_schema")
    if trigger != "reaction" and schema is not None and schema.get("type") != "object":
        raise _problem(
            name,
            "output_schema",
            'it must be the JSON schema of an object, e.g. {"type": "object", "properties": '
            '{"summary": {"type": "string"}}, "required": ["summary"]}.',
        )
    row["trigger_type"] = trigger
    return row


def _checked(
    name: str, field: str, kind: type[Capabilities] | type[Approval], config: Any
) -> Capabilities | Approval:
    """A ``capabilities`` or ``approval`` column as its value (``null``: the default)."""
    try:
        return kind.from_config(config or {})
    except AgentConfigError as exc:
        raise _problem(name, field, str(exc)) from None


def build_agent(name: str, row: dict[str, Any]) -> Agent:
    """The agent a database row defines.

    Raises:
        AgentConfigError: The row does not define a valid agent (the message names
            the field).
    """
    row = check_definition(name, row)
    prompt = row.get("prompt")
    if not prompt:
        raise _problem(name, "prompt", "an agent defined by its row needs a prompt.")
    reaction = row.get("reaction_config")
    schema = row.get("output_schema")
    output: type[pydantic.BaseModel] | None
    if reaction is not None:
        output = Changes
    else:
        output = _schema_output(name, schema) if schema is not None else None
    try:
        return agent(
            name=name,
            prompt=prompt,
            system=row.get("role"),
            output=output,
            reaction=Reaction.from_config(reaction) if reaction is not None else None,
            execution_mode=row.get("execution_mode") or "suggest",
            capabilities=Capabilities.from_config(row["capabilities"]),
            approval=Approval.from_config(row["approval"]),
        )
    except TemplateSecurityError as exc:
        field = "role" if " the system " in str(exc) else "prompt"
        raise TemplateSecurityError(
            f"Agent {name!r}: {field}: {exc}", agent=name, path=exc.path
        ) from None
    except TemplateError as exc:
        raise _problem(name, "prompt", f"{exc}") from None
    except AgentConfigError as exc:
        field = "role" if "system" in str(exc) else "prompt"
        raise _problem(name, field, f"{exc}") from None


def _schema_output(name: str, schema: dict[str, Any]) -> type[pydantic.BaseModel]:
    """An output type whose JSON schema is ``schema``: a JSON object with its required keys."""
    required = [key for key in schema.get("required", ()) if isinstance(key, str)]
    shown = copy.deepcopy(schema)

    class Output(pydantic.RootModel[dict[str, Any]]):
        @pydantic.model_validator(mode="after")
        def _required(self) -> Output:
            missing = [key for key in required if key not in self.root]
            if missing:
                raise ValueError(f"the answer lacks the required field(s) {', '.join(missing)}")
            return self

        @classmethod
        def __get_pydantic_json_schema__(
            cls, core_schema: cs.CoreSchema, handler: pydantic.GetJsonSchemaHandler
        ) -> dict[str, Any]:
            return copy.deepcopy(shown)

    Output.__name__ = Output.__qualname__ = str(schema.get("title") or f"{name}_output")
    return Output


_CHANGES_SCHEMA: dict[str, Any] = pydantic.TypeAdapter(Changes).json_schema()
"""What reaction agents answer with: the ``output_schema`` of their rows."""
