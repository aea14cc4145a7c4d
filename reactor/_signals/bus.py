"""The SignalBus: FIFO dispatch of signals to subscribers, built on blinker.

Design notes (why it looks like this):

* One ``blinker.Signal`` per distinct signal name is the registry of receivers
  (created when the first subscription connects to the name; a name nobody listens to
  needs none). A subscription is connected (strongly) to the blinker signal of every
  name it matches: exact names at once, patterns to every name seen and to new names
  as they appear (a bus with no pattern, a run's, keeps no table of names). Matching
  costs once per (name, pattern), never per emit.
* Delivery walks the blinker signal's receivers in connection order, one call per
  subscription, each in its own ``try``. blinker's own ``send`` is not used for
  delivery because it leaves the order undefined and stops at the first receiver that
  raises, and the bus promises both subscription order and isolation. The ordered
  receivers are cached per name and rebuilt only when a subscription changes.
* Dispatch is FIFO: a signal emitted while another is being dispatched is queued, so
  every subscriber sees a signal before anything it caused.
* The signal being dispatched lives in a ``ContextVar`` while its subscribers run;
  ``emit`` reads it to fill ``caused_by`` and ``depth`` (the runtime sets it inside
  activations too). The runtime's hooks (router, after-dispatch) run without it, as
  setting it costs more than dispatching a signal nobody subscribed to: they name causes.
* A subscriber that raises is logged, and ``bus:handler_error`` says so, except on the
  last signal of a run (``harness:end`` stays last) or on that error signal itself.
"""

from __future__ import annotations

import contextvars
import inspect
import time
from collections import deque
from collections.abc import Callable, Container, Iterable, Sized
from types import TracebackType
from typing import Any, Self, cast

import blinker

from reactor._signals.diagnostics import log
from reactor._signals.names import BUS_HANDLER_ERROR, HARNESS_END, error_info
from reactor._signals.patterns import (
    VALID_NAMES,
    Matcher,
    Pattern,
    compile_pattern,
    is_exact,
    normalize_patterns,
    validate_name,
)
from reactor._signals.signal import Signal, new_signal
from reactor._signals.stream import SignalStream
from reactor.exceptions import HandlerError

__all__ = [
    "Handler",
    "SignalBus",
    "Subscription",
    "current_signal",
    "pop_cause",
    "push_cause",
    "set_current_signal",
]

Handler = Callable[[Signal], object]
"""A signal subscriber: called synchronously with each matching signal."""
_SILENT = frozenset({BUS_HANDLER_ERROR, HARNESS_END})
_NO_SIGNALS: dict[str, blinker.Signal] = {}
_NO_HANDLERS: dict[str, tuple[Handler, ...]] = {}
_IDS = ["sig_0"]
"""Signal ids by ``seq``, shared by every run (thousands of small runs kept in memory
would otherwise hold thousands of copies of ``sig_1``); grown as seqs first appear."""
_SHARED_IDS = 4_096
_CURRENT: contextvars.ContextVar[Signal | None] = contextvars.ContextVar(
    "reactor_current_signal", default=None
)


def current_signal() -> Signal | None:
    """Return the signal being handled in this context, or ``None`` outside any dispatch.

    Inside an agent activation this is the activation's own ``agent:<name>:activated``.
    """
    return _CURRENT.get()


set_current_signal = _CURRENT.set
"""Make a signal the cause of what this context emits from now on.

The runtime calls it at the start of each activation's task (which runs in its own copy
of the context), so everything the activation emits hangs under its
``agent:<name>:activated``. (The variable's own ``set``: no Python frame per activation.)
"""


def push_cause(signal: Signal | None) -> contextvars.Token[Signal | None]:
    """Make ``signal`` the cause of what this context emits until :func:`pop_cause`.

    For blocks whose signals hang under their own (``ctx.task(name)``: its ``task:start``).
    """
    return _CURRENT.set(signal)


def pop_cause(token: contextvars.Token[Signal | None]) -> None:
    """Restore the cause :func:`push_cause` replaced."""
    _CURRENT.reset(token)


