"""Input from outside a run: its durable inbox, and a replay's recorded outside input.

Two kinds of signals enter a run from outside its graph:

* messages posted to the run's signal store (``store.post(run_id, ...)``), from any
  process: a run recorded to that store emits them in posting order as they arrive,
  and the signal store records each one together with its delivery, so that a message
  is delivered once even across a crash and a resume (``session:reply`` answers a
  prompt, ``session:abort`` stops the run);
* messages posted with ``at=`` (``handle.send(..., at=)`` too): the store hands them out
  once they are due; a run that has nothing else to do waits for them rather than end;
* during a replay, what was sent to the recorded run (``handle.send``, posted
  messages): it is emitted again at its recorded position, so that the replay sees the
  same input at the same point.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final, Protocol

from reactor._recording.inbox import ABORT, REPLY, Posted
from reactor._signals.diagnostics import log
from reactor._signals.names import reserved_namespace
from reactor._signals.signal import Signal, to_jsonable
from reactor.exceptions import PromptError, ReplyValidationError

if TYPE_CHECKING:
    from reactor._agents.asking import Asking
    from reactor._engine.result import RunStatus
    from reactor._recording.recording import Recording
    from reactor._recording.store import SignalStore
    from reactor._signals.bus import SignalBus

__all__ = ["OutsideHost", "OutsideInput"]


class OutsideHost(Protocol):
    """What outside input needs of its run."""

    @property
    def bus(self) -> SignalBus:
        """Where outside input is emitted."""
        ...

    @property
    def asking(self) -> Asking:
        """The run's prompts, which replies answer."""
        ...

    @property
    def closed(self) -> bool:
        """Whether the run takes no more input."""
        ...

    @property
    def ending(self) -> bool:
        """Whether the run is stopping (it ends once in-flight work is cancelled)."""
        ...

    def stop(self, status: RunStatus, reason: str) -> None:
        """End the run now, cancelling what is in flight."""
        ...


# Shared by the runs that have none (most): never added to, one empty object for all.
_NOTHING_TO_NOTE: Final[dict[int, str]] = {}
_NOTHING_REPLAYED: Final[list[Signal]] = []


