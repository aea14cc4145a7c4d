"""Agents: what activates them, when they may run, what they do and produce."""

from __future__ import annotations

import dataclasses
import difflib
import inspect
import re
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Literal, Never, get_args

import pydantic
from typing_extensions import Unpack

from reactor._agents.admission import AdmissionPolicy, admission, key_of
from reactor._agents.budget import Budget
from reactor._agents.check import Checks, check_name, compile_guard, definition_error
from reactor._agents.output import OutputSpec
from reactor._agents.reaction import MODES, Approval, Capabilities, ExecutionMode, Reaction
from reactor._agents.schedule import check_schedule
from reactor._agents.skills import Skill
from reactor._agents.templates import Expression, Template, compile_template
from reactor._prompts.prompt import Prompt, PromptOverrides, agent_settings
from reactor._prompts.prompting import run_prompt
from reactor._providers.hooks import NO_HOOKS, Hooks, shorthand_hooks
from reactor._providers.mcp import MCPServer
from reactor._providers.tools import Tool, tools_of
from reactor._signals.names import HARNESS_START
from reactor._signals.patterns import Pattern, normalize_patterns, validate_name
from reactor.exceptions import AgentConfigError, PatternError, SignalNameError

if TYPE_CHECKING:
    from reactor._agents.context import AgentContext
    from reactor._providers.base import Provider
    from reactor._providers.toolrun import AfterTool, BeforeTool

__all__ = ["Agent", "Concurrency", "agent", "definition_error"]

Concurrency = Literal["parallel", "serial", "skip", "latest"]
_CONCURRENCY: tuple[str, ...] = get_args(Concurrency)
_NAME = re.compile(r"^[^\s:*]+$")


@dataclasses.dataclass(frozen=True, eq=False)
class Agent:
    """An agent definition; create one with :func:`agent`.

    Immutable: :meth:`named` returns a renamed copy (``reactive()`` uses it to name
    agents after their keys). Besides taking part in graphs, an agent answers
    questions on its own: :meth:`prompt` and :meth:`reflect`, in a run's handler or
    anywhere else.
    """

    name: str | None
    prompt_text: str | None
    system: str | None
    run: Callable[[AgentContext[Any]], Any] | None
    activate_on: tuple[Pattern, ...]
    emits: tuple[str, ...]
    when: Callable[[AgentContext[Any]], Any] | str | None
    output: Any
    output_retries: int
    updates: str | None
    on_output: Callable[[AgentContext[Any], Any], Any] | None
    provider: Provider | None
    tools: tuple[Tool, ...]
    concurrency: Concurrency
    max_activations: int | None
    options: Mapping[str, Any]
    before_tool: BeforeTool | None = None
    after_tool: AfterTool | None = None
    writes: tuple[str, ...] = ()
    reaction: Reaction | None = None
    execution_mode: ExecutionMode = "suggest"
    capabilities: Capabilities = dataclasses.field(default_factory=Capabilities)
    approval: Approval = dataclasses.field(default_factory=Approval)
    ask: str | None = None
    choices: tuple[str, ...] | None = None
    prompt_template: Template | None = dataclasses.field(repr=False, default=None)
    ask_template: Template | None = dataclasses.field(repr=False, default=None)
    system_template: Template | None = dataclasses.field(repr=False, default=None)
    when_expression: Expression | None = dataclasses.field(repr=False, default=None)
    output_spec: OutputSpec | None = dataclasses.field(repr=False, default=None)
    problems: tuple[str, ...] = dataclasses.field(repr=False, default=())
    mcps: tuple[MCPServer, ...] = ()
    skills: tuple[Skill, ...] = ()
    hooks: Hooks = NO_HOOKS
    env: Mapping[str, str] = dataclasses.field(default_factory=dict)
    enable_cache: bool = False
    enable_reflection: bool = False
    max_reflections: int = 1
    budget: Budget | None = None
    schedule: str | None = None
    admit: tuple[AdmissionPolicy, ...] = ()

    async def prompt(self, prompt: Prompt | str, /, **overrides: Unpack[PromptOverrides]) -> Any:
        """Ask this agent's model one question and return the typed answer.

        Settings merge as **prompt fields > call overrides > agent config**; the answer
        is validated against the prompt's ``response_format`` (else the agent's
        ``output``), invalid answers are sent back with the errors (``output_retries``
        times), and with reflection on the model checks its answer. In a run's handler
        the call streams through the run (recorded, replayed, counted); elsewhere it
        calls the provider directly (``reactor.trace()`` collects its signals).

        Args:
            prompt: A :class:`~reactor.Prompt`, or the user message as a string.
            **overrides: ``system``, ``tools``, ``mcps``, ``skills``, ``hooks``,
                ``temperature``, ``max_tokens``, ``stop``, ``model``, ``disable_cache``,
                ``enable_reflection``, ``max_reflections``, ``env``.

        Raises:
            NoProviderError: Neither the agent nor the run has a provider.
            OutputValidationError: No answer matched the response format.
            ProviderError: The model call failed.
            MCPServerError: An MCP server failed to start.
            TypeError: An unknown override.
        """
        return await run_prompt(self, prompt, overrides)

    async def reflect(self, prompt: Prompt | str, /, **overrides: Unpack[PromptOverrides]) -> Any:
        """:meth:`prompt`, then ask the model to check and correct its answer.

        At most ``max_reflections`` rounds; each emits ``reflection:start`` and
        ``reflection:end {success, changed}``.
        """
        return await run_prompt(self, prompt, overrides, force_reflection=True)

    @property
    def output_schema(self) -> dict[str, Any] | None:
        """The JSON schema models are asked to answer in, when there is an ``output``."""
        return self.output_spec.schema if self.output_spec is not None else None

    @property
    def is_llm(self) -> bool:
        """Whether the agent runs a prompt through a provider when it is activated."""
        return self.prompt_text is not None

    def named(self, name: str) -> Agent:
        """Return this agent with ``name``.

        Raises:
            AgentConfigError: The name is invalid, or the definition had problems (an
                unnamed agent reports them when it is named).
        """
        check_name(name)
        if self.problems:
            raise definition_error(name, self.problems)
        return dataclasses.replace(self, name=name)

    def __repr__(self) -> str:
        kind = (
            "prompt"
            if self.is_llm
            else "ask"
            if self.ask is not None
            else "run"
            if self.run is not None
            else "object"
        )
        return (
            f"<Agent {self.name or '(unnamed)'} {kind} activate_on={list(self.activate_on)!r}"
            f" emits={list(self.emits)!r}>"
        )


