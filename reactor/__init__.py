"""reactor: a declarative, reactive framework for LLM agents.

State changes emit signals; agents subscribe to signals; the workflow emerges from
what reacts to what. This package holds the core: signals, the bus, agents, the
runtime, providers, recording, logging and the CLI.
"""

from __future__ import annotations

from reactor._bus import SignalBus, Subscription, current_signal
from reactor._patterns import Pattern
from reactor._signal import Signal
from reactor._stream import SignalStream
from reactor.exceptions import HandlerError, PatternError, ReactorError, SignalNameError

__all__ = [
    "HandlerError",
    "Pattern",
    "PatternError",
    "ReactorError",
    "Signal",
    "SignalBus",
    "SignalNameError",
    "SignalStream",
    "Subscription",
    "current_signal",
]

__version__ = "0.1.0"
