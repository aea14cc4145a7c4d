"""Every error reactor raises, under one root.

Catch :class:`ReactorError` to handle anything the library raises on purpose. Each
leaf also subclasses the builtin it resembles, so code that already catches
``ValueError`` or ``TypeError`` keeps working::

    ReactorError
    ├── AgentConfigError(ValueError)      an agent definition is invalid
    │   └── NoProviderError               an LLM agent has no provider to run on
    ├── AgentNotFoundError(LookupError)   a run or the service has no agent of that name
    ├── BackpressureError(RuntimeError)   outside input refused: the run's unwritten backlog is full
    ├── BudgetExceededError(RuntimeError) a model call would start over a run's or agent's budget
    ├── GraphChangedError(RuntimeError)   a run cannot resume: the graph changed what it did
    ├── GraphValidationError(ValueError)  a graph has problems (all listed, with hints)
    ├── HandlerError(TypeError)           a callable cannot be used as a signal handler
    ├── LoopLimitError(RuntimeError)      a run hit max_depth or max_activations
    ├── MCPServerError(RuntimeError)      an MCP server failed to start or to list its tools
    ├── MissingExtraError(ModuleNotFoundError) a part needs an extra: the pip install to run
    ├── OutputValidationError(ValueError) an agent's output never matched its model
    ├── PatternError(ValueError)          a signal pattern cannot be compiled
    ├── PayloadError(ValueError)          a value cannot enter the log (path named)
    ├── PromptError                       a question to a person cannot be answered
    │   ├── PromptNotFoundError(LookupError)  no pending prompt has that id
    │   ├── PromptTimeoutError(TimeoutError)  nobody answered in time
    │   └── ReplyValidationError(ValueError)  an answer does not fit the question
    ├── ProviderError(RuntimeError)       the LLM provider failed (see .retryable)
    │   ├── ReplayMismatchError           replay has no recorded answer for a request
    │   └── ScriptExhaustedError          a ScriptedProvider ran out of answers
    ├── RecordingError(RuntimeError)      a signal store cannot read or write
    ├── RunClosedError(RuntimeError)      a signal was sent to a run that takes no input
    ├── RunFinishedError(RuntimeError)    a run asked to resume has already ended
    ├── RunNotFoundError(LookupError)     no recorded run has that id
    ├── RunSuspendedError(RuntimeError)   a run was suspended; resume it for its result
    ├── RunTimeoutError(TimeoutError)     a run exceeded its timeout
    ├── ServiceError                      the object store or reaction service refused
    │   ├── AgentConflictError(RuntimeError)     an agent exists, or is defined in code
    │   ├── CapabilityError(PermissionError)     an agent's change is outside its capabilities
    │   ├── DatabaseError(RuntimeError)          a database cannot be opened or migrated
    │   ├── EntryNotFoundError(LookupError)      no processing-log entry has that id
    │   ├── IdleTimeoutError(TimeoutError)       the service did not become idle in time
    │   ├── ObjectNotFoundError(LookupError)     no stored object has that id
    │   ├── ObjectValidationError(ValueError)    an object's data does not fit its type
    │   ├── PermissionDeniedError(PermissionError) a principal's roles do not allow the action
    │   ├── RetryRefusedError(RuntimeError)      a processing-log entry cannot be retried
    │   ├── ServiceConfigError(ValueError)       the service or a store is misconfigured
    │   ├── ServiceStateError(RuntimeError)      the service is not running (or already is)
    │   ├── SuggestionNotFoundError(LookupError) no suggestion has that id
    │   ├── SuggestionResolvedError(RuntimeError) a suggestion was already approved or rejected
    │   └── SuggestionStaleError(RuntimeError)  a suggestion's object changed since
    ├── SignalNameError(ValueError)       a signal name is malformed
    ├── StoreError                        a state store refused an operation
    │   ├── ReadOnlyStateError(TypeError)     state read from a store was mutated
    │   ├── StateKeyError(KeyError)           the state has no such key
    │   ├── StateValidationError(ValueError)  a write does not validate; nothing changed
    │   └── TransactionError(RuntimeError)    a transaction cannot commit or bind
    ├── TemplateError(ValueError)         a prompt or guard template cannot render
    │   └── TemplateSecurityError          a template reached for what is not data
    └── ToolNotRecordedError(LookupError) an evaluation's model called a tool not recorded

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

from reactor.exceptions._engine import (
    AgentConfigError,
    AgentNotFoundError,
    BackpressureError,
    BudgetExceededError,
    CycleWarning,
    GraphChangedError,
    GraphValidationError,
    HandlerError,
    LoopLimitError,
    MCPServerError,
    NoProviderError,
    OutputValidationError,
    PatternError,
    PayloadError,
    PromptError,
    PromptNotFoundError,
    PromptTimeoutError,
    ProviderError,
    ReactorError,
    RecordingError,
    ReplayMismatchError,
    ReplyValidationError,
    RunClosedError,
    RunFinishedError,
    RunNotFoundError,
    RunSuspendedError,
    RunTimeoutError,
    ScriptExhaustedError,
    SignalNameError,
    TemplateError,
    TemplateSecurityError,
    ToolNotRecordedError,
)
from reactor.exceptions._extras import MissingExtraError
from reactor.exceptions._service import (
    AgentConflictError,
    CapabilityError,
    DatabaseError,
    EntryNotFoundError,
    IdleTimeoutError,
    ObjectNotFoundError,
    ObjectValidationError,
    PermissionDeniedError,
    RetryRefusedError,
    ServiceConfigError,
    ServiceError,
    ServiceStateError,
    SuggestionNotFoundError,
    SuggestionResolvedError,
    SuggestionStaleError,
)
from reactor.exceptions._state import (
    ReadOnlyStateError,
    StateKeyError,
    StateValidationError,
    StoreError,
    TransactionError,
)

__all__ = [
    "AgentConfigError",
    "AgentConflictError",
    "AgentNotFoundError",
    "BackpressureError",
    "BudgetExceededError",
    "CapabilityError",
    "CycleWarning",
    "DatabaseError",
    "EntryNotFoundError",
    "GraphChangedError",
    "GraphValidationError",
    "HandlerError",
    "IdleTimeoutError",
    "LoopLimitError",
    "MCPServerError",
    "MissingExtraError",
    "NoProviderError",
    "ObjectNotFoundError",
    "ObjectValidationError",
    "OutputValidationError",
    "PatternError",
    "PayloadError",
    "PermissionDeniedError",
    "PromptError",
    "PromptNotFoundError",
    "PromptTimeoutError",
    "ProviderError",
    "ReactorError",
    "ReadOnlyStateError",
    "RecordingError",
    "ReplayMismatchError",
    "ReplyValidationError",
    "RetryRefusedError",
    "RunClosedError",
    "RunFinishedError",
    "RunNotFoundError",
    "RunSuspendedError",
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
    "SuggestionStaleError",
    "TemplateError",
    "TemplateSecurityError",
    "ToolNotRecordedError",
    "TransactionError",
]

for _name in __all__:  # tracebacks and reprs name the public module
    globals()[_name].__module__ = __name__
del _name
