"""The errors of the engine (re-exported by :mod:`reactor.exceptions`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = [
    "AgentConfigError",
    "AgentNotFoundError",
    "BackpressureError",
    "CycleWarning",
    "GraphChangedError",
    "GraphValidationError",
    "HandlerError",
    "LoopLimitError",
    "MCPServerError",
    "NoProviderError",
    "OutputValidationError",
    "PatternError",
    "PayloadError",
    "PromptError",
    "PromptNotFoundError",
    "PromptTimeoutError",
    "ProviderError",
    "ReactorError",
    "RecordingError",
    "ReplayMismatchError",
    "ReplyValidationError",
    "RunClosedError",
    "RunFinishedError",
    "RunNotFoundError",
    "RunSuspendedError",
    "RunTimeoutError",
    "ScriptExhaustedError",
    "SignalNameError",
    "TemplateError",
    "TemplateSecurityError",
    "ToolNotRecordedError",
]


class ReactorError(Exception):
    """Root of every error raised by reactor."""


class GraphChangedError(ReactorError, RuntimeError):
    """A run cannot resume on this graph: its code changed in a way its log would not repeat.

    Raised by ``resume`` (and ``start(resume=...)``) with ``on_change="fail"``, the
    default, before anything is recorded. Resume with ``on_change="force"`` to go on
    anyway, or deploy the code the run last ran with.

    Attributes:
        run_id: The run.
        changes: Each agent the resume refused over, and what changed, in words.
    """

    def __init__(self, message: str, *, run_id: str, changes: Mapping[str, str]) -> None:
        super().__init__(message)
        self.run_id = run_id
        self.changes = dict(changes)


class HandlerError(ReactorError, TypeError):
    """A callable cannot be used as a signal handler (for example, it is async)."""


class PatternError(ReactorError, ValueError):
    """A signal pattern is malformed.

    Raised when a subscription is made (never at dispatch), so a typo in
    ``activate_on`` surfaces where the agent or handler is defined.

    Attributes:
        pattern: The offending pattern, as given.
    """

    def __init__(self, message: str, *, pattern: object = None) -> None:
        super().__init__(message)
        self.pattern = pattern


class PayloadError(ReactorError, ValueError):
    """A value cannot enter the log: nothing was emitted or stored.

    Raised where a value enters a run or a store (run input, ``send``, ``send_to``,
    ``reply``, ``store.post``, ``ctx.emit``, store writes, object data) when the log
    could not hold it: a string with a lone surrogate, ``NaN`` or ``Infinity``, or a
    type with no JSON form.

    Attributes:
        path: Where the bad value is, e.g. ``input.items[3].name``.
    """

    def __init__(self, message: str, *, path: str = "") -> None:
        super().__init__(message)
        self.path = path


class SignalNameError(ReactorError, ValueError):
    """A signal name is malformed (empty, an empty segment, whitespace or ``*``).

    Attributes:
        name: The offending name, as given.
    """

    def __init__(self, message: str, *, name: object = None) -> None:
        super().__init__(message)
        self.name = name


class AgentConfigError(ReactorError, ValueError):
    """An agent definition is invalid; raised by ``agent()`` where it is defined.

    Attributes:
        agent: The agent's name (``None`` if it has none yet).
    """

    def __init__(self, message: str, *, agent: str | None = None) -> None:
        super().__init__(message)
        self.agent = agent


class MCPServerError(ReactorError, RuntimeError):
    """An MCP server an agent uses failed to start, or to list its tools.

    Attributes:
        server: The server's name.
    """

    def __init__(self, message: str, *, server: str | None = None) -> None:
        super().__init__(message)
        self.server = server


class NoProviderError(AgentConfigError):
    """An LLM agent activated with no provider on the agent or the run."""


class AgentNotFoundError(ReactorError, LookupError):
    """A run has no agent of that name (``handle.send_to``).

    Attributes:
        agent: The name asked for.
    """

    def __init__(self, message: str, *, agent: str) -> None:
        super().__init__(message)
        self.agent = agent


class BudgetExceededError(ReactorError, RuntimeError):
    """A model call would start over a budget: it was not made, and the run stopped.

    Attributes:
        budget: Which limit: ``usd``, ``input_tokens``, ``output_tokens`` or
            ``model_calls``.
        limit: The budget's value.
        spent: What was spent when the call was refused (``None`` for a cost that is
            unknown because a model has no price).
        agent: The agent whose call was refused.
        scope: ``run`` (the run's budget) or ``agent`` (the agent's own).
    """

    def __init__(
        self,
        message: str,
        *,
        budget: str,
        limit: float,
        spent: float | None,
        agent: str,
        scope: str,
    ) -> None:
        super().__init__(message)
        self.budget = budget
        self.limit = limit
        self.spent = spent
        self.agent = agent
        self.scope = scope


class GraphValidationError(ReactorError, ValueError):
    """A graph has problems; every one is listed, each with a hint.

    Attributes:
        problems: One line per problem, each ending with how to fix it.
    """

    def __init__(self, problems: Sequence[str], *, graph: str | None = None) -> None:
        self.problems = tuple(problems)
        self.graph = graph
        name = f" {graph!r}" if graph else ""
        count = len(self.problems)
        lines = "\n".join(f"  - {problem}" for problem in self.problems)
        super().__init__(f"Graph{name} has {count} problem{'s' if count != 1 else ''}:\n{lines}")


class LoopLimitError(ReactorError, RuntimeError):
    """A run reached ``max_depth`` or ``max_activations``.

    Attributes:
        limit: ``"max_depth"`` or ``"max_activations"``.
        cycle: The repeating cycle of agents and signals, if one was found, e.g.
            ``("trader", "trade:proposed", "reviewer", "trade:rejected", "trader")``.
    """

    def __init__(self, message: str, *, limit: str, cycle: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.limit = limit
        self.cycle = tuple(cycle)


class OutputValidationError(ReactorError, ValueError):
    """An agent's output did not validate against its ``output`` model after retries.

    Attributes:
        agent: The agent's name (``None`` from ``Prompt.validate_response``).
        output: The last output received.
        errors: pydantic's error list for that output.
    """

    def __init__(
        self,
        message: str,
        *,
        agent: str | None = None,
        output: Any,
        errors: list[dict[str, Any]],
    ) -> None:
        super().__init__(message)
        self.agent = agent
        self.output = output
        self.errors = errors


class ProviderError(ReactorError, RuntimeError):
    """The LLM provider failed.

    Attributes:
        retryable: Whether trying again later may succeed (rate limits, overload,
            connection errors, 5xx), as opposed to a request that is wrong (4xx).
        agent: The agent whose request failed, if known.
        status_code: The HTTP status, when the failure was an HTTP response.
        retry_after: Seconds the API asked to wait before trying again
            (``retry-after``), when it said.
    """

    def __init__(
        self,
        message: str,
        *,
        retryable: bool = False,
        agent: str | None = None,
        status_code: int | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.agent = agent
        self.status_code = status_code
        self.retry_after = retry_after


class ReplayMismatchError(ProviderError):
    """Replay found no recorded answer for a request (a prompt, schema or tool changed).

    Attributes:
        field: The first field that differs from the nearest recorded request, e.g.
            ``messages[0].content`` (``None`` if the recording has no request details).
        recorded: That field's recorded value.
        current: Its value now.
    """

    def __init__(
        self,
        message: str,
        *,
        agent: str,
        field: str | None = None,
        recorded: Any = None,
        current: Any = None,
    ) -> None:
        super().__init__(message, agent=agent)
        self.field = field
        self.recorded = recorded
        self.current = current


class RecordingError(ReactorError, RuntimeError):
    """A signal store cannot read or write (not a reactor database, disk full, ...).

    A run whose recording failed ends ``failed`` with this error as ``result.error``.

    Attributes:
        unwritten: How many of the run's signals were not written (``None`` when the
            error is not about a run's recording).
    """

    def __init__(self, message: str, *, unwritten: int | None = None) -> None:
        super().__init__(message)
        self.unwritten = unwritten


class RunNotFoundError(ReactorError, LookupError):
    """No recorded run has that id (or the id prefix is ambiguous)."""


class ScriptExhaustedError(ProviderError):
    """A ``ScriptedProvider`` was asked for more answers than it was given."""


class RunClosedError(ReactorError, RuntimeError):
    """A signal was sent to a run that was closed, has ended, or was aborted."""


class RunFinishedError(ReactorError, RuntimeError):
    """A run asked to resume has already ended (its ``harness:end`` is recorded).

    Attributes:
        run_id: The run.
        status: How it ended.
    """

    def __init__(self, message: str, *, run_id: str, status: str | None) -> None:
        super().__init__(message)
        self.run_id = run_id
        self.status = status


class RunSuspendedError(ReactorError, RuntimeError):
    """The run was suspended (``handle.suspend()``): it has no result until resumed.

    Attributes:
        run_id: The run, to resume with ``graph.resume(run_id, record=store)``.
    """

    def __init__(self, message: str, *, run_id: str) -> None:
        super().__init__(message)
        self.run_id = run_id


class PromptError(ReactorError):
    """A question to a person (``ctx.ask``, ``agent(ask=...)``) cannot be answered.

    Attributes:
        prompt_id: The prompt.
    """

    def __init__(self, message: str, *, prompt_id: str) -> None:
        super().__init__(message)
        self.prompt_id = prompt_id


class PromptNotFoundError(PromptError, LookupError):
    """No pending prompt has that id: it is unknown, answered, or timed out."""


class PromptTimeoutError(PromptError, TimeoutError):
    """Nobody answered a prompt within its ``timeout`` (raised in the asking agent)."""


class ReplyValidationError(PromptError, ValueError):
    """An answer is not one of the prompt's choices, or does not fit its ``output``.

    The prompt stays pending: reply again with a valid answer.
    """


class RunTimeoutError(ReactorError, TimeoutError):
    """A run exceeded its ``timeout``; in-flight activations were cancelled."""


class TemplateError(ReactorError, ValueError):
    """A prompt, system prompt or guard expression could not be rendered.

    Attributes:
        agent: The agent whose template failed.
        variable: The missing variable or attribute, when that was the cause.
    """

    def __init__(self, message: str, *, agent: str, variable: str | None = None) -> None:
        super().__init__(message)
        self.agent = agent
        self.variable = variable


class TemplateSecurityError(TemplateError):
    """A template reached for something that is not data (a module, a function, a class).

    Templates render against plain data only (``input``, ``state``, ``signal``,
    ``object``, ``objects``); a path that leaves the data is refused, at definition when
    it can be seen there, else when it renders.

    Attributes:
        path: The refused path as the template spelled it (``objects.store``).
    """

    def __init__(self, message: str, *, agent: str, path: str) -> None:
        super().__init__(message, agent=agent, variable=path)
        self.path = path


class BackpressureError(ReactorError, RuntimeError):
    """Outside input was refused because the run's unrecorded backlog is full; nothing was sent.

    ``handle.send()`` raises it when the store has ``max_backlog`` signals not yet
    written; ``await handle.asend()`` waits for room instead.

    Attributes:
        run_id: The run that refused the input.
    """

    def __init__(self, message: str, *, run_id: str) -> None:
        super().__init__(message)
        self.run_id = run_id


class CycleWarning(UserWarning):
    """A graph's agents can re-activate each other in a cycle (spelled out in the text).

    Runs stay bounded by ``max_depth`` and ``max_activations``; guards or ``end_when``
    usually end intentional loops.
    """


class ToolNotRecordedError(ReactorError, LookupError):
    """An evaluation's model called a tool with arguments its recording never saw.

    An evaluation (``graph.evaluate``) never repeats a side effect by accident: a tool
    call whose name and arguments were recorded gets the recorded result, any other
    fails the activation with this error, unless the tool is in ``live_tools``.

    Attributes:
        tool: The tool's name.
        arguments: What the model called it with.
    """

    def __init__(self, message: str, *, tool: str, arguments: Any) -> None:
        super().__init__(message)
        self.tool = tool
        self.arguments = arguments
