"""What your tests need to test reactor apps: offline providers, captured signals.

::

    from reactor.testing import ScriptedProvider, assert_signals, capture_signals

    def test_trader_buys() -> None:
        result = bot.run_sync(provider=ScriptedProvider({"analyst": ["up"]}))
        assert_signals(result, ["agent:analyst:completed", "agent:trader:completed"])

* :class:`ScriptedProvider`: offline, deterministic answers per agent (an alias of
  :class:`reactor.ScriptedProvider`, documented there).
* :func:`fake_anthropic`: an :class:`~reactor.AnthropicProvider` on the real
  ``anthropic`` SDK, talking to an in-process fake Messages endpoint
  (:class:`FakeAnthropic`) that speaks the real wire format: test what your agents
  send to Claude and how they handle its answers, tool calls and errors.
* :func:`capture_signals`: collects every signal of the runs started inside it.
* :func:`assert_signals`: checks that signals happened in a given order.
* :func:`check_store_contract`: the conformance suite of a signal store of your own
  (:class:`StoreContractError` names every check it fails).

With pytest, the plugin (installed with reactor) offers them as fixtures:
``reactor_signals``, ``scripted_provider`` and ``fake_anthropic``; see
:mod:`reactor.testing.plugin`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from reactor._providers.scripted import ScriptedProvider
from reactor.testing._capture import (
    CapturedSignals,
    assert_signals,
    capture_signals,
    signal_names,
)

if TYPE_CHECKING:
    from reactor.testing._contract import (
        ContractReport,
        StoreContractError,
        check_store_contract,
    )
    from reactor.testing._fake_anthropic import (
        Failure,
        FakeAnthropic,
        Hang,
        Text,
        Thinking,
        ToolUse,
        Turn,
        fake_anthropic,
        turn,
    )

__all__ = [
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
]

_FAKE = frozenset({"FakeAnthropic", "Failure", "Hang", "Text", "Thinking", "ToolUse", "Turn"})
_CONTRACT = frozenset({"ContractReport", "StoreContractError", "check_store_contract"})


def __getattr__(name: str) -> Any:
    # The fake endpoint needs the anthropic SDK, slow to import: load it on first use
    # (and the contract, which builds graphs, too).
    module = None
    if name in _FAKE or name in ("fake_anthropic", "turn"):
        module = "reactor.testing._fake_anthropic"
    elif name in _CONTRACT:
        module = "reactor.testing._contract"
    if module is not None:
        value = getattr(importlib.import_module(module), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'reactor.testing' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
