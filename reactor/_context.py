"""What agents' code sees: the activation context, and the run view of ``end_when``."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Generic, Protocol

from typing_extensions import TypeVar

from reactor._signal import Signal

if TYPE_CHECKING:
    from reactor._providers.base import Provider
    from stores import Store

StateT = TypeVar("StateT", default=Any)
"""The state's type; a bare ``AgentContext`` reads the state as ``Any``."""
StoreT = TypeVar("StoreT", bound="Store[Any]", default=Any)
"""The store's type, for its actions: ``AgentContext[TradeState, TradeStore]``."""
_T = TypeVar("_T")

__all__ = ["AgentContext", "RunView"]


class ContextOwner(Protocol):
    """What a context calls back into: the activation code of its run."""

    def context_emit(self, ctx: AgentContext[Any], key: object, name: str, payload: Any) -> Signal:
        """Emit ``name`` from the context's agent."""
        ...

    def context_provider(self, ctx: AgentContext[Any], key: object) -> Provider | None:
        """The provider handler code of the context's agent calls through the run."""
        ...

    async def context_step(self, ctx: AgentContext[Any], name: str, fn: Callable[[], Any]) -> Any:
        """Run ``fn`` as a step of the context's activation."""
        ...

    async def context_spawn(
        self, ctx: AgentContext[Any], graph: Any, input: Any, options: Mapping[str, Any]
    ) -> Any:
        """Run ``graph`` as a child run of the context's run."""
        ...


class AgentContext(Generic[StateT, StoreT]):
    """Passed to ``run`` handlers, ``when`` guards and ``on_output``.

    Generic in the state's type and the store's: in a graph over a ``TradeStore``
    holding a ``TradeState``, annotate handlers with ``AgentContext[TradeState]`` and
    ``ctx.state`` is typed; ``AgentContext[TradeState, TradeStore]`` types
    ``ctx.store``'s actions too. A bare ``AgentContext`` reads both as ``Any``.

    Attributes:
        agent: The agent's name.
        run_id: The run's id.
        signal: The signal that triggered this activation.
        input: The run's input.
        store: The run's store (write through its actions, ``set`` or ``update``).
        scope: Named values the run was given (``run(..., scope={...})``).
    """

    __slots__ = (
        "_key",
        "_owner",
        "agent",
        "emitted",
        "input",
        "run_id",
        "scope",
        "signal",
        "store",
    )

    def __init__(
        self,
        agent: str,
        run_id: str,
        signal: Signal,
        input: Any,
        store: StoreT,
        owner: ContextOwner | None = None,
        key: object = None,
        scope: Mapping[str, Any] | None = None,
    ) -> None:
        self.agent = agent
        self.run_id = run_id
        self.signal = signal
        self.input = input
        self.store = store
        self._owner = owner
        self._key = key
        self.scope: Mapping[str, Any] = scope or {}
        self.emitted: set[str] | None = None

    @property
    def provider(self) -> Provider | None:
        """The agent's provider (its own, else the run's), for a handler to call a model.

        Calls made through it stream through the run: they are signalled like an LLM
        agent's (``provider:start`` ... ``provider:end``, caused by this activation),
        counted in the run's metrics and recordings, and answered from the recording
        during a replay. ``None`` if neither the agent nor the run has a provider.
        """
        owner = self._owner
        return None if owner is None else owner.context_provider(self, self._key)

    @property
    def object(self) -> Any:
        """The object whose change activated a reaction agent (``scope["object"]``)."""
        return self.scope.get("object")

    @property
    def objects(self) -> Any:
        """The object store a reaction agent works on (``scope["objects"]``).

        Changes made through it are attributed to this agent.
        """
        return self.scope.get("objects")

    @property
    def state(self) -> StateT:
        """The current state, read-only (each read is a consistent snapshot)."""
        state: StateT = self.store.state
        return state

    def emit(self, name: str, payload: Any = None) -> Signal:
        """Emit a signal from this agent (its ``caused_by`` is this activation).

        A name listed in the agent's ``emits`` is then not emitted again with the
        output; a name not listed works too, but is logged once as undeclared, since
        the graph is validated and drawn from ``emits``.
        """
        owner = self._owner
        if owner is None:
            raise RuntimeError(f"{self!r} belongs to no run: it cannot emit {name!r}.")
        return owner.context_emit(self, self._key, name, payload)

    async def step(self, name: str, fn: Callable[[], _T | Awaitable[_T]]) -> _T:
        """Run ``fn()`` (sync or async) as a named step and return what it returns.

        ``step:start`` / ``step:end {name, agent, duration_ms, error}`` frame it, and
        what it emits (prompts included) hangs under the step in the causal tree and
        the event tree. An exception is re-raised after ``step:end`` records it.
        """
        return await self._run_owner().context_step(self, name, fn)  # type: ignore[no-any-return]

    async def spawn(self, graph: Any, *, input: Any = None, **options: Any) -> Any:
        """Run ``graph`` (a :class:`~reactor.Reactive`) as a child run; return its result.

        The child is recorded with ``parent_run_id`` (in this run's store, on this run's
        provider, unless ``options`` say otherwise), its event tree hangs under the
        ``spawn:start`` it emits here, and it is cancelled with its parent.
        """
        return await self._run_owner().context_spawn(self, graph, input, options)

    def _run_owner(self) -> ContextOwner:
        owner = self._owner
        if owner is None:
            raise RuntimeError(f"{self!r} belongs to no run: it cannot run steps or child runs.")
        return owner

    def __repr__(self) -> str:
        return f"<AgentContext agent={self.agent!r} signal={self.signal.name!r}>"


class RunView:
    """What a callable ``end_when`` receives: ``end_when=lambda run: run.state.done``.

    Attributes:
        signal: The signal that was just dispatched.
        input: The run's input.
        run_id: The run's id.
    """

    __slots__ = ("_history", "_store", "input", "run_id", "signal")

    def __init__(
        self,
        signal: Signal,
        store: Store[Any],
        history: Callable[[], tuple[Signal, ...]],
        input: Any,
        run_id: str,
    ) -> None:
        self.signal = signal
        self.input = input
        self.run_id = run_id
        self._store = store
        self._history = history

    @property
    def state(self) -> Any:
        """The current state, read-only."""
        return self._store.state

    @property
    def signals(self) -> tuple[Signal, ...]:
        """Every signal of the run so far, in order."""
        return self._history()