class Subscription:
    """A live connection of one handler to one or more patterns.

    Returned by :meth:`SignalBus.subscribe`. Cancel it with :meth:`cancel`, or use it as
    a context manager to cancel on exit. Cancelling twice is harmless.

    Attributes:
        patterns: The patterns subscribed to, de-duplicated, in the order given.
        handler: The callable that receives each matching :class:`Signal`.
    """

    __slots__ = ("_bus", "_names", "active", "handler", "matcher", "patterns")

    def __init__(self, bus: SignalBus, patterns: tuple[Pattern, ...], handler: Handler) -> None:
        self._bus = bus
        self._names: list[str] = []
        self.patterns = patterns
        self.handler = handler
        self.active = True
        matchers = [compile_pattern(p) for p in patterns if not is_exact(p)]
        self.matcher: Matcher | None = (
            matchers[0]
            if len(matchers) == 1
            else (lambda name: any(m(name) for m in matchers))
            if matchers
            else None
        )

    def __call__(self, signal: Signal) -> object:
        """Deliver ``signal``; this is the receiver connected to blinker."""
        return self.handler(signal)

    def cancel(self) -> None:
        """Stop delivering signals to the handler."""
        if self.active:
            self.active = False
            self._bus._unsubscribe(self)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.cancel()

    def __repr__(self) -> str:
        state = "active" if self.active else "cancelled"
        return f"<Subscription {list(self.patterns)!r} -> {_describe(self.handler)} ({state})>"