def agent(
    *,
    name: str | None = None,
    prompt: str | None = None,
    system: str | None = None,
    run: Callable[[AgentContext[Any]], Any] | None = None,
    activate_on: Pattern | Iterable[Pattern] = (HARNESS_START,),
    emits: str | Iterable[str] = (),
    when: Callable[[AgentContext[Any]], Any] | str | None = None,
    output: type[pydantic.BaseModel] | None = None,
    output_retries: int = 2,
    updates: str | None = None,
    on_output: Callable[[AgentContext[Any], Any], Any] | None = None,
    provider: Provider | None = None,
    tools: Iterable[Tool | Callable[..., Any]] = (),
    concurrency: Concurrency = "parallel",
    max_activations: int | None = None,
    options: Mapping[str, Any] | None = None,
    before_tool: BeforeTool | None = None,
    after_tool: AfterTool | None = None,
    writes: str | Iterable[str] = (),
    reaction: Reaction | None = None,
    execution_mode: ExecutionMode = "suggest",
    capabilities: Capabilities | None = None,
    approval: Approval | None = None,
    ask: str | None = None,
    choices: Iterable[str] | None = None,
    mcps: Iterable[MCPServer] = (),
    skills: Iterable[Skill | str] = (),
    hooks: Hooks | None = None,
    env: Mapping[str, str] | None = None,
    enable_cache: bool = False,
    enable_reflection: bool = False,
    max_reflections: int = 1,
    budget: Budget | None = None,
    schedule: str | None = None,
    admit: AdmissionPolicy | Iterable[AdmissionPolicy] | None = None,
    **unknown: Never,
) -> Agent:
    """Define an agent.

    An agent is an LLM agent (``prompt``, run through a provider), a handler agent
    (``run=fn(ctx)``, sync or async, deterministic, no provider), or an agent a person
    answers (``ask``). An agent with none of the three is not for graphs: it answers
    questions on its own, with ``agent.prompt()``.

    Args:
        name: Its name; defaults to its key in ``reactive(agents={...})``.
        prompt: Jinja2 template of the prompt (``state``, ``input``, ``signal``,
            ``agent``, ``run_id`` are available); compiled now, rendered strictly.
        system: Jinja2 template of the system prompt.
        run: A handler ``fn(ctx) -> output`` instead of a prompt.
        activate_on: Signal patterns that activate it (default ``harness:start``).
        emits: Signals it emits after each successful activation, with its output as
            payload (unless it emitted them itself through ``ctx.emit``). Also the
            declaration the graph is validated and drawn from.
        when: A guard evaluated when the triggering signal is dispatched: ``fn(ctx)``
            or a Jinja2 expression such as ``"state.confidence > 0.8"``.
        output: A pydantic model, or any type pydantic validates (``list[Headline]``):
            the provider is asked for structured output and the answer is validated
            (or, for ``run``, the return value is).
        output_retries: How many times an invalid answer is sent back to the model
            with the validation error before the activation fails.
        updates: A state key the output is written to.
        on_output: ``fn(ctx, output)`` called after ``updates``, sync or async.
        provider: Overrides the run's provider for this agent.
        tools: Functions (or :class:`Tool`) the model may call.
        concurrency: What a trigger arriving while it runs does: ``parallel`` runs
            both, ``serial`` queues it, ``skip`` drops it, ``latest`` keeps only the
            newest queued one.
        max_activations: Activations allowed per run; later triggers are skipped with
            reason ``limit``.
        options: Model options for the provider (``model``, ``max_tokens``, ...).
        before_tool: ``before_tool(call)`` runs before each tool call the model makes;
            return the call (possibly changed) to run it, or ``None`` to block it.
        after_tool: ``after_tool(call, result)`` runs after each tool call; return a
            replacement result, or ``None`` to keep it.
        writes: State keys it writes itself (through ``ctx.store`` or in
            ``on_output``), besides ``updates``: declared so that the graph is
            validated and drawn with them.
        reaction: Makes it a reaction agent, run by :class:`reactor.service.ReactionService`
            when objects of the given types are created, updated or deleted (``ctx.object``
            is the object; templates see it as ``object``).
        execution_mode: What happens to the changes a reaction agent proposes:
            ``suggest`` (stored for a person to approve; the default), ``execute``
            (applied at once) or ``hybrid`` (the output's ``mode`` says).
        capabilities: What it may change (:class:`reactor.service.Capabilities`);
            everything by default.
        approval: Who decides on the changes it suggests, and what a decision must
            carry (:class:`reactor.service.Approval`): by default one ``approver`` (or
            an ``admin``) who did not make the change it reacted to.
        ask: Instead of a prompt or a handler, a question to a person (a Jinja2
            template like ``prompt``): the run emits ``session:prompt`` and waits for
            ``handle.reply``; the answer is the output (validated against ``choices`` or
            ``output``, text otherwise).
        choices: The answers an ``ask`` agent accepts.
        mcps: MCP servers (:class:`~reactor.MCPServer`) whose tools the model may call.
        skills: Skills (:class:`~reactor.Skill` or paths) added to the system prompt.
        hooks: :class:`~reactor.Hooks` on its tool calls and sessions.
        env: Variables its tools read with ``reactor.getenv`` and its stdio MCP servers
            get; never written to ``os.environ``.
        enable_cache: Make the system prompt a prompt-cache breakpoint.
        enable_reflection: After each answer, ask the model to check and correct it.
        max_reflections: How many times it may (with ``enable_reflection``).
        budget: What its model calls may spend in a run (:class:`~reactor.Budget`); a
            call that would start over it is not made and the run fails.
        schedule: A 5-field cron expression (``"*/5 * * * *"``, UTC): a
            :class:`~reactor.service.ReactionService` runs it on that schedule (the
            service's row keeps the code's schedule unless changed over its API).
        admit: Which of its triggers in a run it is given when they come faster than
            it answers: :class:`~reactor.Latest`, :class:`~reactor.Debounce`,
            :class:`~reactor.Throttle`, :class:`~reactor.Batch`,
            :class:`~reactor.SpendCap`, or a tuple of them applied in order. Each
            decision is recorded (``agent:<name>:skipped`` with reason ``superseded``,
            ``merged`` or ``spend_cap``; ``batch`` in ``agent:<name>:activated``), so a
            replay admits the same triggers. A reaction's object events take
            ``Reaction(admit=...)``.
        **unknown: Nothing: a misspelt option (``activateOn=``) is reported with the
            option it probably meant.

    Raises:
        AgentConfigError: The definition is invalid; the message names the agent, lists
            every problem and says how to fix each. An agent without ``name=`` is
            checked the same way, but reports its problems when it is named (by its
            key in ``reactive({...})``), so that the message can say which agent.
    """
    return _define(
        _Given(
            name=name,
            prompt=prompt,
            system=system,
            run=run,
            activate_on=activate_on,
            emits=emits,
            when=when,
            output=output,
            output_retries=output_retries,
            updates=updates,
            on_output=on_output,
            provider=provider,
            tools=tools,
            concurrency=concurrency,
            max_activations=max_activations,
            options=options,
            before_tool=before_tool,
            after_tool=after_tool,
            writes=writes,
            reaction=reaction,
            execution_mode=execution_mode,
            capabilities=capabilities,
            approval=approval,
            ask=ask,
            choices=choices,
            mcps=mcps,
            skills=skills,
            hooks=hooks,
            env=env,
            enable_cache=enable_cache,
            enable_reflection=enable_reflection,
            max_reflections=max_reflections,
            budget=budget,
            schedule=schedule,
            admit=admit,
            unknown=tuple(unknown),
        )
    )


