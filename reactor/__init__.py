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
    BudgetExceededError,
    CapabilityError,
    CycleWarning,
    DatabaseError,
    GraphChangedError,
    GraphValidationError,
    HandlerError,
    IdleTimeoutError,
    LoopLimitError,
    MCPServerError,
    NoProviderError,
    ObjectNotFoundError,
    ObjectValidationError,
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
    ServiceConfigError,
    ServiceError,
    ServiceStateError,
    SignalNameError,
    SuggestionNotFoundError,
    SuggestionResolvedError,
    SuggestionStaleError,
    TemplateError,
    ToolNotRecordedError,
)

if TYPE_CHECKING:
    from reactor._agents.agent import (
        Agent,
        agent,
    )
    from reactor._agents.asking import PendingPrompt
    from reactor._agents.budget import Budget
    from reactor._agents.context import (
        AgentContext,
        RunView,
    )
    from reactor._agents.env import getenv
    from reactor._agents.skills import Skill
    from reactor._backends.memory import MemorySignalStore
    from reactor._backends.postgres import PostgresSignalStore
    from reactor._backends.sqlite import SQLiteSignalStore
    from reactor._engine.collector import (
        CollectorTuning,
        tune_collector,
        tune_gc,
        untune_collector,
        untune_gc,
    )
    from reactor._engine.options import RunKwargs
    from reactor._engine.result import (
        AgentFailure,
        RunMetrics,
        RunResult,
    )
    from reactor._graph.console import ConsoleChannel
    from reactor._graph.handle import Channel, RunHandle
    from reactor._graph.reactive import (
        Reactive,
        reactive,
        run_reactive,
    )
    from reactor._prompts.prompt import Prompt
    from reactor._prompts.trace import (
        Trace,
        trace,
    )
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
    from reactor._providers.hooks import (
        Deny,
        Hooks,
        SessionInfo,
    )
    from reactor._providers.mcp import MCPServer
    from reactor._providers.pricing import (
        ModelPrice,
        model_prices,
    )
    from reactor._providers.replay import ReplayProvider
    from reactor._providers.scripted import ScriptedProvider
    from reactor._providers.tools import (
        Tool,
        ToolContext,
        tool,
    )
    from reactor._recording.diff import Divergence
    from reactor._recording.eventtree import (
        EventNode,
        EventTree,
    )
    from reactor._recording.info import RunInfo
    from reactor._recording.recording import Recording
    from reactor._reporting.progress import ProgressReporter
    from reactor._signals.bus import (
        SignalBus,
        Subscription,
        current_signal,
    )
    from reactor._signals.patterns import Pattern
    from reactor._signals.signal import Signal
    from reactor._signals.stream import SignalStream
    from reactor.eval import EvalCase, EvalReport
    from reactor.logging import (
        MetricsReporter,
        StructlogReporter,
    )
    from reactor.typing import (
        Provider,
        Reporter,
        SignalStore,
        SignalStoreBase,
    )

__all__ = [
    "Agent",
    "AgentConfigError",
    "AgentContext",
    "AgentFailure",
    "AgentNotFoundError",
    "AnthropicProvider",
    "Budget",
    "BudgetExceededError",
    "CapabilityError",
    "Channel",
    "CollectorTuning",
    "ConsoleChannel",
    "CycleWarning",
    "DatabaseError",
    "Deny",
    "Divergence",
    "End",
    "EvalCase",
    "EvalReport",
    "EventNode",
    "EventTree",
    "GraphChangedError",
    "GraphValidationError",
    "HandlerError",
    "Hooks",
    "IdleTimeoutError",
    "LoopLimitError",
    "MCPServer",
    "MCPServerError",
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
    "PayloadError",
    "PendingPrompt",
    "PostgresSignalStore",
    "ProgressReporter",
    "Prompt",
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
    "SessionInfo",
    "Signal",
    "SignalBus",
    "SignalNameError",
    "SignalStore",
    "SignalStoreBase",
    "SignalStream",
    "Skill",
    "StructlogReporter",
    "Subscription",
    "SuggestionNotFoundError",
    "SuggestionResolvedError",
    "SuggestionStaleError",
    "TemplateError",
    "TextComplete",
    "TextDelta",
    "ThinkingDelta",
    "Tool",
    "ToolCall",
    "ToolContext",
    "ToolNotRecordedError",
    "ToolResult",
    "Trace",
    "Usage",
    "agent",
    "current_signal",
    "getenv",
    "model_prices",
    "reactive",
    "run_reactive",
    "tool",
    "trace",
    "tune_collector",
    "tune_gc",
    "untune_collector",
    "untune_gc",
]

