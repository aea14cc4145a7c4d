"""Shared bases, protocols and type aliases of reactor's public API.

Implement these to plug your own pieces in: a :class:`Provider` to run prompts on
another model (subclass it: it gives every optional member a default), a
:class:`Reporter` to watch runs, a :class:`SignalStore` to keep recordings somewhere
else (subclass :class:`SignalStoreBase`, which gives every optional member of the
contract a default; :class:`SignalStore` is the union of four roles, :class:`RunLog`,
:class:`RunReader`, :class:`Inbox` and :class:`StoreAdmin`, for code that needs one
alone). The aliases name the callables that agents and graphs take.

Each protocol is defined beside the code that uses it and gathered here, so that
``reactor.typing`` is the one place to look them up.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeAlias

from reactor._agents.context import AgentContext, RunView
from reactor._providers.base import Provider
from reactor._recording.store import Inbox, Reporter, RunLog, RunReader, SignalStore, StoreAdmin
from reactor._recording.storebase import SignalStoreBase
from reactor._signals.bus import Handler
from reactor._signals.patterns import Pattern

__all__ = [
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
]

Guard: TypeAlias = Callable[[AgentContext[Any]], Any] | str
"""An agent's ``when``: a predicate over the context, or a Jinja2 expression string."""

RunFunction: TypeAlias = Callable[[AgentContext[Any]], Any | Awaitable[Any]]
"""A handler agent's ``run``: returns the agent's output, sync or async."""

OnOutput: TypeAlias = Callable[[AgentContext[Any], Any], Any | Awaitable[Any]]
"""An agent's ``on_output``: receives the context and the validated output."""

EndCondition: TypeAlias = Callable[[RunView], Any] | Pattern
"""A graph's ``end_when``: a predicate over the run, or a signal pattern."""