@dataclasses.dataclass(frozen=True)
class _Given:
    """The options :func:`agent` was given, as given (users' code is not always typed)."""

    name: str | None
    prompt: Any
    system: Any
    run: Any
    activate_on: Pattern | Iterable[Pattern]
    emits: str | Iterable[str]
    when: Any
    output: Any
    output_retries: Any
    updates: Any
    on_output: Any
    provider: Any
    tools: Iterable[Tool | Callable[..., Any]]
    concurrency: Any
    max_activations: Any
    options: Mapping[str, Any] | None
    before_tool: Any
    after_tool: Any
    writes: str | Iterable[str]
    reaction: Any
    execution_mode: Any
    capabilities: Any
    approval: Any
    ask: Any
    choices: Iterable[str] | None
    mcps: Iterable[MCPServer]
    skills: Iterable[Skill | str]
    hooks: Hooks | None
    env: Mapping[str, str] | None
    enable_cache: bool
    enable_reflection: bool
    max_reflections: int
    budget: Any
    schedule: str | None
    admit: Any
    unknown: tuple[str, ...]

    @property
    def declared(self) -> tuple[str, ...]:
        """``emits`` as a tuple."""
        return (self.emits,) if isinstance(self.emits, str) else tuple(self.emits)

    @property
    def written(self) -> tuple[str, ...]:
        """``writes`` as a tuple."""
        return (self.writes,) if isinstance(self.writes, str) else tuple(self.writes)

    @property
    def choices_given(self) -> tuple[str, ...] | None:
        """``choices`` as a tuple."""
        return None if self.choices is None else tuple(self.choices)


