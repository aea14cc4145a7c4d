"""reactor: a declarative, reactive framework for LLM agents.

State changes emit signals; agents subscribe to signals; the workflow emerges from
what reacts to what. This package holds the core: signals, the bus, agents, the
runtime, providers, recording, logging and the CLI.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from reactor._agent import Agent, agent
from reactor._bus import SignalBus, Subscription, current_signal
from reactor._context import AgentContext, RunView
from reactor._graph import Reactive, reactive, run_reactive
from reactor._handle import RunHandle
from reactor._memorystore import MemorySignalStore
from reactor._options import RunKwargs
from reactor._patterns import Pattern
from reactor._pricing import ModelPrice, model_prices
from reactor._progress import ProgressReporter
from reactor._provider import (
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
from reactor._recording import Divergence, Recording, RunInfo
from reactor._replay import ReplayProvider
from reactor._result import RunMetrics, RunResult
from reactor._scripted import ScriptedProvider
from reactor._signal import Signal
from reactor._signalstore import SQLiteSignalStore
from reactor._stream import SignalStream
from reactor._tools import Tool, tool
from reactor.exceptions import (
    AgentConfigError,
    CycleWarning,
    GraphValidationError,
    HandlerError,
    LoopLimitError,
    NoProviderError,
    OutputValidationError,
    PatternError,
    ProviderError,
    ReactorError,
    RecordingError,
    ReplayMismatchError,
    RunClosedError,
    RunNotFoundError,
    RunTimeoutError,
    ScriptExhaustedError,
    SignalNameError,
    TemplateError,
)
from reactor.logging import MetricsReporter, StructlogReporter
from reactor.typing import Provider, Reporter, SignalStore

if TYPE_CHECKING:
    from reactor._anthropic import AnthropicProvider

__all__ = [
    "Agent",
    "AgentConfigError",
    "AgentContext",
    "AnthropicProvider",
    "CycleWarning",
    "Divergence",
    "End",
    "GraphValidationError",
    "HandlerError",
    "LoopLimitError",
    "MemorySignalStore",
    "Message",
    "MetricsReporter",
    "ModelPrice",
    "NoProviderError",
    "OutputValidationError",
    "Pattern",
    "PatternError",
    "ProgressReporter",
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
    "Reporter",
    "RunClosedError",
    "RunHandle",
    "RunInfo",
    "RunKwargs",
    "RunMetrics",
    "RunNotFoundError",
    "RunResult",
    "RunTimeoutError",
    "RunView",
    "SQLiteSignalStore",
    "ScriptExhaustedError",
    "ScriptedProvider",
    "Signal",
    "SignalBus",
    "SignalNameError",
    "SignalStore",
    "SignalStream",
    "StructlogReporter",
    "Subscription",
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


def __getattr__(name: str) -> Any:
    # The anthropic SDK takes most of a second to import: load it on first use, so that
    # offline work (ScriptedProvider, tests, the CLI) does not pay for it.
    if name == "AnthropicProvider":
        from reactor._anthropic import AnthropicProvider

        globals()[name] = AnthropicProvider
        return AnthropicProvider
    raise AttributeError(f"module 'reactor' has no attribute {name!r}")
