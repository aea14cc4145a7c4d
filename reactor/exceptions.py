"""Every error reactor raises, under one root.

Catch :class:`ReactorError` to handle anything the library raises on purpose. Each
leaf also subclasses the builtin it resembles, so code that already catches
``ValueError`` or ``TypeError`` keeps working::

    ReactorError
    ├── AgentConfigError(ValueError)      an agent definition is invalid
    │   └── NoProviderError               an LLM agent has no provider to run on
    ├── GraphValidationError(ValueError)  a graph has problems (all listed, with hints)
    ├── HandlerError(TypeError)           a callable cannot be used as a signal handler
    ├── LoopLimitError(RuntimeError)      a run hit max_depth or max_activations
    ├── OutputValidationError(ValueError) an agent's output never matched its model
    ├── PatternError(ValueError)          a signal pattern cannot be compiled
    ├── ProviderError(RuntimeError)       the LLM provider failed (see .retryable)
    │   ├── ReplayMismatchError           replay has no recorded answer for a request
    │   └── ScriptExhaustedError          a ScriptedProvider ran out of answers
    ├── RecordingError(RuntimeError)      a signal store cannot read or write
    ├── RunClosedError(RuntimeError)      a signal was sent to a run that takes no input
    ├── RunFinishedError(RuntimeError)    a run asked to resume has already ended
    ├── RunNotFoundError(LookupError)     no recorded run has that id
    ├── RunTimeoutError(TimeoutError)     a run exceeded its timeout
    ├── ServiceError                      the object store or reaction service refused
    │   ├── AgentConflictError(RuntimeError)     an agent exists, or is defined in code
    │   ├── AgentNotFoundError(LookupError)      the service has no agent of that name
    │   ├── CapabilityError(PermissionError)     an agent's change is outside its capabilities
    │   ├── DatabaseError(RuntimeError)          a database cannot be opened or migrated
    │   ├── IdleTimeoutError(TimeoutError)       the service did not become idle in time
    │   ├── ObjectNotFoundError(LookupError)     no stored object has that id
    │   ├── ObjectValidationError(ValueError)    an object's data does not fit its type
    │   ├── ServiceConfigError(ValueError)       the service or a store is misconfigured
    │   ├── ServiceStateError(RuntimeError)      the service is not running (or already is)
    │   ├── SuggestionNotFoundError(LookupError) no suggestion has that id
    │   └── SuggestionResolvedError(RuntimeError) a suggestion was already approved or rejected
    ├── SignalNameError(ValueError)       a signal name is malformed
    ├── StoreError                        a state store refused an operation
    │   ├── ReadOnlyStateError(TypeError)     state read from a store was mutated
    │   ├── StateKeyError(KeyError)           the state has no such key
    │   ├── StateValidationError(ValueError)  a write does not validate; nothing changed
    │   └── TransactionError(RuntimeError)    a transaction cannot commit or bind
    └── TemplateError(ValueError)         a prompt or guard template cannot render

The ``migration`` package adds its own errors to the same tree::

    ReactorError
    ├── BindingError(LookupError)         a strict {{path}} binding has no value
    ├── FlowFailError(RuntimeError)       a control.fail node failed the flow
    ├── FlowRunError(RuntimeError)        a node failure stopped an edge-based flow
    │   └── FlowLoopError                 a loop edge wanted more than maxIterations
    ├── FlowSpecError(ValueError)         a flow definition is invalid (every problem)
    │   └── UnknownNodeTypeError          a node's type is not registered
    └── NodeTimeoutError(TimeoutError)    a node attempt ran past its timeoutMs

Warnings have their own category, :class:`CycleWarning` (a ``UserWarning``): a graph
whose agents can re-activate each other. Loops can be intentional; silence it with
``warnings.filterwarnings("ignore", category=CycleWarning)``.

Messages are whole sentences that say what went wrong and what to do about it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = [
    "AgentConfigError",
    "AgentConflictError",
    "AgentNotFoundError",
    "CapabilityError",
    "CycleWarning",
    "DatabaseError",
    "GraphValidationError",
    "HandlerError",
    "IdleTimeoutError",
    "LoopLimitError",
    "NoProviderError",
    "ObjectNotFoundError",
    "ObjectValidationError",
    "OutputValidationError",
    "PatternError",
    "ProviderError",
    "ReactorError",
    "ReadOnlyStateError",
    "RecordingError",
    "ReplayMismatchError",
    "RunClosedError",
    "RunFinishedError",
    "RunNotFoundError",
    "RunTimeoutError",
    "ScriptExhaustedError",
    "ServiceConfigError",
    "ServiceError",
    "ServiceStateError",
    "SignalNameError",
    "StateKeyError",
    "StateValidationError",
    "StoreError",
    "SuggestionNotFoundError",
    "SuggestionResolvedError",
    "TemplateError",
    "TransactionError",
]


class ReactorError(Exception):
    """Root of every error raised by reactor."""


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


class SignalNameError(ReactorError, ValueError):
    """A signal name is malformed (empty, an empty segment, whitespace or ``*``).

    Attributes:
        name: The offending name, as given.
    """

    def __init__(self, message: str, *, name: object = None) -> None:
        super().__init__(message)
        self.name = name


class StoreError(ReactorError):
    """A state store refused an operation; the state is unchanged."""


class ReadOnlyStateError(StoreError, TypeError):
    """State read from a store (``store.state``, payloads, snapshots) was mutated.

    Reads are read-only so that nothing can change the state behind the store's back
    (and without a signal). Write through an ``@action``, ``store.set()``,
    ``store.update()`` or ``store.transaction()``.
    """


class StateKeyError(StoreError, KeyError):
    """The state has no such key.

    Attributes:
        key: The key asked for.
    """

    def __init__(self, message: str, *, key: str) -> None:
        super().__init__(message)
        self.key = key

    def __str__(self) -> str:
        return str(self.args[0])


class StateValidationError(StoreError, ValueError):
    """A write does not validate against the state model; nothing was changed.

    Attributes:
        key: The top-level state key the failing value belongs to.
        path: The dotted path of the first invalid value (``analysis.confidence``).
        errors: pydantic's error list, for programmatic inspection.
    """

    def __init__(
        self, message: str, *, key: str, path: str, errors: list[dict[str, object]]
    ) -> None:
        super().__init__(message)
        self.key = key
        self.path = path
        self.errors = errors


class TransactionError(StoreError, RuntimeError):
    """A transaction cannot commit (a nested write failed) or a store cannot be bound."""


class AgentConfigError(ReactorError, ValueError):
    """An agent definition is invalid; raised by ``agent()`` where it is defined.

    Attributes:
        agent: The agent's name (``None`` if it has none yet).
    """

    def __init__(self, message: str, *, agent: str | None = None) -> None:
        super().__init__(message)
        self.agent = agent


class NoProviderError(AgentConfigError):
    """An LLM agent activated with no provider on the agent or the run."""


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
        agent: The agent's name.
        output: The last output received.
        errors: pydantic's error list for that output.
    """

    def __init__(
        self, message: str, *, agent: str, output: Any, errors: list[dict[str, Any]]
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
    """

    def __init__(
        self,
        message: str,
        *,
        retryable: bool = False,
        agent: str | None = None,
        status_code: int | None = None,
    ) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.agent = agent
        self.status_code = status_code


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
    """A signal store cannot read or write (not a reactor database, disk full, ...)."""


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


class ServiceError(ReactorError):
    """The object store or the reaction service refused an operation (see the leaves)."""


class CapabilityError(ServiceError, PermissionError):
    """An agent tried a change outside its ``capabilities``; nothing was changed.

    Attributes:
        agent: The agent that tried it.
        operation: ``create``, ``update`` or ``delete``.
        type: The type of the object it would have touched.
    """

    def __init__(self, message: str, *, agent: str, operation: str, type: str) -> None:
        super().__init__(message)
        self.agent = agent
        self.operation = operation
        self.type = type


class DatabaseError(ServiceError, RuntimeError):
    """A database cannot be opened, reached or migrated (the message says which, and why)."""


class IdleTimeoutError(ServiceError, TimeoutError):
    """``service.idle(timeout=...)`` ran out before every event was processed."""


class ObjectNotFoundError(ServiceError, LookupError):
    """No stored object has that id (it never existed, or it was deleted).

    Attributes:
        object_id: The id asked for.
    """

    def __init__(self, message: str, *, object_id: str) -> None:
        super().__init__(message)
        self.object_id = object_id


class ObjectValidationError(ServiceError, ValueError):
    """An object's data does not validate against its registered type; nothing changed.

    Attributes:
        type: The object type.
        errors: pydantic's error list, for programmatic inspection.
    """

    def __init__(self, message: str, *, type: str, errors: list[dict[str, Any]]) -> None:
        super().__init__(message)
        self.type = type
        self.errors = errors


class ServiceConfigError(ServiceError, ValueError):
    """An object store or reaction service was given options it cannot work with."""


class ServiceStateError(ServiceError, RuntimeError):
    """The reaction service is not running (use ``async with service:``), or already is."""


class AgentNotFoundError(ServiceError, LookupError):
    """The service has no agent of that name (in code or in its ``agents`` table)."""


class AgentConflictError(ServiceError, RuntimeError):
    """An agent of that name exists already, or it is defined in code, not in a row.

    An agent defined in code keeps its definition in code: through the service only
    its schedule and its ``enabled`` switch change.
    """


class SuggestionNotFoundError(ServiceError, LookupError):
    """No suggestion has that id."""


class SuggestionResolvedError(ServiceError, RuntimeError):
    """A suggestion was already approved or rejected: each is resolved once."""


class CycleWarning(UserWarning):
    """A graph's agents can re-activate each other in a cycle (spelled out in the text).

    Runs stay bounded by ``max_depth`` and ``max_activations``; guards or ``end_when``
    usually end intentional loops.
    """