__version__ = "0.1.0"

_LAZY: dict[str, str] = {
    "Agent": "reactor._agents.agent",
    "AgentContext": "reactor._agents.context",
    "AgentFailure": "reactor._engine.result",
    "AnthropicProvider": "reactor._providers.anthropic",
    "Budget": "reactor._agents.budget",
    "Deny": "reactor._providers.hooks",
    "Channel": "reactor._graph.handle",
    "CollectorTuning": "reactor._engine.collector",
    "ConsoleChannel": "reactor._graph.console",
    "Divergence": "reactor._recording.diff",
    "End": "reactor._providers.base",
    "EvalCase": "reactor.eval",
    "EvalReport": "reactor.eval",
    "EventNode": "reactor._recording.eventtree",
    "EventTree": "reactor._recording.eventtree",
    "Hooks": "reactor._providers.hooks",
    "MCPServer": "reactor._providers.mcp",
    "MemorySignalStore": "reactor._backends.memory",
    "Message": "reactor._providers.base",
    "MetricsReporter": "reactor.logging",
    "ModelPrice": "reactor._providers.pricing",
    "Pattern": "reactor._signals.patterns",
    "PendingPrompt": "reactor._agents.asking",
    "PostgresSignalStore": "reactor._backends.postgres",
    "ProgressReporter": "reactor._reporting.progress",
    "Prompt": "reactor._prompts.prompt",
    "Provider": "reactor.typing",
    "ProviderEvent": "reactor._providers.base",
    "ProviderRequest": "reactor._providers.base",
    "Reactive": "reactor._graph.reactive",
    "Recording": "reactor._recording.recording",
    "ReplayProvider": "reactor._providers.replay",
    "Reporter": "reactor.typing",
    "RunHandle": "reactor._graph.handle",
    "RunInfo": "reactor._recording.info",
    "RunKwargs": "reactor._engine.options",
    "RunMetrics": "reactor._engine.result",
    "RunResult": "reactor._engine.result",
    "RunView": "reactor._agents.context",
    "SQLiteSignalStore": "reactor._backends.sqlite",
    "ScriptedProvider": "reactor._providers.scripted",
    "SessionInfo": "reactor._providers.hooks",
    "Signal": "reactor._signals.signal",
    "SignalBus": "reactor._signals.bus",
    "SignalStore": "reactor.typing",
    "SignalStoreBase": "reactor.typing",
    "SignalStream": "reactor._signals.stream",
    "Skill": "reactor._agents.skills",
    "StructlogReporter": "reactor.logging",
    "Subscription": "reactor._signals.bus",
    "TextComplete": "reactor._providers.base",
    "TextDelta": "reactor._providers.base",
    "ThinkingDelta": "reactor._providers.base",
    "Tool": "reactor._providers.tools",
    "ToolContext": "reactor._providers.tools",
    "ToolCall": "reactor._providers.base",
    "ToolResult": "reactor._providers.base",
    "Trace": "reactor._prompts.trace",
    "Usage": "reactor._providers.base",
    "agent": "reactor._agents.agent",
    "current_signal": "reactor._signals.bus",
    "getenv": "reactor._agents.env",
    "model_prices": "reactor._providers.pricing",
    "reactive": "reactor._graph.reactive",
    "run_reactive": "reactor._graph.reactive",
    "tool": "reactor._providers.tools",
    "trace": "reactor._prompts.trace",
    "tune_collector": "reactor._engine.collector",
    "tune_gc": "reactor._engine.collector",
    "untune_collector": "reactor._engine.collector",
    "untune_gc": "reactor._engine.collector",
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