def _define(given: _Given) -> Agent:
    """Check every option (all problems collected), build what they compile to, make the agent.

    Each step of :data:`_STEPS` checks one option (or a few that go together) and notes
    its problems; a step with a field name also builds that field of the agent (a
    compiled template, the output spec, ...).
    """
    checks = Checks(given.name)
    built: dict[str, Any] = {}
    for field, step in _STEPS:
        value = step(given, checks)
        if field is not None:
            built[field] = value
    checks.raise_if_named()
    extra = built.pop("settings") or {}
    if given.before_tool is not None or given.after_tool is not None:
        hooks = shorthand_hooks(given.before_tool, given.after_tool)
        extra["hooks"] = extra.get("hooks", NO_HOOKS) + hooks
    return Agent(
        name=given.name,
        prompt_text=given.prompt,
        system=given.system,
        run=given.run,
        emits=tuple(dict.fromkeys(given.declared)),
        when=given.when,
        output=given.output,
        output_retries=given.output_retries,
        updates=given.updates,
        on_output=given.on_output,
        provider=given.provider,
        concurrency=given.concurrency,
        max_activations=given.max_activations,
        options=dict(given.options or {}),
        before_tool=given.before_tool,
        after_tool=given.after_tool,
        writes=tuple(dict.fromkeys(given.written)),
        reaction=given.reaction,
        execution_mode=given.execution_mode,
        capabilities=given.capabilities or Capabilities(),
        approval=given.approval or Approval(),
        ask=given.ask,
        choices=given.choices_given,
        problems=tuple(checks.problems),
        budget=given.budget,
        schedule=given.schedule,
        **built,
        **extra,
    )


# -- the steps: each checks an option (and may build a field of the agent) ---------------

_Step = Callable[[_Given, Checks], Any]


