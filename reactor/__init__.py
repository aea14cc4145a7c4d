"""reactor: a declarative, reactive framework for LLM agents.

State changes emit signals; agents subscribe to signals; the workflow emerges from
what reacts to what. This package holds the core: signals, the bus, agents, the
runtime, providers, recording, logging and the CLI.

Public names load on first use: ``import reactor`` is cheap, lower layers (the bus,
signals, ``reactor.exceptions``) can be imported without the runtime, and the
anthropic SDK, which takes most of a second to import, loads only when
``AnthropicProvider`` is used.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from reactor.exceptions import (
    AgentConfigError,
    AgentNotFoundError,
    CapabilityError,
    CycleWarning,
    DatabaseError,
    GraphValidationError,
    HandlerError,
    IdleTimeoutError,
    LoopLimitError,
    NoProviderError,
    ObjectNotFoundError,
    ObjectValidationError,
    OutputValidationError,
    PatternError,
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
    ServiceConfigError,
    ServiceError,
    ServiceStateError,
    SignalNameError,
    SuggestionNotFoundError,
    SuggestionResolvedError,
    TemplateError,
)

if TYPE_CHECKING:
    from reactor._agent import (
        Agent,
        agent,
    )
    from reactor._asking import PendingPrompt
    from reactor._bus import (
        SignalBus,
        Subscription,
        current_signal,
    )
    from reactor._console import ConsoleChannel
    from reactor._context import (
        AgentContext,
        RunView,
    )
    from reactor._graph import (
        Reactive,
        reactive,
        run_reactive,
    )
    from reactor._handle import Channel, RunHandle
    from reactor._options import RunKwargs
    from reactor._patterns import Pattern
    from reactor._progress import ProgressReporter
    from reactor._providers.anthropic import AnthropicProvider
    from reactor._providers.base import (
        End,
        Message,
        ProviderEvent,
        ProviderRequest,
        TextComplete,
        TextDelta,
        ThinkingDelta,
        ToolCall,
        ToolResult,
        Usage,
    )
    from reactor._providers.pricing import (
        ModelPrice,
        model_prices,
    )
    from reactor._providers.replay import ReplayProvider
    from reactor._providers.scripted import ScriptedProvider
    from reactor._providers.tools import (
        Tool,
        tool,
    )
    from reactor._recording.diff import Divergence
    from reactor._recording.info import RunInfo
    from reactor._recording.memory import MemorySignalStore
    from reactor._recording.postgres import PostgresSignalStore
    from reactor._recording.recording import Recording
    from reactor._recording.sqlite import SQLiteSignalStore
    from reactor._result import (
        AgentFailure,
        RunMetrics,
        RunResult,
    )
    from reactor._signal import Signal
    from reactor._stream import SignalStream
    from reactor.logging import (
        MetricsReporter,
        StructlogReporter,
    )
    from reactor.typing import (
        Provider,
        Reporter,
        SignalStore,
    )

__all__ = [
    "Agent",
    "AgentConfigError",
    "AgentContext",
    "AgentFailure",
    "AgentNotFoundError",
    "AnthropicProvider",
    "CapabilityError",
    "Channel",
    "ConsoleChannel",
    "CycleWarning",
    "DatabaseError",
    "Divergence",
    "End",
    "GraphValidationError",
    "HandlerError",
    "IdleTimeoutError",
    "LoopLimitError",
    "MemorySignalStore",
    "Message",
    "MetricsReporter",
    "ModelPrice",
    "NoProviderError",
    "ObjectNotFoundError",
    "ObjectValidationError",
    "OutputValidationError",
    "Pattern",
    "PatternError",
    "PendingPrompt",
    "PostgresSignalStore",
    "ProgressReporter",
    "PromptError",
    "PromptNotFoundError",
    "PromptTimeoutError",
    "Provider",
    "ProviderError",
    "ProviderEvent",
    "ProviderRequest",
    "Reactive",
    "ReactorError",
    "Recording",
    "RecordingError",
    "ReplayMismatchError",
    "ReplayProvider",
    "ReplyValidationError",
    "Reporter",
    "RunClosedError",
    "RunFinishedError",
    "RunHandle",
    "RunInfo",
    "RunKwargs",
    "RunMetrics",
    "RunNotFoundError",
    "RunResult",
    "RunSuspendedError",
    "RunTimeoutError",
    "RunView",
    "SQLiteSignalStore",
    "ScriptExhaustedError",
    "ScriptedProvider",
    "ServiceConfigError",
    "ServiceError",
    "ServiceStateError",
    "Signal",
    "SignalBus",
    "SignalNameError",
    "SignalStore",
    "SignalStream",
    "StructlogReporter",
    "Subscription",
    "SuggestionNotFoundError",
    "SuggestionResolvedError",
    "TemplateError",
    "TextComplete",
    "TextDelta",
    "ThinkingDelta",
    "Tool",
    "ToolCall",
    "ToolResult",
    "Usage",
    "agent",
    "current_signal",
    "model_prices",
    "reactive",
    "run_reactive",
    "tool",
]

__version__ = "0.1.0"

_LAZY: dict[str, str] = {
    "Agent": "reactor._agent",
    "AgentFailure": "reactor._result",
    "AgentContext": "reactor._context",
    "AnthropicProvider": "reactor._providers.anthropic",
    "Channel": "reactor._handle",
    "ConsoleChannel": "reactor._console",
    "Divergence": "reactor._recording.diff",
    "End": "reactor._providers.base",
    "MemorySignalStore": "reactor._recording.memory",
    "Message": "reactor._providers.base",
    "MetricsReporter": "reactor.logging",
    "ModelPrice": "reactor._providers.pricing",
    "Pattern": "reactor._patterns",
    "PendingPrompt": "reactor._asking",
    "PostgresSignalStore": "reactor._recording.postgres",
    "ProgressReporter": "reactor._progress",
    "Provider": "reactor.typing",
    "ProviderEvent": "reactor._providers.base",
    "ProviderRequest": "reactor._providers.base",
    "Reactive": "reactor._graph",
    "Recording": "reactor._recording.recording",
    "ReplayProvider": "reactor._providers.replay",
    "Reporter": "reactor.typing",
    "RunHandle": "reactor._handle",
    "RunInfo": "reactor._recording.info",
    "RunKwargs": "reactor._options",
    "RunMetrics": "reactor._result",
    "RunResult": "reactor._result",
    "RunView": "reactor._context",
    "SQLiteSignalStore": "reactor._recording.sqlite",
    "ScriptedProvider": "reactor._providers.scripted",
    "Signal": "reactor._signal",
    "SignalBus": "reactor._bus",
    "SignalStore": "reactor.typing",
    "SignalStream": "reactor._stream",
    "StructlogReporter": "reactor.logging",
    "Subscription": "reactor._bus",
    "TextComplete": "reactor._providers.base",
    "TextDelta": "reactor._providers.base",
    "ThinkingDelta": "reactor._providers.base",
    "Tool": "reactor._providers.tools",
    "ToolCall": "reactor._providers.base",
    "ToolResult": "reactor._providers.base",
    "Usage": "reactor._providers.base",
    "agent": "reactor._agent",
    "current_signal": "reactor._bus",
    "model_prices": "reactor._providers.pricing",
    "reactive": "reactor._graph",
    "run_reactive": "reactor._graph",
    "tool": "reactor._providers.tools",
}
"""Where each public name is defined; imported on first access."""


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'reactor' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