class OutsideInput:
    """The inbox and replayed outside input of one run."""

    # One per run: slots, not a dict of attributes (thousands of runs may be in flight).
    __slots__ = (
        "_aborted",
        "_delivering",
        "_later",
        "_nap",
        "_replayed",
        "_seen",
        "_unfollow",
        "_unwatch",
        "host",
        "record",
    )

    def __init__(
        self, host: OutsideHost, record: SignalStore | None, replay: Recording | None
    ) -> None:
        self.host = host
        self.record = record
        # seq -> message id, until recorded (an unrecorded run notes no delivery)
        self._delivering: dict[int, str] = {} if record is not None else _NOTHING_TO_NOTE
        self._seen: set[str] | None = None  # ids of delivered messages (most runs: none)
        self._unwatch: Callable[[], None] | None = None
        self._unfollow: Callable[[], None] | None = None
        self._aborted = False
        self._replayed = _outside_of(replay) if replay is not None else _NOTHING_REPLAYED
        self._later: dict[str, Posted] | None = None  # posted with at=, not due yet
        self._nap: asyncio.Event | None = None

    def recorder(self) -> Callable[[Signal], None] | None:
        """What records each signal of the run (a delivery, with its message)."""
        record = self.record
        if record is None:
            return None
        append, deliver, delivering = record.append, record.deliver, self._delivering

        def record_signal(signal: Signal) -> None:
            if delivering and signal.seq in delivering:
                deliver(delivering.pop(signal.seq), signal)
            else:
                append(signal)

        return record_signal

    def watch(self, run_id: str, waiting: Sequence[Posted] = ()) -> None:
        """Deliver ``waiting`` (read before the run began), then what is posted while it runs.

        The store's inbox watch delivers the rest (it polls off the loop); a message
        delivered twice is taken once.
        """
        if self.record is None:
            return
        for message in waiting:
            self.deliver(message)
        self._follow_recording(run_id)
        self._unwatch = self.record.watch_inbox(run_id, self.deliver)

    def scheduled(self) -> float | None:
        """At quiescence: when the next message posted with ``at=`` is due (``None``: none).

        Messages due by now are delivered at once (and ``0`` returned: the run goes
        on): a run with messages scheduled for it does not end, it waits for them. The
        run learns of them as it learns of any posted message (when it starts, and from
        its store's inbox watch), so asking costs no query.
        """
        later = self._later
        if not later or self.host.closed or self._replayed:
            return None
        now = time.time()
        due = sorted((m for m in later.values() if (m.due_at or 0) <= now), key=_due)
        for message in due:
            self.deliver(message)
        return 0.0 if due else min(_due(message) for message in later.values())

    def expect(
        self, message_id: str, name: str, payload: Any, at: datetime, source: str = "user"
    ) -> None:
        """A message this process posted to the run for later: wait for it from now on."""
        posted = Posted(message_id, "", name, to_jsonable(payload), source, time.time())
        self.deliver(dataclasses.replace(posted, due_at=at.timestamp()))

    async def nap(self, until: float) -> None:
        """Wait until ``until`` (UNIX seconds), a minute at most, or until :meth:`wake`."""
        delay = until - time.time()
        if delay <= 0:
            return
        self._nap = nap = asyncio.Event()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(min(delay, 60.0)):
                await nap.wait()

    def wake(self) -> None:
        """End a :meth:`nap`: the run is closing, or a message came to wait for."""
        if self._nap is not None:
            self._nap.set()

    def stop(self) -> None:
        """Take no more messages."""
        self.wake()
        if self._unwatch is not None:
            self._unwatch()
            self._unwatch = None
        if self._unfollow is not None:
            self._unfollow()
            self._unfollow = None

    def _follow_recording(self, run_id: str) -> None:
        """Stop the run as soon as its recording fails: no effects the log cannot show."""
        assert self.record is not None
        loop = asyncio.get_running_loop()
        host = self.host

        def stop() -> None:
            with contextlib.suppress(ReferenceError):  # the run is already gone
                if not host.ending:
                    host.stop("failed", "recording failed: its signals could not be written")

        def failed() -> None:  # called by the store's writer thread
            with contextlib.suppress(RuntimeError):  # the run's loop has closed
                loop.call_soon_threadsafe(stop)

        self._unfollow = self.record.watch_recording(run_id, failed)

    def deliver(self, message: Posted) -> None:
        """Emit a posted message (once: a message seen again is ignored).

        A reply (``session:reply``) answers its prompt, validated like
        ``handle.reply``: one that does not fit is logged and stays undelivered.
        """
        seen = self._seen
        if seen is not None and message.message_id in seen:
            return
        if message.due_at is not None:
            later = self._later
            if message.due_at > time.time():  # kept until it is due (see scheduled())
                if later is None:
                    later = self._later = {}  # most runs never get one
                if message.message_id not in later:
                    later[message.message_id] = message
                    self.wake()  # a run napping till a later one looks again
                return
            if later is not None:
                later.pop(message.message_id, None)
        if message.name not in (REPLY, ABORT) and self.host.closed:
            return
        if seen is None:
            seen = self._seen = set()
        seen.add(message.message_id)
        if message.name == REPLY:
            self._reply(message.payload, message.source, message.message_id)
        elif message.name == ABORT:
            self._abort(message.payload, message.source, message.message_id)
        else:
            self.note_delivery(message.message_id)
            self.host.bus.publish(message.name, message.payload, message.source, None, 0)

    def note_delivery(self, message_id: str) -> None:
        """The next signal the run emits delivers message ``message_id``."""
        if self.record is not None:
            self._delivering[self.host.bus.last_seq + 1] = message_id

    def _reply(self, payload: Any, source: str | None, message_id: str | None) -> None:
        prompt_id = payload.get("prompt_id") if isinstance(payload, Mapping) else None
        try:
            if not isinstance(prompt_id, str):
                raise ReplyValidationError(
                    "A posted session:reply needs a payload {prompt_id, answer}; got "
                    f"{payload!r}.",
                    prompt_id=str(prompt_id),
                )
            self.host.asking.reply(
                prompt_id, payload.get("answer"), source=source or "user", message_id=message_id
            )
        except PromptError as exc:
            log("reactor.run", "warning", "reply not applied", message=message_id, error=str(exc))

    def abort(self, reason: str, source: str) -> bool:
        """A caller's abort: ``session:abort {reason}`` with its ``source``, then the stop.

        Returns whether it stopped the run (not when it is ending, or aborted already).
        """
        if self.host.ending or self._aborted:
            return False
        self._aborted = True
        self.host.bus.publish(ABORT, {"reason": reason}, source, None, 0)
        self.host.stop("aborted", reason)
        return True

    def _abort(self, payload: Any, source: str | None, message_id: str | None) -> None:
        """Emit ``session:abort {reason}`` (who stopped the run, in its log) and stop it."""
        if self.host.ending or self._aborted:
            return
        self._aborted = True
        reason = payload.get("reason") if isinstance(payload, Mapping) else None
        reason = reason if isinstance(reason, str) and reason else "aborted"
        if message_id is not None:
            self.note_delivery(message_id)
        self.host.bus.publish(ABORT, {"reason": reason}, source or "user", None, 0)
        # Stopped from the event loop, not from the activation that may be dispatching
        # (a replay emits it there): stopping cancels every activation but the caller.
        asyncio.get_running_loop().call_soon(self.host.stop, "aborted", reason)

    def after_dispatch(self) -> None:
        """During a replay, emit outside input whose recorded position has come."""
        replayed = self._replayed
        while replayed and self.host.bus.last_seq >= replayed[0].seq - 1:
            self._emit(replayed.pop(0))

    def at_quiescence(self) -> bool:
        """The run has nothing left to do: emit the next replayed input, if there is one."""
        if not self._replayed or self.host.closed:
            return False
        self._emit(self._replayed.pop(0))
        return True

    def _emit(self, signal: Signal) -> None:
        if signal.name == REPLY:
            self._reply(signal.payload, signal.source, None)
        elif signal.name == ABORT:
            self._abort(signal.payload, signal.source, None)
        else:
            self.host.bus.publish(signal.name, signal.payload, signal.source, None, 0)


def _outside_of(recording: Recording) -> list[Signal]:
    """What came from outside the recorded run: root signals the runtime does not emit."""
    return [
        signal
        for signal in recording.signals
        if signal.caused_by is None
        and (reserved_namespace(signal.name) is None or signal.name in (REPLY, ABORT))
    ]


def _due(message: Posted) -> float:
    """When a scheduled message is due (UNIX seconds)."""
    return message.due_at or 0.0