def _name(given: _Given, checks: Checks) -> None:
    if given.name is not None:
        checks.name(given.name)


def _unknown(given: _Given, checks: Checks) -> None:
    for option in given.unknown:
        close = difflib.get_close_matches(option, _OPTIONS, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        checks.add(f"unknown option {option!r}; {hint}see help(reactor.agent) for the options.")


def _kind(given: _Given, checks: Checks) -> None:
    kinds = [value for value in (given.prompt, given.run, given.ask) if value is not None]
    if len(kinds) > 1:
        checks.add(
            "give exactly one of prompt= (an LLM agent), run= (a handler function) or "
            "ask= (a question to a person), not several."
        )


def _ask(given: _Given, checks: Checks) -> None:
    if not isinstance(given.ask, str | None):
        checks.add(f"ask must be a template string, got {type(given.ask).__name__}.")
    choices = given.choices_given
    if choices is not None and (
        given.ask is None or not choices or not all(isinstance(c, str) for c in choices)
    ):
        checks.add("choices= is for ask agents: a non-empty list of answers (strings).")


def _prompt(given: _Given, checks: Checks) -> None:
    if not isinstance(given.prompt, str | None):
        checks.add(f"prompt must be a template string, got {type(given.prompt).__name__}.")


def _run(given: _Given, checks: Checks) -> None:
    if given.run is not None and not callable(given.run):
        checks.add(f"run must be a function fn(ctx), got {given.run!r}.")


_MODEL_ONLY = (
    "system",
    "provider",
    "tools",
    "before_tool",
    "after_tool",
    "mcps",
    "skills",
    "hooks",
)
"""Options only an agent that calls a model (a prompt agent) has use for."""


def _model_only(given: _Given, checks: Checks) -> None:
    if given.run is None and given.ask is None:
        return
    for field in _MODEL_ONLY:
        if getattr(given, field):
            checks.add(f"{field}= is for prompt agents; a run= or ask= agent calls no model.")


def _system(given: _Given, checks: Checks) -> None:
    if not isinstance(given.system, str | None):
        checks.add(f"system must be a template string, got {type(given.system).__name__}.")


def _activate_on(given: _Given, checks: Checks) -> tuple[Pattern, ...]:
    patterns = checks.attempt(
        lambda: normalize_patterns(given.activate_on), PatternError, "bad activate_on pattern: "
    )
    return patterns or ()


def _emits(given: _Given, checks: Checks) -> None:
    for emitted in given.declared:
        try:
            validate_name(emitted)
        except SignalNameError as exc:
            checks.add(f"emits must list concrete signal names: {exc}")


def _writes(given: _Given, checks: Checks) -> None:
    for key in given.written:
        if not isinstance(key, str) or not _NAME.match(key):
            checks.add(f"writes must list top-level state keys, got {key!r}.")


def _when(given: _Given, checks: Checks) -> Expression | None:
    return checks.attempt(lambda: compile_guard(given.when, given.name), AgentConfigError, "")


def _output(given: _Given, checks: Checks) -> OutputSpec | None:
    if given.output is None:
        return None
    return checks.attempt(
        lambda: OutputSpec(given.output),
        (TypeError, pydantic.PydanticSchemaGenerationError, pydantic.PydanticUserError),
        "output must be a pydantic model or a type pydantic validates: ",
    )


def _output_retries(given: _Given, checks: Checks) -> None:
    retries = given.output_retries
    if not isinstance(retries, int) or retries < 0:
        checks.add(f"output_retries must be an integer >= 0, got {retries!r}.")


def _updates(given: _Given, checks: Checks) -> None:
    updates = given.updates
    if updates is not None and (not isinstance(updates, str) or not _NAME.match(updates)):
        checks.add(f"updates must name a top-level state key, got {updates!r}.")


def _callables(given: _Given, checks: Checks) -> None:
    for field, hook in (("before_tool", given.before_tool), ("after_tool", given.after_tool)):
        if hook is not None and not callable(hook):
            checks.add(f"{field} must be a function, got {hook!r}.")
    if given.on_output is not None and not callable(given.on_output):
        checks.add(f"on_output must be a function fn(ctx, output), got {given.on_output!r}.")


def _concurrency(given: _Given, checks: Checks) -> None:
    if given.concurrency not in _CONCURRENCY:
        checks.add(
            f"unknown concurrency {given.concurrency!r}; use one of {', '.join(_CONCURRENCY)}."
        )
    most = given.max_activations
    if most is not None and (not isinstance(most, int) or most < 1):
        checks.add(f"max_activations must be None or an integer >= 1, got {most!r}.")


def _provider(given: _Given, checks: Checks) -> None:
    provider = given.provider
    if provider is not None and not callable(getattr(provider, "stream", None)):
        checks.add(f"provider must have a stream(request) method, got {provider!r}.")


def _tools(given: _Given, checks: Checks) -> tuple[Tool, ...]:
    return checks.attempt(lambda: tools_of(given.tools), AgentConfigError, "") or ()


_KINDS: dict[str, tuple[type, str]] = {
    "reaction": (Reaction, "a Reaction(types=..., events=...)"),
    "capabilities": (Capabilities, "a Capabilities(...)"),
    "approval": (Approval, "an Approval(by=..., count=...)"),
    "budget": (Budget, "a Budget(usd=..., model_calls=...)"),
}
"""Options that take one kind of value: its type, and how to write one."""


def _of_kind(field: str) -> _Step:
    """The step that checks option ``field`` is ``None`` or of its kind (:data:`_KINDS`)."""
    kind, example = _KINDS[field]

    def check(given: _Given, checks: Checks) -> None:
        value = getattr(given, field)
        if value is not None and not isinstance(value, kind):
            checks.add(f"{field} must be {example}, got {value!r}.")

    return check


def _execution_mode(given: _Given, checks: Checks) -> None:
    if given.execution_mode not in MODES:
        checks.add(
            f"unknown execution_mode {given.execution_mode!r}; use one of {', '.join(MODES)}."
        )


def _schedule(given: _Given, checks: Checks) -> None:
    schedule = given.schedule
    if schedule is not None:
        checks.attempt(lambda: check_schedule(schedule, given.reaction), ValueError, "")


def _admit(given: _Given, checks: Checks) -> tuple[AdmissionPolicy, ...]:
    return checks.attempt(lambda: admitted(given.admit, given.name), AgentConfigError, "") or ()


def _settings(given: _Given, checks: Checks) -> dict[str, Any] | None:
    return checks.attempt(
        lambda: agent_settings(
            given.mcps,
            given.skills,
            given.hooks,
            given.env,
            given.enable_cache,
            given.enable_reflection,
            given.max_reflections,
        ),
        (AgentConfigError, TypeError),
        "",
    )


def _template(field: str) -> _Step:
    """The step that compiles the template option ``field`` (when it is a string)."""

    def compile_it(given: _Given, checks: Checks) -> Template | None:
        text = getattr(given, field)
        if not isinstance(text, str):
            return None
        return checks.attempt(
            lambda: compile_template(text, agent=given.name, field=field), AgentConfigError, ""
        )

    return compile_it


_STEPS: tuple[tuple[str | None, _Step], ...] = (
    (None, _name),
    (None, _unknown),
    (None, _kind),
    (None, _ask),
    (None, _prompt),
    (None, _run),
    (None, _model_only),
    (None, _system),
    ("activate_on", _activate_on),
    (None, _emits),
    (None, _writes),
    ("when_expression", _when),
    ("output_spec", _output),
    (None, _output_retries),
    (None, _updates),
    (None, _callables),
    (None, _concurrency),
    (None, _provider),
    ("tools", _tools),
    (None, _of_kind("reaction")),
    (None, _execution_mode),
    (None, _of_kind("capabilities")),
    (None, _of_kind("approval")),
    (None, _of_kind("budget")),
    (None, _schedule),
    ("admit", _admit),
    ("settings", _settings),
    ("prompt_template", _template("prompt")),
    ("system_template", _template("system")),
    ("ask_template", _template("ask")),
)
"""What :func:`agent` checks, in the order its problems are reported: ``(field, step)``.

A step with a field builds that field of :class:`Agent` (``settings``: the prompt
settings, several fields); the others only check."""


def admitted(admit: Any, name: str | None) -> tuple[AdmissionPolicy, ...]:
    """``admit=`` as policies, their template keys compiled (a syntax error is reported now).

    Raises:
        AgentConfigError: Something in it is not a policy, a kind comes twice, or a key
            template does not compile.
    """
    policies = admission(admit, where="admit=")
    for policy in policies:
        key = key_of(policy)
        if isinstance(key, str):
            compile_template(key, agent=name, field="admission key")
    return policies


_OPTIONS = tuple(inspect.signature(agent).parameters)[:-1]
"""agent()'s options, for did-you-mean hints."""
