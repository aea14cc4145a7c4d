"""The public surface of each package is exactly what its __all__ lists."""

from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path
from types import ModuleType

import pytest

import reactor
import reactor.exceptions

PUBLIC_API = {
    "reactor": {
        "Agent",
        "AgentConfigError",
        "AgentContext",
        "AgentFailure",
        "AgentNotFoundError",
        "AnthropicProvider",
        "BackpressureError",
        "Batch",
        "Budget",
        "BudgetExceededError",
        "CapabilityError",
        "Channel",
        "CollectorTuning",
        "ConsoleChannel",
        "CycleWarning",
        "DatabaseError",
        "Debounce",
        "Deny",
        "Divergence",
        "End",
        "EntryNotFoundError",
        "EvalCase",
        "EvalReport",
        "EventNode",
        "EventTree",
        "GraphChangedError",
        "GraphValidationError",
        "HandlerError",
        "Hooks",
        "IdleTimeoutError",
        "Latest",
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
        "PermissionDeniedError",
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
        "RetryRefusedError",
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
        "SpendCap",
        "StructlogReporter",
        "Subscription",
        "SuggestionNotFoundError",
        "SuggestionResolvedError",
        "SuggestionStaleError",
        "TemplateError",
        "TemplateSecurityError",
        "TextComplete",
        "TextDelta",
        "ThinkingDelta",
        "Throttle",
        "Tool",
        "ToolCall",
        "ToolContext",
        "ToolNotRecordedError",
        "ToolResult",
        "Trace",
        "Usage",
        "abandoned_threads",
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
    },
    "stores": {
        "ReadOnlyStateError",
        "StateKeyError",
        "StateValidationError",
        "Store",
        "StoreBinding",
        "StoreError",
        "StoreSubscription",
        "TransactionError",
        "acting_as",
        "action",
        "actor_context",
        "create_store",
        "current_actor",
    },
    "migration": {
        "BindingError",
        "CheckResult",
        "EdgeSpec",
        "Flow",
        "FlowFailError",
        "FlowLoopError",
        "FlowPolicy",
        "FlowRunError",
        "FlowSpec",
        "FlowSpecError",
        "NodeContext",
        "NodeDifference",
        "NodeFunction",
        "NodePolicy",
        "NodeRegistry",
        "NodeSpec",
        "NodeTimeoutError",
        "RetryPolicy",
        "UnknownNodeTypeError",
        "check",
        "check_sync",
        "harness_to_reactive",
        "run_edge_harness",
        "run_edge_harness_sync",
        "scripted_provider",
        "to_python",
    },
    "reactor.exceptions": {
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
    },
    "reactor.otel": {"OpenTelemetryReporter", "tracer_provider_from_env"},
    "reactor.service": {
        "Actor",
        "AgentActor",
        "AgentConflictError",
        "AgentNotFoundError",
        "AgentObjects",
        "Approval",
        "Authenticator",
        "Capabilities",
        "CapabilityError",
        "Changes",
        "Create",
        "DatabaseError",
        "Delete",
        "EntryNotFoundError",
        "ExecutionMode",
        "IdleTimeoutError",
        "JWTAuth",
        "ObjectEvent",
        "ObjectNotFoundError",
        "ObjectStore",
        "ObjectValidationError",
        "Operation",
        "PermissionDeniedError",
        "Principal",
        "ProcessingEntry",
        "Reaction",
        "ReactionService",
        "RetryRefusedError",
        "ServiceConfigError",
        "ServiceError",
        "ServiceStateError",
        "Settings",
        "StoredObject",
        "Suggestion",
        "SuggestionNotFoundError",
        "SuggestionResolvedError",
        "SuggestionStaleError",
        "TokenAuth",
        "Update",
        "User",
        "create_app",
        "upgrade_database",
    },
    "reactor.testing": {
        "CapturedSignals",
        "ContractReport",
        "Failure",
        "FakeAnthropic",
        "Hang",
        "ScriptedProvider",
        "StoreContractError",
        "Text",
        "Thinking",
        "ToolUse",
        "Turn",
        "assert_signals",
        "capture_signals",
        "check_store_contract",
        "fake_anthropic",
        "signal_names",
        "turn",
    },
    "reactor.typing": {
        "EndCondition",
        "Guard",
        "Handler",
        "Inbox",
        "OnOutput",
        "Provider",
        "Reporter",
        "RunFunction",
        "RunLog",
        "RunReader",
        "SignalStore",
        "SignalStoreBase",
        "StoreAdmin",
    },
}


