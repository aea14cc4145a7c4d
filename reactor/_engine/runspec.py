"""What a run is made of, seen from outside the engine: its graph, and who watches it."""

from __future__ import annotations

import contextlib
import contextvars
import operator
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from reactor._agents.agent import Agent
from reactor._agents.context import RunView
from reactor._agents.fingerprint import recorded_fingerprints
from reactor._signals.bus import SignalBus
from reactor._signals.patterns import compile_pattern
from reactor._signals.signal import Signal
from stores import Store

if TYPE_CHECKING:
    from reactor._activation.agentrun import AgentRun
    from reactor._signals.views import DictView

__all__ = ["GraphSpec", "end_check", "graph_fingerprints", "watchers", "watching"]

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


_PRINTS: weakref.WeakKeyDictionary[Any, tuple[tuple[Agent, ...], tuple[str, ...], DictView]] = (
    weakref.WeakKeyDictionary()
)


def graph_fingerprints(graph: GraphSpec, agents: Sequence[AgentRun]) -> DictView:
    """What ``harness:start`` records of ``graph``'s agents (``agents``, this run's).

    Made once per graph and shared by its runs while its agents stay the same ones
    (a graph's ``agents`` may be changed between runs: then they are made again).
    """
    try:
        known = _PRINTS.get(graph)
    except TypeError:  # a graph that cannot be weakly referred to: no cache
        return recorded_fingerprints(graph.agents)
    if (
        known is not None
        and len(known[0]) == len(agents)
        # the same agents under the same names (map: no generator frame per run)
        and all(map(operator.is_, known[0], map(_AGENT, agents)))
        and all(map(operator.eq, known[1], map(_NAME, agents)))
    ):
        return known[2]
    prints = recorded_fingerprints(graph.agents)
    _PRINTS[graph] = (tuple(map(_AGENT, agents)), tuple(map(_NAME, agents)), prints)
    return prints


_AGENT = operator.attrgetter("agent")
_NAME = operator.attrgetter("name")


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
