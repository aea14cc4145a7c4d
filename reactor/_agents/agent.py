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
from reactor._agents.check import Checks, check_name, compile_guard, definition_error, given
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
    checks = Checks(name)
    if name is not None:
        checks.name(name)
    for option in unknown:
        close = difflib.get_close_matches(option, _OPTIONS, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        checks.add(f"unknown option {option!r}; {hint}see help(reactor.agent) for the options.")
    kinds = [value for value in (prompt, run, ask) if value is not None]
    if len(kinds) > 1:
        checks.add(
            "give exactly one of prompt= (an LLM agent), run= (a handler function) or "
            "ask= (a question to a person), not several."
        )
    if not isinstance(given(ask), str | None):
        checks.add(f"ask must be a template string, got {type(ask).__name__}.")
    options_given = None if choices is None else tuple(choices)
    if options_given is not None and (
        ask is None or not options_given or not all(isinstance(c, str) for c in options_given)
    ):
        checks.add("choices= is for ask agents: a non-empty list of answers (strings).")
    if not isinstance(given(prompt), str | None):
        checks.add(f"prompt must be a template string, got {type(prompt).__name__}.")
    if run is not None and not callable(given(run)):
        checks.add(f"run must be a function fn(ctx), got {run!r}.")
    if run is not None or ask is not None:
        for field, value in (
            ("system", system),
            ("provider", provider),
            ("tools", tools),
            ("before_tool", before_tool),
            ("after_tool", after_tool),
            ("mcps", mcps),
            ("skills", skills),
            ("hooks", hooks),
        ):
            if value:
                checks.add(f"{field}= is for prompt agents; a run= or ask= agent calls no model.")
    if not isinstance(given(system), str | None):
        checks.add(f"system must be a template string, got {type(system).__name__}.")
    patterns = checks.attempt(
        lambda: normalize_patterns(activate_on), PatternError, "bad activate_on pattern: "
    )
    declared = (emits,) if isinstance(emits, str) else tuple(emits)
    for emitted in declared:
        try:
            validate_name(emitted)
        except SignalNameError as exc:
            checks.add(f"emits must list concrete signal names: {exc}")
    written = (writes,) if isinstance(writes, str) else tuple(writes)
    for key in written:
        if not isinstance(key, str) or not _NAME.match(key):
            checks.add(f"writes must list top-level state keys, got {key!r}.")
    when_expression = checks.attempt(lambda: compile_guard(when, name), AgentConfigError, "")
    spec = None
    if output is not None:
        spec = checks.attempt(
            lambda: OutputSpec(output),
            (TypeError, pydantic.PydanticSchemaGenerationError, pydantic.PydanticUserError),
            "output must be a pydantic model or a type pydantic validates: ",
        )
    if not isinstance(given(output_retries), int) or output_retries < 0:
        checks.add(f"output_retries must be an integer >= 0, got {output_retries!r}.")
    if updates is not None and (not isinstance(given(updates), str) or not _NAME.match(updates)):
        checks.add(f"updates must name a top-level state key, got {updates!r}.")
    for field, hook in (("before_tool", before_tool), ("after_tool", after_tool)):
        if hook is not None and not callable(given(hook)):
            checks.add(f"{field} must be a function, got {hook!r}.")
    if on_output is not None and not callable(given(on_output)):
        checks.add(f"on_output must be a function fn(ctx, output), got {on_output!r}.")
    if concurrency not in _CONCURRENCY:
        checks.add(f"unknown concurrency {concurrency!r}; use one of {', '.join(_CONCURRENCY)}.")
    if max_activations is not None and (
        not isinstance(given(max_activations), int) or max_activations < 1
    ):
        checks.add(f"max_activations must be None or an integer >= 1, got {max_activations!r}.")
    if provider is not None and not callable(getattr(provider, "stream", None)):
        checks.add(f"provider must have a stream(request) method, got {provider!r}.")
    tool_list = checks.attempt(lambda: tools_of(tools), AgentConfigError, "") or ()
    if reaction is not None and not isinstance(given(reaction), Reaction):
        checks.add(f"reaction must be a Reaction(types=..., events=...), got {reaction!r}.")
    if execution_mode not in MODES:
        checks.add(f"unknown execution_mode {execution_mode!r}; use one of {', '.join(MODES)}.")
    if capabilities is not None and not isinstance(given(capabilities), Capabilities):
        checks.add(f"capabilities must be a Capabilities(...), got {capabilities!r}.")
    if approval is not None and not isinstance(given(approval), Approval):
        checks.add(f"approval must be an Approval(by=..., count=...), got {approval!r}.")
    if budget is not None and not isinstance(given(budget), Budget):
        checks.add(f"budget must be a Budget(usd=..., model_calls=...), got {budget!r}.")
    if schedule is not None:
        checks.attempt(lambda: check_schedule(schedule, reaction), ValueError, "")
    policies = checks.attempt(lambda: admitted(admit, name), AgentConfigError, "") or ()
    settings = checks.attempt(
        lambda: agent_settings(
            mcps, skills, hooks, env, enable_cache, enable_reflection, max_reflections
        ),
        (AgentConfigError, TypeError),
        "",
    )
    prompt_template = system_template = None
    if isinstance(prompt, str):
        prompt_template = checks.attempt(
            lambda: compile_template(prompt, agent=name, field="prompt"), AgentConfigError, ""
        )
    if isinstance(system, str):
        system_template = checks.attempt(
            lambda: compile_template(system, agent=name, field="system"), AgentConfigError, ""
        )
    ask_template = None
    if isinstance(ask, str):
        ask_template = checks.attempt(
            lambda: compile_template(ask, agent=name, field="ask"), AgentConfigError, ""
        )
    checks.raise_if_named()
    extra = settings or {}
    if before_tool is not None or after_tool is not None:
        extra["hooks"] = extra.get("hooks", NO_HOOKS) + shorthand_hooks(before_tool, after_tool)
    return Agent(
        name=name,
        prompt_text=prompt,
        system=system,
        run=run,
        activate_on=patterns or (),
        emits=tuple(dict.fromkeys(declared)),
        when=when,
        output=output,
        output_retries=output_retries,
        updates=updates,
        on_output=on_output,
        provider=provider,
        tools=tool_list,
        concurrency=concurrency,
        max_activations=max_activations,
        options=dict(options or {}),
        before_tool=before_tool,
        after_tool=after_tool,
        writes=tuple(dict.fromkeys(written)),
        reaction=reaction,
        execution_mode=execution_mode,
        capabilities=capabilities or Capabilities(),
        approval=approval or Approval(),
        ask=ask,
        choices=options_given,
        prompt_template=prompt_template,
        ask_template=ask_template,
        system_template=system_template,
        when_expression=when_expression,
        output_spec=spec,
        problems=tuple(checks.problems),
        budget=budget,
        schedule=schedule,
        admit=policies,
        **extra,
    )


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
