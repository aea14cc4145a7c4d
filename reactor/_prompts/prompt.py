"""Prompts as values: :class:`Prompt`, and the settings a prompt may override."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypedDict

import pydantic

from reactor._agents.output import OutputSpec, summarize_errors
from reactor._agents.skills import Skill
from reactor._agents.templates import Template, compile_template, render
from reactor._providers.hooks import Hooks
from reactor._providers.mcp import MCPServer
from reactor._providers.tools import Tool, tools_of
from reactor.exceptions import AgentConfigError, OutputValidationError

if TYPE_CHECKING:
    from reactor._providers.base import Provider

__all__ = ["Prompt", "PromptOverrides", "PromptingAgent", "agent_settings", "skills_of"]


class PromptOverrides(TypedDict, total=False):
    """What one ``agent.prompt()`` call may override (a prompt's own fields win)."""

    system: str
    tools: Sequence[Tool | Callable[..., Any]]
    mcps: Sequence[MCPServer]
    skills: Sequence[Skill | str]
    hooks: Hooks
    temperature: float
    max_tokens: int
    stop: str | Sequence[str]
    model: str
    disable_cache: bool
    enable_reflection: bool
    max_reflections: int
    env: Mapping[str, str]


def agent_settings(
    mcps: Any,
    skills: Any,
    hooks: Any,
    env: Any,
    enable_cache: Any,
    enable_reflection: Any,
    max_reflections: Any,
) -> dict[str, Any]:
    """An agent's settings for prompts, checked (``agent()`` calls it).

    Raises:
        AgentConfigError: A setting has the wrong type (a skill's own problems too).
    """
    servers = tuple(mcps or ())
    for server in servers:
        if not isinstance(server, MCPServer):
            raise AgentConfigError(f"mcps must list MCPServer(...) values, got {server!r}.")
    if hooks is not None and not isinstance(hooks, Hooks):
        raise AgentConfigError(f"hooks must be a Hooks(...), got {hooks!r}.")
    if env is not None and (
        not isinstance(env, Mapping)
        or not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items())
    ):
        raise AgentConfigError(f"env must map names to strings, got {env!r}.")
    for field, flag in (("enable_cache", enable_cache), ("enable_reflection", enable_reflection)):
        if not isinstance(flag, bool):
            raise AgentConfigError(f"{field} must be True or False, got {flag!r}.")
    if not isinstance(max_reflections, int) or max_reflections < 1:
        raise AgentConfigError(f"max_reflections must be an integer >= 1, got {max_reflections!r}.")
    settings: dict[str, Any] = {
        "mcps": servers,
        "skills": skills_of(skills),
        "env": dict(env or {}),
        "enable_cache": enable_cache,
        "enable_reflection": enable_reflection,
        "max_reflections": max_reflections,
    }
    if hooks is not None:
        settings["hooks"] = hooks
    return settings


class Prompt(pydantic.BaseModel):
    """A question for an agent, as an immutable value: ``agent.prompt(Prompt(...))``.

    Args:
        user: The user message, a Jinja2 template over ``data`` (strict: a missing
            variable is an error, never an empty string).
        data: The template's variables.
        response_format: A pydantic model (or any type pydantic validates) the answer
            must match; ``agent.prompt`` returns an instance. Without one, the answer
            is the model's text.
        system: Overrides the system prompt (a template over ``data`` too).
        tools: Overrides the tools (functions or :class:`~reactor.Tool`).
        mcps: Overrides the MCP servers.
        skills: Overrides the skills (:class:`~reactor.Skill` or paths).
        hooks: Overrides the hooks.
        enable_reflection: Overrides whether the model checks its answer.

    Its fields win over ``agent.prompt``'s overrides, which win over the agent's
    configuration.

    Raises:
        pydantic.ValidationError: A field has the wrong type, the template has a
            syntax error, or pydantic cannot validate ``response_format``.
    """

    model_config = pydantic.ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    user: str
    data: Mapping[str, Any] = pydantic.Field(default_factory=dict)
    response_format: Any = None
    system: str | None = None
    tools: tuple[Tool, ...] | None = None
    mcps: tuple[MCPServer, ...] | None = None
    skills: tuple[Skill, ...] | None = None
    hooks: Hooks | None = None
    enable_reflection: bool | None = None
    _template: Template = pydantic.PrivateAttr()
    _spec: OutputSpec | None = pydantic.PrivateAttr(default=None)

    @pydantic.field_validator("tools", mode="before")
    @classmethod
    def _tools(cls, value: Any) -> Any:
        return None if value is None else tools_of(value)

    @pydantic.field_validator("skills", mode="before")
    @classmethod
    def _skills(cls, value: Any) -> Any:
        return None if value is None else skills_of(value)

    def model_post_init(self, context: Any, /) -> None:
        """Compile the template and the response format once."""
        self._template = compile_template(self.user, agent=None, field="user prompt")
        if self.response_format is not None:
            self._spec = OutputSpec(self.response_format)

    @property
    def spec(self) -> OutputSpec | None:
        """The response format's validator (``None`` for text)."""
        return self._spec

    def render(self, **names: Any) -> str:
        """The user message: the template rendered with ``data`` (and ``names``)."""
        agent = str(names.get("agent", "prompt"))
        return str(render(self._template, {**names, **self.data}, agent=agent, field="user prompt"))

    def validate_response(self, response: Any) -> Any:
        """Check an answer against ``response_format`` and return it typed.

        The answer may be an instance, JSON data or JSON text; without a response
        format it is returned as it is.

        Raises:
            OutputValidationError: It does not match (the message says where).
        """
        if self._spec is None:
            return response
        try:
            return self._spec.validate(response)
        except pydantic.ValidationError as exc:
            raise OutputValidationError(
                f"The response does not match {self._spec.name}: {summarize_errors(exc)}.",
                output=response,
                errors=[dict(e) for e in exc.errors(include_url=False)],
            ) from exc


def skills_of(values: Any) -> tuple[Skill, ...]:
    """Skills from :class:`Skill` values or paths."""
    return tuple(value if isinstance(value, Skill) else Skill(value) for value in values or ())


class PromptingAgent(Protocol):
    """What ``prompt()`` reads of an agent (:class:`reactor.Agent`)."""

    @property
    def name(self) -> str | None:
        """Its name."""
        ...

    @property
    def provider(self) -> Provider | None:
        """Its own provider."""
        ...

    @property
    def system(self) -> str | None:
        """Its system prompt template."""
        ...

    @property
    def system_template(self) -> Template | None:
        """The same, compiled."""
        ...

    @property
    def tools(self) -> tuple[Tool, ...]:
        """Its Python tools."""
        ...

    @property
    def mcps(self) -> tuple[MCPServer, ...]:
        """Its MCP servers."""
        ...

    @property
    def skills(self) -> tuple[Skill, ...]:
        """Its skills."""
        ...

    @property
    def hooks(self) -> Hooks:
        """Its hooks."""
        ...

    @property
    def env(self) -> Mapping[str, str]:
        """Its environment overlay."""
        ...

    @property
    def options(self) -> Mapping[str, Any]:
        """Its model options."""
        ...

    @property
    def output_spec(self) -> OutputSpec | None:
        """Its output type."""
        ...

    @property
    def output_retries(self) -> int:
        """How often an invalid answer is sent back."""
        ...

    @property
    def enable_cache(self) -> bool:
        """Whether the system prompt is cached."""
        ...

    @property
    def enable_reflection(self) -> bool:
        """Whether answers are checked."""
        ...

    @property
    def max_reflections(self) -> int:
        """How many checks at most."""
        ...
