"""reactor: a declarative, reactive framework for LLM agents.

State changes emit signals; agents subscribe to signals; the workflow emerges from
what reacts to what. This package holds the core: signals, the bus, agents, the
runtime, providers, recording, logging and the CLI.

Public names load on first use: ``import reactor`` is cheap, lower layers (the bus,
signals, ``reactor.exceptions``) can be imported without the runtime, and the
anthropic SDK, which takes most of a second to import, loads only when
``AnthropicProvider`` is used.

``_PUBLIC`` is the one list of the public names: each name, and the module it is
loaded from. ``__all__`` and the loading derive from it; the ``TYPE_CHECKING`` imports
show the same names to type checkers and IDEs, and tests/test_public_api.py fails,
printing the imports to paste, when they differ from it.

Each name has one documented home. Most live here. Those loaded from a public module
are aliases of that module's names, documented there: the errors
(:mod:`reactor.exceptions`), the bases and protocols of providers, reporters and signal stores
(:mod:`reactor.typing`), the report of an evaluation (:mod:`reactor.eval`) and the
reporters that log (:mod:`reactor.logging`). A module that re-exports a name of this
one says so (``reactor.testing.ScriptedProvider`` is :class:`reactor.ScriptedProvider`).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from reactor import exceptions as exceptions  # cheap: loaded with the package, as always

if TYPE_CHECKING:
    from reactor._agents.admission import Batch as Batch
    from reactor._agents.admission import Debounce as Debounce
    from reactor._agents.admission import Latest as Latest
    from reactor._agents.admission import SpendCap as SpendCap
    from reactor._agents.admission import Throttle as Throttle
    from reactor._agents.agent import Agent as Agent
    from reactor._agents.agent import agent as agent
    from reactor._agents.asking import PendingPrompt as PendingPrompt
    from reactor._agents.budget import Budget as Budget
    from reactor._agents.context import AgentContext as AgentContext
    from reactor._agents.context import RunView as RunView
    from reactor._agents.skills import Skill as Skill
    from reactor._backends.memory import MemorySignalStore as MemorySignalStore
    from reactor._backends.postgres import PostgresSignalStore as PostgresSignalStore
    from reactor._backends.sqlite import SQLiteSignalStore as SQLiteSignalStore
    from reactor._engine.collector import CollectorTuning as CollectorTuning
    from reactor._engine.collector import tune_collector as tune_collector
    from reactor._engine.collector import tune_gc as tune_gc
    from reactor._engine.collector import untune_collector as untune_collector
    from reactor._engine.collector import untune_gc as untune_gc
    from reactor._engine.options import RunKwargs as RunKwargs
    from reactor._engine.result import AgentFailure as AgentFailure
    from reactor._engine.result import RunMetrics as RunMetrics
    from reactor._engine.result import RunResult as RunResult
    from reactor._graph.console import ConsoleChannel as ConsoleChannel
    from reactor._graph.handle import Channel as Channel
    from reactor._graph.handle import RunHandle as RunHandle
    from reactor._graph.reactive import Reactive as Reactive
    from reactor._graph.reactive import reactive as reactive
    from reactor._graph.reactive import run_reactive as run_reactive
    from reactor._prompts.prompt import Prompt as Prompt
    from reactor._prompts.trace import Trace as Trace
    from reactor._prompts.trace import trace as trace
    from reactor._providers.anthropic import AnthropicProvider as AnthropicProvider
    from reactor._providers.base import End as End
    from reactor._providers.base import Message as Message
    from reactor._providers.base import ProviderEvent as ProviderEvent
    from reactor._providers.base import ProviderRequest as ProviderRequest
    from reactor._providers.base import TextComplete as TextComplete
    from reactor._providers.base import TextDelta as TextDelta
    from reactor._providers.base import ThinkingDelta as ThinkingDelta
    from reactor._providers.base import ToolCall as ToolCall
    from reactor._providers.base import ToolResult as ToolResult
    from reactor._providers.base import Usage as Usage
    from reactor._providers.env import getenv as getenv
    from reactor._providers.hooks import Deny as Deny
    from reactor._providers.hooks import Hooks as Hooks
    from reactor._providers.hooks import SessionInfo as SessionInfo
    from reactor._providers.mcp import MCPServer as MCPServer
    from reactor._providers.pricing import ModelPrice as ModelPrice
    from reactor._providers.pricing import model_prices as model_prices
    from reactor._providers.replay import ReplayProvider as ReplayProvider
    from reactor._providers.scripted import ScriptedProvider as ScriptedProvider
    from reactor._providers.tools import Tool as Tool
    from reactor._providers.tools import ToolContext as ToolContext
    from reactor._providers.tools import tool as tool
    from reactor._recording.diff import Divergence as Divergence
    from reactor._recording.eventtree import EventNode as EventNode
    from reactor._recording.eventtree import EventTree as EventTree
    from reactor._recording.info import RunInfo as RunInfo
    from reactor._recording.recording import Recording as Recording
    from reactor._reporting.progress import ProgressReporter as ProgressReporter
    from reactor._signals.bus import SignalBus as SignalBus
    from reactor._signals.bus import Subscription as Subscription
    from reactor._signals.bus import current_signal as current_signal
    from reactor._signals.patterns import Pattern as Pattern
    from reactor._signals.signal import Signal as Signal
    from reactor._signals.stream import SignalStream as SignalStream
    from reactor._signals.threads import abandoned_threads as abandoned_threads
    from reactor.eval import EvalCase as EvalCase
    from reactor.eval import EvalReport as EvalReport
    from reactor.exceptions import AgentConfigError as AgentConfigError
    from reactor.exceptions import AgentNotFoundError as AgentNotFoundError
    from reactor.exceptions import BackpressureError as BackpressureError
    from reactor.exceptions import BudgetExceededError as BudgetExceededError
    from reactor.exceptions import CapabilityError as CapabilityError
    from reactor.exceptions import CycleWarning as CycleWarning
    from reactor.exceptions import DatabaseError as DatabaseError
    from reactor.exceptions import EntryNotFoundError as EntryNotFoundError
    from reactor.exceptions import GraphChangedError as GraphChangedError
    from reactor.exceptions import GraphValidationError as GraphValidationError
    from reactor.exceptions import HandlerError as HandlerError
    from reactor.exceptions import IdleTimeoutError as IdleTimeoutError
    from reactor.exceptions import LoopLimitError as LoopLimitError
    from reactor.exceptions import MCPServerError as MCPServerError
    from reactor.exceptions import NoProviderError as NoProviderError
    from reactor.exceptions import ObjectNotFoundError as ObjectNotFoundError
    from reactor.exceptions import ObjectValidationError as ObjectValidationError
    from reactor.exceptions import OutputValidationError as OutputValidationError
    from reactor.exceptions import PatternError as PatternError
    from reactor.exceptions import PayloadError as PayloadError
    from reactor.exceptions import PermissionDeniedError as PermissionDeniedError
    from reactor.exceptions import PromptError as PromptError
    from reactor.exceptions import PromptNotFoundError as PromptNotFoundError
    from reactor.exceptions import PromptTimeoutError as PromptTimeoutError
    from reactor.exceptions import ProviderError as ProviderError
    from reactor.exceptions import ReactorError as ReactorError
    from reactor.exceptions import RecordingError as RecordingError
    from reactor.exceptions import ReplayMismatchError as ReplayMismatchError
    from reactor.exceptions import ReplyValidationError as ReplyValidationError
    from reactor.exceptions import RetryRefusedError as RetryRefusedError
    from reactor.exceptions import RunClosedError as RunClosedError
    from reactor.exceptions import RunFinishedError as RunFinishedError
    from reactor.exceptions import RunNotFoundError as RunNotFoundError
    from reactor.exceptions import RunSuspendedError as RunSuspendedError
    from reactor.exceptions import RunTimeoutError as RunTimeoutError
    from reactor.exceptions import ScriptExhaustedError as ScriptExhaustedError
    from reactor.exceptions import ServiceConfigError as ServiceConfigError
    from reactor.exceptions import ServiceError as ServiceError
    from reactor.exceptions import ServiceStateError as ServiceStateError
    from reactor.exceptions import SignalNameError as SignalNameError
    from reactor.exceptions import SuggestionNotFoundError as SuggestionNotFoundError
    from reactor.exceptions import SuggestionResolvedError as SuggestionResolvedError
    from reactor.exceptions import SuggestionStaleError as SuggestionStaleError
    from reactor.exceptions import TemplateError as TemplateError
    from reactor.exceptions import TemplateSecurityError as TemplateSecurityError
    from reactor.exceptions import ToolNotRecordedError as ToolNotRecordedError
    from reactor.logging import MetricsReporter as MetricsReporter
    from reactor.logging import StructlogReporter as StructlogReporter
    from reactor.typing import Provider as Provider
    from reactor.typing import Reporter as Reporter
    from reactor.typing import SignalStore as SignalStore
    from reactor.typing import SignalStoreBase as SignalStoreBase

__version__ = "0.1.0"

_PUBLIC: dict[str, str] = {
    "Agent": "reactor._agents.agent",
    "AgentConfigError": "reactor.exceptions",
    "AgentContext": "reactor._agents.context",
    "AgentFailure": "reactor._engine.result",
    "AgentNotFoundError": "reactor.exceptions",
    "AnthropicProvider": "reactor._providers.anthropic",
    "BackpressureError": "reactor.exceptions",
    "Batch": "reactor._agents.admission",
    "Budget": "reactor._agents.budget",
    "BudgetExceededError": "reactor.exceptions",
    "CapabilityError": "reactor.exceptions",
    "Channel": "reactor._graph.handle",
    "CollectorTuning": "reactor._engine.collector",
    "ConsoleChannel": "reactor._graph.console",
    "CycleWarning": "reactor.exceptions",
    "DatabaseError": "reactor.exceptions",
    "Debounce": "reactor._agents.admission",
    "Deny": "reactor._providers.hooks",
    "Divergence": "reactor._recording.diff",
    "End": "reactor._providers.base",
    "EntryNotFoundError": "reactor.exceptions",
    "EvalCase": "reactor.eval",
    "EvalReport": "reactor.eval",
    "EventNode": "reactor._recording.eventtree",
    "EventTree": "reactor._recording.eventtree",
    "GraphChangedError": "reactor.exceptions",
    "GraphValidationError": "reactor.exceptions",
    "HandlerError": "reactor.exceptions",
    "Hooks": "reactor._providers.hooks",
    "IdleTimeoutError": "reactor.exceptions",
    "Latest": "reactor._agents.admission",
    "LoopLimitError": "reactor.exceptions",
    "MCPServer": "reactor._providers.mcp",
    "MCPServerError": "reactor.exceptions",
    "MemorySignalStore": "reactor._backends.memory",
    "Message": "reactor._providers.base",
    "MetricsReporter": "reactor.logging",
    "ModelPrice": "reactor._providers.pricing",
    "NoProviderError": "reactor.exceptions",
    "ObjectNotFoundError": "reactor.exceptions",
    "ObjectValidationError": "reactor.exceptions",
    "OutputValidationError": "reactor.exceptions",
    "Pattern": "reactor._signals.patterns",
    "PatternError": "reactor.exceptions",
    "PayloadError": "reactor.exceptions",
    "PendingPrompt": "reactor._agents.asking",
    "PermissionDeniedError": "reactor.exceptions",
    "PostgresSignalStore": "reactor._backends.postgres",
    "ProgressReporter": "reactor._reporting.progress",
    "Prompt": "reactor._prompts.prompt",
    "PromptError": "reactor.exceptions",
    "PromptNotFoundError": "reactor.exceptions",
    "PromptTimeoutError": "reactor.exceptions",
    "Provider": "reactor.typing",
    "ProviderError": "reactor.exceptions",
    "ProviderEvent": "reactor._providers.base",
    "ProviderRequest": "reactor._providers.base",
    "Reactive": "reactor._graph.reactive",
    "ReactorError": "reactor.exceptions",
    "Recording": "reactor._recording.recording",
    "RecordingError": "reactor.exceptions",
    "ReplayMismatchError": "reactor.exceptions",
    "ReplayProvider": "reactor._providers.replay",
    "ReplyValidationError": "reactor.exceptions",
    "Reporter": "reactor.typing",
    "RetryRefusedError": "reactor.exceptions",
    "RunClosedError": "reactor.exceptions",
    "RunFinishedError": "reactor.exceptions",
    "RunHandle": "reactor._graph.handle",
    "RunInfo": "reactor._recording.info",
    "RunKwargs": "reactor._engine.options",
    "RunMetrics": "reactor._engine.result",
    "RunNotFoundError": "reactor.exceptions",
    "RunResult": "reactor._engine.result",
    "RunSuspendedError": "reactor.exceptions",
    "RunTimeoutError": "reactor.exceptions",
    "RunView": "reactor._agents.context",
    "SQLiteSignalStore": "reactor._backends.sqlite",
    "ScriptExhaustedError": "reactor.exceptions",
    "ScriptedProvider": "reactor._providers.scripted",
    "ServiceConfigError": "reactor.exceptions",
    "ServiceError": "reactor.exceptions",
    "ServiceStateError": "reactor.exceptions",
    "SessionInfo": "reactor._providers.hooks",
    "Signal": "reactor._signals.signal",
    "SignalBus": "reactor._signals.bus",
    "SignalNameError": "reactor.exceptions",
    "SignalStore": "reactor.typing",
    "SignalStoreBase": "reactor.typing",
    "SignalStream": "reactor._signals.stream",
    "Skill": "reactor._agents.skills",
    "SpendCap": "reactor._agents.admission",
    "StructlogReporter": "reactor.logging",
    "Subscription": "reactor._signals.bus",
    "SuggestionNotFoundError": "reactor.exceptions",
    "SuggestionResolvedError": "reactor.exceptions",
    "SuggestionStaleError": "reactor.exceptions",
    "TemplateError": "reactor.exceptions",
    "TemplateSecurityError": "reactor.exceptions",
    "TextComplete": "reactor._providers.base",
    "TextDelta": "reactor._providers.base",
    "ThinkingDelta": "reactor._providers.base",
    "Throttle": "reactor._agents.admission",
    "Tool": "reactor._providers.tools",
    "ToolCall": "reactor._providers.base",
    "ToolContext": "reactor._providers.tools",
    "ToolNotRecordedError": "reactor.exceptions",
    "ToolResult": "reactor._providers.base",
    "Trace": "reactor._prompts.trace",
    "Usage": "reactor._providers.base",
    "abandoned_threads": "reactor._signals.threads",
    "agent": "reactor._agents.agent",
    "current_signal": "reactor._signals.bus",
    "getenv": "reactor._providers.env",
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
"""Each public name, and the module it is loaded from on first use."""

__all__ = sorted(_PUBLIC)


def __getattr__(name: str) -> Any:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'reactor' has no attribute {name!r}")
    from reactor.exceptions._extras import importing

    with importing(what=f"reactor.{name}"):  # a part of an extra: one line naming it
        value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
