"""What agents' code sees: the activation context, and the run view of ``end_when``."""

from __future__ import annotations

import inspect
import math
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Generic, Protocol, overload

from typing_extensions import TypeVar

from reactor._signals.signal import Signal
from reactor.exceptions import ServiceStateError

if TYPE_CHECKING:
    from reactor._agents.spans import Span
    from reactor._providers.base import Provider
    from stores import Store

StateT = TypeVar("StateT", default=Any)
"""The state's type; a bare ``AgentContext`` reads the state as ``Any``."""
StoreT = TypeVar("StoreT", bound="Store[Any]", default=Any)
"""The store's type, for its actions: ``AgentContext[TradeState, TradeStore]``."""
AnswerT = TypeVar("AnswerT")
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

    async def context_ask(
        self,
        ctx: AgentContext[Any],
        key: object,
        question: str,
        choices: Sequence[str] | None,
        output: Any,
        timeout: float | None,  # noqa: ASYNC109 - ctx.ask's
    ) -> Any:
        """Ask a person ``question`` (a template) and wait for the answer."""
        ...

    async def context_receive(
        self,
        ctx: AgentContext[Any],
        key: object,
        timeout: float | None,  # noqa: ASYNC109 - ctx.receive's
    ) -> Any:
        """The next message sent to the context's agent (``inbox:<agent>``)."""
        ...

    async def context_sleep(
        self, ctx: AgentContext[Any], key: object, until: datetime, nth: int
    ) -> None:
        """Sleep until ``until``: the activation's ``nth`` durable timer."""
        ...

    def context_span(self, ctx: AgentContext[Any], kind: str, name: str) -> Span:
        """A phase or task of the context's agent."""
        ...

    def context_key(self, ctx: AgentContext[Any], label: str) -> str:
        """The idempotency key of the context's activation and ``label``."""
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
        "_batch",
        "_key",
        "_owner",
        "_sleeps",
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
        batch: Sequence[Any] | None = None,
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
        self._sleeps = 0
        self._batch = None if batch is None else list(batch)

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
    def batch(self) -> list[Any] | None:
        """The triggers admission merged into this activation, in arrival order (it last).

        In a run, the trigger signals (their ``.payload`` is what was sent) that an
        ``agent(admit=Debounce(..., deliver="batch"))`` or ``Batch(...)`` delivered at
        once; for a reaction agent, the object events (``.object``, ``.event``) its
        ``Reaction(admit=...)`` merged. ``None`` when nothing was merged: the activation
        has its one trigger (``ctx.signal``, ``ctx.object``).
        """
        if self._batch is not None:
            return self._batch
        found = self.scope.get("batch")
        return None if found is None else list(found)

    @property
    def object(self) -> Any:
        """The object whose change activated a reaction agent (``scope["object"]``)."""
        return self.scope.get("object")

    @property
    def objects(self) -> Any:
        """The service's object store, as this agent (``scope["objects"]``).

        Every run a ``ReactionService`` starts (``reactor serve``: graphs, cron and
        manual agents, reactions) has it; changes made through it are attributed to
        this agent and checked against its ``capabilities``.

        Raises:
            ServiceStateError: The run was started outside a service and given no
                ``scope={"objects": ...}``.
        """
        found = self.scope.get("objects")
        if found is None:
            raise ServiceStateError(
                f"Agent {self.agent!r} uses ctx.objects, but run {self.run_id} has no object "
                "store: the objects exist in runs that `reactor serve` or a ReactionService "
                "starts (graphs, cron and manual agents, reactions). Start it through the "
                "service (service.submit(...), POST /api/runs), or give the run one: "
                'run(..., scope={"objects": ObjectStore(...)}).'
            )
        return found

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
        return self._owned(f"emit {name!r}").context_emit(self, self._key, name, payload)

    @overload
    async def ask(
        self,
        question: str,
        *,
        choices: Sequence[str] | None = None,
        output: None = None,
        timeout: float | None = None,  # noqa: ASYNC109 - it also emits session:timeout
    ) -> Any: ...

    @overload
    async def ask(
        self,
        question: str,
        *,
        choices: None = None,
        output: type[AnswerT],
        timeout: float | None = None,  # noqa: ASYNC109 - it also emits session:timeout
    ) -> AnswerT: ...

    async def ask(
        self,
        question: str,
        *,
        choices: Sequence[str] | None = None,
        output: Any = None,
        timeout: float | None = None,  # noqa: ASYNC109 - it also emits session:timeout
    ) -> Any:
        """Ask a person and wait for the answer: ``await ctx.ask("Place it?", choices=[...])``.

        ``question`` is a Jinja2 template over the state, like prompts. Emits
        ``session:prompt``; the run waits (its status is ``waiting``) until
        ``handle.reply(prompt_id, answer)``, a reply posted to its store, or the
        timeout. The answer is one of ``choices``, an instance of ``output`` (a pydantic
        model or any type pydantic validates), or else text.

        Raises:
            PromptTimeoutError: Nobody answered within ``timeout`` seconds (the run
                emitted ``session:timeout``).
        """
        return await self._owned("ask").context_ask(
            self, self._key, question, choices, output, timeout
        )

    async def receive(self, *, timeout: float | None = None) -> Any:  # noqa: ASYNC109
        """The next message sent to this agent (``handle.send_to(agent, payload)``).

        Waits for one if none is waiting; the run stays in flight meanwhile. An agent
        that activates on its own ``inbox:<name>`` gets its messages as activations
        instead.

        Raises:
            TimeoutError: No message came within ``timeout`` seconds.
        """
        return await self._owned("receive").context_receive(self, self._key, timeout)

    async def sleep(self, seconds: float) -> None:
        """Sleep ``seconds`` as a durable timer: ``await ctx.sleep(3600)``.

        Emits ``timer:set {timer_id, agent, until}`` now and ``timer:fired`` when the
        time comes. The timer is in the log: if the process stops meanwhile, the
        resumed run waits only for what remains (a time already past fires at once),
        and a replay does not wait at all. While it sleeps the run is ``waiting``.

        Raises:
            ValueError: ``seconds`` is negative or not a number.
        """
        if not isinstance(seconds, int | float) or not math.isfinite(seconds) or seconds < 0:
            raise ValueError(f"ctx.sleep takes a number of seconds >= 0, got {seconds!r}.")
        await self.sleep_until(datetime.now(UTC) + timedelta(seconds=seconds))

    async def sleep_until(self, when: datetime) -> None:
        """Sleep until ``when`` (an aware ``datetime``) as a durable timer (see :meth:`sleep`).

        Raises:
            ValueError: ``when`` has no time zone.
        """
        if not isinstance(when, datetime) or when.tzinfo is None:
            raise ValueError(
                f"ctx.sleep_until takes an aware datetime (with a time zone, e.g. "
                f"datetime(..., tzinfo=UTC)), got {when!r}."
            )
        self._sleeps += 1
        await self._owned("sleep").context_sleep(self, self._key, when, self._sleeps)

    def idempotency_key(self, label: str = "") -> str:
        """A key that is the same every time this activation runs, for an effect outside.

        Derived from the run, the agent, the ``seq`` of the signal that triggered the
        activation, and ``label``: an activation that runs again (after a crash, on
        resume) gets the same key, every other activation (or label) another. Give it
        to the broker as ``client_order_id``, to a payment API as its idempotency
        header, so that an effect asked for twice happens once::

            broker.buy("AAPL", 10, client_order_id=ctx.idempotency_key("buy"))

        ``label`` tells apart the effects of one activation (``"buy"``, ``"hedge"``).
        """
        return self._owned("make an idempotency key").context_key(self, label)

    def phase(self, name: str) -> Span:
        """``async with ctx.phase(name):`` a stage of the work, as ``phase:*`` signals."""
        return self._owned("phase").context_span(self, "phase", name)

    def task(self, name: str) -> Span:
        """``async with ctx.task(name):`` a unit of work, as ``task:*`` signals."""
        return self._owned("task").context_span(self, "task", name)

    async def step(self, name: str, fn: Callable[[], _T | Awaitable[_T]]) -> _T:
        """Run ``fn()`` (sync or async) as a task named ``name``; return what it returns.

        The same as ``async with ctx.task(name): fn()``: ``task:start`` and
        ``task:complete`` / ``task:failed`` frame it, and what it emits (prompts
        included) hangs under the task in the causal tree and the event tree.
        """
        async with self.task(name):
            result = fn()
            if inspect.isawaitable(result):
                result = await result
        return result

    async def spawn(self, graph: Any, *, input: Any = None, **options: Any) -> Any:
        """Run ``graph`` (a :class:`~reactor.Reactive`) as a child run; return its result.

        The child is recorded with ``parent_run_id`` (in this run's store, on this run's
        provider, unless ``options`` say otherwise), its event tree hangs under the
        ``spawn:start`` it emits here, and it is cancelled with its parent.
        """
        return await self._owned("spawn a child run").context_spawn(self, graph, input, options)

    def _owned(self, what: str) -> ContextOwner:
        owner = self._owner
        if owner is None:
            raise RuntimeError(f"{self!r} belongs to no run: it cannot {what}.")
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
