"""What a run is made of, seen from outside the engine: its graph, and who watches it."""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Protocol

from reactor._agents.agent import Agent
from reactor._agents.context import RunView
from reactor._signals.bus import SignalBus
from reactor._signals.patterns import compile_pattern
from reactor._signals.signal import Signal
from stores import Store

__all__ = ["GraphSpec", "end_check", "watchers", "watching"]

_WATCHERS: contextvars.ContextVar[tuple[Callable[[Signal], object], ...]] = contextvars.ContextVar(
    "reactor_watchers", default=()
)


@contextlib.contextmanager
def watching(handler: Callable[[Signal], object]) -> Iterator[None]:
    """Give ``handler`` every signal of each run started in this context.

    Runs started in tasks created inside the block are watched too (they inherit the
    context). ``reactor.testing.capture_signals`` is built on it.
    """
    token = _WATCHERS.set((*_WATCHERS.get(), handler))
    try:
        yield
    finally:
        _WATCHERS.reset(token)


class GraphSpec(Protocol):
    """What a run needs of its graph (:class:`reactor.Reactive` is one)."""

    @property
    def name(self) -> str | None:
        """The graph's name."""
        ...

    @property
    def agents(self) -> Mapping[str, Agent]:
        """Agents by name."""
        ...

    @property
    def state(self) -> Any:
        """What each run's store is made from."""
        ...

    @property
    def end_when(self) -> Any:
        """A predicate over the run, a signal pattern, or ``None``."""
        ...

    @property
    def single(self) -> bool:
        """Whether the graph is one agent run on its own (its output is the result)."""
        ...


def watchers() -> tuple[Callable[[Signal], object], ...]:
    """The handlers :func:`watching` gave runs started in this context."""
    return _WATCHERS.get()


def end_check(
    end_when: Any, store: Store[Any], bus: SignalBus, input: Any, run_id: str
) -> Callable[[Signal], bool] | None:
    """A graph's ``end_when`` as a test of each dispatched signal (``None``: no test)."""
    if end_when is None:
        return None
    if isinstance(end_when, str) or not callable(end_when):
        matcher = compile_pattern(end_when)
        return lambda signal: matcher(signal.name)

    def check(signal: Signal) -> bool:
        return bool(end_when(RunView(signal, store, lambda: bus.history, input, run_id)))

    return check