class SignalBus:
    """Emits signals and dispatches them, in FIFO order, to subscribed handlers.

    Handlers are plain (synchronous) callables taking a :class:`Signal`. Use
    :meth:`signals` to consume signals from async code.

    Args:
        history_limit: Keep only the last ``N`` signals in :attr:`history` (``None``
            keeps all; a recorder keeps everything on disk).
        run_id: Stamped on every signal this bus emits.

    The bus is not thread-safe: emit from the thread that runs the event loop (from
    other threads, use ``loop.call_soon_threadsafe``).
    """

    # One per run: slots, not a dict of attributes (thousands of runs may be in flight).
    __slots__ = (
        "__weakref__",
        "_after",
        "_after_if",
        "_dispatching",
        "_handlers",
        "_history",
        "_pattern_subs",
        "_queue",
        "_router",
        "_seq",
        "_signals",
        "_unrouted",
        "history_limit",
        "run_id",
        "sealed",
    )

    def __init__(self, history_limit: int | None = None, *, run_id: str | None = None) -> None:
        if history_limit is not None and history_limit < 0:
            raise ValueError(f"history_limit must be None or >= 0, got {history_limit}.")
        self.run_id, self.history_limit = run_id, history_limit
        self._history: deque[Signal] | list[Signal] = (
            [] if history_limit is None else deque(maxlen=history_limit)
        )
        self._seq = 0
        self._queue: list[Signal] = []  # waiting for dispatch; drained from the front
        self._dispatching = False
        # Shared empty tables until the first subscription (most runs' buses have none).
        self._signals: dict[str, blinker.Signal] = _NO_SIGNALS
        self._handlers: dict[str, tuple[Handler, ...]] = _NO_HANDLERS
        self._pattern_subs: tuple[Subscription, ...] = ()
        self._after: Handler | None = None
        self._after_if: Sized | None = None  # call _after only while this is not empty
        self._router: Handler | None = None
        self._unrouted: Container[str] = ()  # names the router has nothing to do for
        self.sealed = False  # see seal()

    # -- emitting ----------------------------------------------------------------

    def emit(
        self,
        name: str,
        payload: Any = None,
        *,
        source: str | None = None,
        cause: Signal | None = None,
    ) -> Signal:
        """Emit a signal and return it.

        If no dispatch is in progress, the signal and everything it causes are
        dispatched before ``emit`` returns; otherwise it is queued behind the signals
        already waiting.

        Args:
            name: The signal's name, e.g. ``"trade:proposed"``.
            payload: Any value pydantic can serialize.
            source: Who emits it (``"user"``, an agent's name, ...).
            cause: The signal this one is a consequence of. By default it is the signal
                being handled in the current context (none outside a dispatch), so
                handlers and agents never need to pass it; give it when reacting to a
                signal received elsewhere, e.g. from :meth:`signals`.

        Raises:
            SignalNameError: ``name`` is malformed.
        """
        parent = _CURRENT.get() if cause is None else cause
        if parent is None:
            return self.publish(name, payload, source, None, 0)
        return self.publish(name, payload, source, parent.id, parent.depth)

    def publish(
        self,
        name: str,
        payload: Any,
        source: str | None,
        caused_by: str | None,
        depth: int,
    ) -> Signal:
        """Emit a signal with explicit causality, whatever signal is being handled now.

        ``caused_by`` is the cause's id (``None`` for a root) and ``depth`` the number of
        activations above it. The runtime uses it for signals whose cause is not the
        current context's: an activation (caused by its trigger), ``harness:end`` and
        outside input (roots).
        """
        if name not in self._handlers and (self._pattern_subs or name not in VALID_NAMES):
            self._resolve(name) if self._pattern_subs else validate_name(name)
        if self.sealed:  # said to nobody, numbered nothing: see seal()
            return new_signal(name, payload, "", 0, time.time(), source, caused_by, depth, None)
        self._seq = seq = self._seq + 1
        ids = _IDS  # every run numbers from 1: its first ids are the same strings
        if seq < len(ids):
            signal_id = ids[seq]
        else:
            signal_id = f"sig_{seq}"
            if seq == len(ids) and seq < _SHARED_IDS:
                ids.append(signal_id)
        signal = new_signal(
            name, payload, signal_id, seq, time.time(), source, caused_by, depth, self.run_id
        )
        self._history.append(signal)
        self._queue.append(signal)
        if not self._dispatching:
            self._drain()
        return signal

    def _drain(self) -> None:
        queue = self._queue
        after = self._after
        after_if = self._after_if
        router = self._router
        unrouted = self._unrouted
        self._dispatching = True
        done = 0
        try:
            for signal in queue:  # a list's iterator sees what is appended meanwhile
                done += 1
                name = signal.name
                handlers = self._handlers.get(name, ())  # a handler may subscribe
                if router is not None and name not in unrouted:
                    try:
                        router(signal)
                    except Exception as exc:
                        self._handler_failed(router, signal, exc)
                if handlers:
                    token = _CURRENT.set(signal)
                    try:
                        for handler in handlers:
                            try:
                                handler(signal)
                            except Exception as exc:
                                self._handler_failed(handler, signal, exc)
                    finally:
                        _CURRENT.reset(token)
                if after is not None and (after_if is None or after_if):
                    try:
                        after(signal)
                    except Exception as exc:
                        self._handler_failed(after, signal, exc)
        finally:
            del queue[:done]
            self._dispatching = False

    def _handler_failed(self, handler: Handler, signal: Signal, exc: Exception) -> None:
        described = _describe(handler)
        log(
            "reactor.bus",
            "error",
            "signal handler raised",
            handler=described,
            signal=signal.name,
            signal_id=signal.id,
            exc_info=exc,
        )
        if signal.name not in _SILENT:
            self.emit(
                BUS_HANDLER_ERROR,
                {
                    "handler": described,
                    "signal": signal.name,
                    "signal_id": signal.id,
                    "error": error_info(exc),
                },
                source="bus",
                cause=signal,
            )

    # -- subscribing -------------------------------------------------------------

    def subscribe(self, patterns: Pattern | Iterable[Pattern], handler: Handler) -> Subscription:
        """Call ``handler(signal)`` for every signal whose name matches ``patterns``.

        Handlers of one signal are called in subscription order; a handler that raises
        does not stop the others (the error is logged and emitted as
        ``bus:handler_error``). A subscription matching one name through several
        patterns is still called once per signal.

        Args:
            patterns: One pattern or an iterable of patterns (see :mod:`reactor`).
            handler: A synchronous callable; use :meth:`signals` for async consumers.

        Returns:
            The :class:`Subscription`; cancel it, or use it as a context manager.

        Raises:
            PatternError: A pattern is malformed.
            HandlerError: ``handler`` is not callable or is a coroutine function.
        """
        normalized = normalize_patterns(patterns)
        if not callable(handler):
            raise HandlerError(f"A handler must be callable, got {handler!r}.")
        if inspect.iscoroutinefunction(handler):
            raise HandlerError(
                f"Handler {_describe(handler)} is async, but handlers run synchronously "
                "during dispatch. Consume signals with `async for s in bus.signals(...)` "
                "or schedule your coroutine from a synchronous handler."
            )
        if self._handlers is _NO_HANDLERS:  # this bus's own tables, from now on
            self._signals, self._handlers = {}, {}
        subscription = Subscription(self, normalized, handler)
        names = [p for p in normalized if is_exact(p)]
        for name in cast(list[str], names):
            if name not in self._handlers:
                self._resolve(name)
            self._connect(subscription, name)
        if subscription.matcher is not None:
            matcher = subscription.matcher
            for name in list(self._handlers):
                if matcher(name):
                    self._connect(subscription, name)
            self._pattern_subs = (*self._pattern_subs, subscription)
        return subscription

    def _resolve(self, name: str) -> tuple[Handler, ...]:
        """Register a name seen for the first time and connect matching patterns."""
        validate_name(name)
        self._handlers[name] = ()
        for subscription in self._pattern_subs:
            if subscription.matcher is not None and subscription.matcher(name):
                self._connect(subscription, name)
        return self._handlers[name]

    def _connect(self, subscription: Subscription, name: str) -> None:
        signal = self._signals.get(name)
        if signal is None:  # created when a first subscription connects
            signal = self._signals[name] = blinker.Signal(name)
        if id(subscription) in signal.receivers:
            return
        signal.connect(subscription, weak=False)
        subscription._names.append(name)
        # blinker appends the receiver last, so the ordered tuple just grows by one.
        self._handlers[name] = (*self._handlers[name], subscription.handler)

    def _unsubscribe(self, subscription: Subscription) -> None:
        for name in subscription._names:
            self._signals[name].disconnect(subscription)
            self._refresh(name)
        subscription._names.clear()
        self._pattern_subs = tuple(s for s in self._pattern_subs if s is not subscription)

    def _refresh(self, name: str) -> None:
        receivers = cast(dict[Any, Subscription], self._signals[name].receivers)
        self._handlers[name] = tuple(r.handler for r in receivers.values())

    def set_after_dispatch(self, hook: Handler | None, *, only_if: Sized | None = None) -> None:
        """Call ``hook(signal)`` after all handlers of every signal (runtime use).

        It runs outside the signal's context: what it emits gives ``cause=``. With
        ``only_if`` (a collection the hook works through, such as a run's pending
        activations), it is called only while that is not empty: most signals of a run
        leave nothing for it to do, and a length check costs no call.
        """
        self._after = hook
        self._after_if = only_if

    def preload(self, signals: Iterable[Signal]) -> None:
        """Start from a recorded log: ``signals`` become the history, numbering goes on.

        For a resumed run (runtime use): the run keeps its id and its log, and what it
        emits next follows the last recorded ``seq``. Call it before the first emit.
        """
        for signal in signals:
            self._history.append(signal)
            self._seq = max(self._seq, signal.seq)

    def seal(self) -> None:
        """Emit nothing more (runtime use): a suspended run's last signal stays its last.

        What is published later (what was in flight, cancelled) gets no ``seq``, no
        history and no subscriber: nobody sees a signal the log lacks.
        """
        self.sealed = True

    def set_router(self, router: Handler | None, *, unrouted: Container[str] = ()) -> None:
        """Call ``router(signal)`` first for every signal (runtime use).

        A run routes signals to its agents' triggers through a table made once per
        graph, instead of one subscription per agent per run: a run of a small graph
        then sets up no subscriptions at all. Set it before the first emit. It runs
        outside the signal's context, like the after-dispatch hook. ``unrouted`` names
        signals the router has nothing to do for (the table knows them, and nothing
        records them): those skip the call.
        """
        self._router = router
        self._unrouted = unrouted

    # -- reading -----------------------------------------------------------------

    @property
    def history(self) -> tuple[Signal, ...]:
        """Emitted signals in ``seq`` order (the last ``history_limit`` if set)."""
        return tuple(self._history)

    @property
    def last_seq(self) -> int:
        """The ``seq`` of the last emitted signal (0 before the first)."""
        return self._seq

    def signals(
        self,
        patterns: Pattern | Iterable[Pattern] = "**",
        *,
        until: Pattern | None = None,
        history: bool = False,
    ) -> SignalStream:
        """Stream matching signals to async code.

        The subscription is made when this method is called, so nothing emitted
        afterwards is missed, even before iteration starts::

            async with bus.signals("trade:*", until="trade:closed") as stream:
                async for signal in stream:
                    ...

        Args:
            patterns: What to receive.
            until: End the stream after yielding a signal matching this pattern.
            history: First yield the matching signals already in :attr:`history`.
        """
        return SignalStream(self, normalize_patterns(patterns), until=until, history=history)

    def __repr__(self) -> str:
        return f"<SignalBus run_id={self.run_id!r} signals={self._seq}>"


def _describe(handler: object) -> str:
    name = getattr(handler, "__qualname__", None) or type(handler).__qualname__
    module = getattr(handler, "__module__", None)
    return f"{module}.{name}" if module else str(name)
