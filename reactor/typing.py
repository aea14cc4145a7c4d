"""Shared protocols and type aliases of reactor's public API.

Implement these to plug your own pieces in: a :class:`Provider` to run prompts on
another model, a :class:`Reporter` to watch runs.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias, runtime_checkable

from reactor._patterns import Pattern
from reactor._provider import ProviderEvent, ProviderRequest
from reactor._signal import Signal

if TYPE_CHECKING:
    from reactor._context import AgentContext, RunView
    from reactor._recording import Recording, RunInfo

__all__ = [
    "EndCondition",
    "Guard",
    "Handler",
    "OnOutput",
    "Provider",
    "Reporter",
    "RunFunction",
    "SignalStore",
]

Handler: TypeAlias = Callable[[Signal], object]
"""A signal subscriber: called synchronously with each matching signal."""

Guard: TypeAlias = "Callable[[AgentContext], Any] | str"
"""An agent's ``when``: a predicate over the context, or a Jinja2 expression string."""

RunFunction: TypeAlias = "Callable[[AgentContext], Any | Awaitable[Any]]"
"""A handler agent's ``run``: returns the agent's output, sync or async."""

OnOutput: TypeAlias = "Callable[[AgentContext, Any], Any | Awaitable[Any]]"
"""An agent's ``on_output``: receives the context and the validated output."""

EndCondition: TypeAlias = "Callable[[RunView], Any] | Pattern"
"""A graph's ``end_when``: a predicate over the run, or a signal pattern."""


@runtime_checkable
class Provider(Protocol):
    """Runs one agent request on a model and streams what happens.

    ``stream`` yields :data:`reactor.ProviderEvent` values (text deltas, tool calls and
    results, ...) and ends with exactly one ``End`` carrying the output. The runtime
    turns each event into a signal on the run's bus. Raise
    :class:`reactor.ProviderError` on failure, with ``retryable`` set.
    """

    def stream(self, request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
        """Stream the answer to ``request``."""
        ...


@runtime_checkable
class Reporter(Protocol):
    """Watches a run: ``on_signal`` is called for each signal matching ``patterns``.

    Pass reporters with ``graph.run(..., reporters=[...])``. ``on_signal`` runs
    synchronously during dispatch, so keep it fast (buffer, don't block).
    """

    patterns: Sequence[Pattern]

    def on_signal(self, signal: Signal) -> None:
        """Receive one signal."""
        ...


@runtime_checkable
class SignalStore(Protocol):
    """Keeps recordings: ``graph.run(..., record=store)`` writes a run to it.

    ``start_run`` registers a run (graph, tags), ``append`` receives every signal as
    it is dispatched (it must not block: queue and write elsewhere), ``flush`` makes
    everything appended durable, and ``load``/``runs``/``delete`` read and manage
    recordings. A store may also implement ``record_request(run_id, request_hash,
    fingerprint)`` to keep what each provider call was asked, which lets replay name
    the first field that changed.
    """

    def start_run(self, info: RunInfo) -> None:
        """Register a run about to be recorded."""
        ...

    def append(self, signal: Signal) -> None:
        """Record one signal (quickly: this runs during dispatch)."""
        ...

    def flush(self) -> None:
        """Make everything appended so far durable."""
        ...

    def load(self, run_id: str) -> Recording:
        """Return a recorded run (raise ``RunNotFoundError`` if unknown)."""
        ...

    def runs(
        self, *, graph: str | None = None, tag: str | None = None, limit: int | None = None
    ) -> list[RunInfo]:
        """Recorded runs, newest first."""
        ...

    def delete(self, run_id: str) -> bool:
        """Delete a run; return whether it existed."""
        ...