@pytest.mark.parametrize("package", sorted(PUBLIC_API))
def test_all_is_exactly_the_public_api(package: str) -> None:
    module = importlib.import_module(package)
    assert set(module.__all__) == PUBLIC_API[package]
    assert list(module.__all__) == sorted(module.__all__)
    for name in module.__all__:
        assert getattr(module, name) is not None
    assert set(module.__all__) <= set(dir(module))


@pytest.mark.parametrize("package", sorted(PUBLIC_API))
def test_public_names_are_documented(package: str) -> None:
    module = importlib.import_module(package)
    assert module.__doc__
    for name in module.__all__:
        value = getattr(module, name)
        if inspect.isclass(value) or inspect.isfunction(value):
            assert inspect.getdoc(value), f"{package}.{name} has no docstring"


def test_every_error_descends_from_reactor_error_and_a_builtin() -> None:
    errors = [
        getattr(reactor.exceptions, name)
        for name in reactor.exceptions.__all__
        if not issubclass(getattr(reactor.exceptions, name), Warning)
    ]
    assert reactor.exceptions.ReactorError in errors
    for error in errors:
        assert issubclass(error, reactor.exceptions.ReactorError)
        is_leaf = not any(other is not error and issubclass(other, error) for other in errors)
        if is_leaf:
            builtin_bases = [b for b in error.__mro__ if b.__module__ == "builtins"]
            assert builtin_bases[0] is not Exception, f"{error.__name__} has no builtin peer"
        assert error.__name__ in (reactor.exceptions.__doc__ or "")


@pytest.mark.parametrize("package", sorted(PUBLIC_API))
def test_public_names_import_from_their_package_in_a_fresh_interpreter(package: str) -> None:
    """``from <package> import <name>`` works for each public name, whatever moved inside."""
    import subprocess
    import sys

    names = ", ".join(sorted(PUBLIC_API[package]))
    code = f"from {package} import {names}"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def _typing_imports(package: ModuleType) -> dict[str, str]:
    """What the package's __init__.py imports under ``TYPE_CHECKING``: name -> module."""
    tree = ast.parse(Path(str(package.__file__)).read_text())
    block = next(
        node
        for node in tree.body
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"
    )
    found: dict[str, str] = {}
    for statement in block.body:
        assert isinstance(statement, ast.ImportFrom), ast.unparse(statement)
        for alias in statement.names:
            # `name as name`: re-exported for mypy --strict and IDEs (no literal __all__)
            assert alias.asname == alias.name, ast.unparse(statement)
            found[alias.name] = f"{statement.module}"
    return found


@pytest.mark.parametrize("name", ["reactor", "migration"])
def test_the_type_checking_imports_are_the_one_list_of_public_names(name: str) -> None:
    """A lazy package's names are listed once (``_PUBLIC``); what type checkers see agrees."""
    package = importlib.import_module(name)
    public: dict[str, str] = package._PUBLIC
    expected = "\n".join(
        f"    from {module} import {name} as {name}"
        for name, module in sorted(public.items(), key=lambda item: item[::-1])
    )
    assert _typing_imports(package) == public, (
        f"{name}/__init__.py's TYPE_CHECKING block must be:\n\nif TYPE_CHECKING:\n{expected}"
    )
    assert package.__all__ == sorted(public)


def test_each_public_name_of_reactor_is_loaded_from_its_home() -> None:
    """One documented home per name: reactor's own, or a public module it aliases."""
    lower = (
        "reactor.eval",
        "reactor.exceptions",
        "reactor.logging",
        "reactor.otel",
        "reactor.typing",
    )
    above = ("reactor.service", "reactor.testing")
    for name, module in reactor._PUBLIC.items():
        value = getattr(reactor, name)
        if not any(part.startswith("_") for part in module.split(".")):
            assert getattr(importlib.import_module(module), name) is value
            assert name in importlib.import_module(module).__all__, f"{module}.{name}"
            assert f":mod:`{module}`" in (reactor.__doc__ or ""), f"{module} is not named"
            continue
        for other in lower:  # a public home would be the one to load it from
            home = importlib.import_module(other)
            exported = name in home.__all__ and getattr(home, name) is value
            assert not exported, f"reactor.{name} lives in {other}: load it from there"
        for other in above:  # a re-export of reactor's name says it is an alias
            package = importlib.import_module(other)
            if name in package.__all__ and getattr(package, name) is value:
                assert f"reactor.{name}" in (package.__doc__ or ""), f"{other}.{name}"
