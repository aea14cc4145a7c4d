"""``reactor.trace()``: collect what ``agent.prompt()`` calls do outside a run.

Inside a run, prompts stream through the run's bus and land in its log. Outside one,
``async with reactor.trace() as trace:`` gives them a bus of their own: every prompt
made in the block (in tasks it starts too) emits its signals there, and
``trace.event_tree()`` shows them as a tree.
"""

from __future__ import annotations

import contextlib
import contextvars
import uuid
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from reactor._recording.eventtree import EventTree
from reactor._signals.bus import SignalBus

if TYPE_CHECKING:
    from reactor._providers.base import Provider, ProviderRequest, Usage
    from reactor._signals.signal import Signal

__all__ = ["Standalone", "Trace", "current_trace", "trace"]

_TRACE: contextvars.ContextVar[Trace | None] = contextvars.ContextVar("reactor_trace", default=None)


class Trace:
    """The signals of the prompts made inside a :func:`trace` block.

    Attributes:
        trace_id: Stamped on its signals as their ``run_id``.
        bus: Where the prompts emit (subscribe to watch them live).
        requests: What the providers were asked, by request hash.
        input_tokens: Tokens sent, over every call.
        output_tokens: Tokens received.
        cost_usd: What the calls cost; ``None`` once any call's cost is unknown.
    """

    def __init__(self) -> None:
        self.trace_id = f"trace_{uuid.uuid4().hex[:16]}"
        self.bus = SignalBus(run_id=self.trace_id)
        self.requests: dict[str, ProviderRequest] = {}
        self.input_tokens = 0
        self.output_tokens = 0
        self.cost_usd: float | None = 0.0

    @property
    def signals(self) -> tuple[Signal, ...]:
        """Every signal so far, in order."""
        return self.bus.history

    def event_tree(self) -> EventTree:
        """The prompts' signals as an :class:`~reactor.EventTree` (root: the trace)."""
        return EventTree.build(self.signals, name="trace")

    def record_request(self, request: ProviderRequest) -> None:
        """Keep what a provider was asked."""
        self.requests.setdefault(request.request_hash, request)

    def count_usage(
        self, usage: Usage, cost_usd: float | None, agent: str = "", model: str | None = None
    ) -> None:
        """Add a call's tokens and cost."""
        self.input_tokens += usage.input_tokens
        self.output_tokens += usage.output_tokens
        known = self.cost_usd is not None and cost_usd is not None  # unknown stays unknown
        self.cost_usd = self.cost_usd + cost_usd if known else None  # type: ignore[operator]

    def check_budget(self, agent: str, provider: Provider, request: ProviderRequest) -> None:
        """No budget applies to prompts made outside a run."""

    def __repr__(self) -> str:
        return f"<Trace {self.trace_id} {len(self.signals)} signals>"


@contextlib.asynccontextmanager
async def trace() -> AsyncIterator[Trace]:
    """Collect the signals of ``agent.prompt()`` calls made outside a run in the block.

    ::

        async with reactor.trace() as t:
            await analyst.prompt("Rate AAPL")
        print(t.event_tree().find(kind="prompt"))

    Prompts made inside a run belong to the run's log instead.
    """
    collected = Trace()
    token = _TRACE.set(collected)
    try:
        yield collected
    finally:
        _TRACE.reset(token)


def current_trace() -> Trace | None:
    """The innermost open trace, if any."""
    return _TRACE.get()


class Standalone:
    """Where a prompt outside any run and any trace emits: a bus nobody watches."""

    def __init__(self) -> None:
        self.bus = SignalBus()

    def record_request(self, request: Any) -> None:
        """Nothing keeps requests here."""

    def count_usage(
        self, usage: Any, cost_usd: float | None, agent: str = "", model: str | None = None
    ) -> None:
        """Nothing counts usage here."""

    def check_budget(self, agent: str, provider: Any, request: Any) -> None:
        """No budget applies here."""
