"""RunHandle: a live run you can watch, feed, close, abort and await."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Generator, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol, overload, runtime_checkable

from reactor._signals.diagnostics import log
from reactor._signals.door import check_payload
from reactor._signals.frozen import freeze_payload
from reactor._signals.names import (
    HARNESS_END,
    HARNESS_SUSPENDED,
    SESSION_PROMPT,
    inbox_signal,
    reserved_namespace,
)
from reactor._signals.patterns import Pattern, normalize_patterns
from reactor._signals.signal import Signal
from reactor._signals.stream import SignalStream
from reactor.exceptions import (
    AgentNotFoundError,
    BackpressureError,
    PromptTimeoutError,
    RunClosedError,
    RunFinishedError,
    RunSuspendedError,
    SignalNameError,
)

if TYPE_CHECKING:
    from reactor._agents.asking import PendingPrompt
    from reactor._engine.result import RunResult
    from reactor._engine.run import Run

__all__ = ["Channel", "RunHandle"]

_LAST = re.compile(f"{re.escape(HARNESS_END)}|{re.escape(HARNESS_SUSPENDED)}")
"""A run's last signal: it ended, or it was suspended to resume later."""

_CHANNEL_GRACE = 2.0
"""Seconds channels get to finish after their run ends, before they are cancelled."""


@runtime_checkable
class Channel(Protocol):
    """Something attached to a live run: it watches its signals and sends it commands.

    ``graph.start(..., channels=[ConsoleChannel()])`` runs ``await
    channel.attach(handle)`` beside the run; it should return once the run has ended
    (``handle.signals()`` ends with ``harness:end``). A channel shows the run through
    its signals and never prints around the log; it answers prompts with
    ``handle.reply``, and may ``send``, ``send_to`` or ``abort``.
    """

    async def attach(self, handle: RunHandle) -> None:
        """Serve the run until it ends."""
        ...


class RunHandle:
    """A run started with ``graph.start(...)``.

    ::

        handle = graph.start(input=..., provider=p)
        handle.send("market:tick", {"price": 101.5})
        async for signal in handle.signals():
            ...
        result = await handle.result()
    """

    def __init__(
        self, run: Run, task: asyncio.Task[RunResult], channels: Sequence[Channel] = ()
    ) -> None:
        self._run = run
        self._task = task
        self._channels = [
            asyncio.get_running_loop().create_task(
                _serve(channel, self), name=f"reactor {run.run_id} {type(channel).__name__}"
            )
            for channel in channels
        ]

    @property
    def run_id(self) -> str:
        """The run's id."""
        return self._run.run_id

    @property
    def done(self) -> bool:
        """Whether the run has finished."""
        return self._task.done()

    @property
    def recorded(self) -> bool:
        """Whether the run is recorded to a signal store (so it can be suspended and resumed)."""
        return self._run.options.record is not None

    @property
    def closed(self) -> bool:
        """Whether the run takes no more input (closed, ending, ended or aborted)."""
        return self._run.closed

    def signals(self, pattern: Pattern | None = None) -> SignalStream:
        """Every signal of the run from its start, then live ones until its last.

        The last is ``harness:end``, or ``harness:suspended`` for a run suspended to
        resume later (:meth:`suspend`).

        Args:
            pattern: Only signals whose name matches it (as ``SignalBus.signals``);
                the stream still ends at the run's last signal. ``None``: every signal.
        """
        bus = self._run.bus
        # A resumed run's history holds the harness:suspended of its earlier lives:
        # while it runs again, only a new one is its last.
        earlier = (
            0
            if bus.sealed
            else max((s.seq for s in bus.history if s.name == HARNESS_SUSPENDED), default=0)
        )
        wanted = ("**",) if pattern is None else normalize_patterns(pattern)
        return SignalStream(
            bus,
            wanted if pattern is None else (*wanted, HARNESS_END, HARNESS_SUSPENDED),
            until=_LAST,
            history=True,
            keep=None if pattern is None else wanted,
            until_after=earlier,
        )

    @overload
    def send(self, name: str, payload: Any = None, *, source: str = "user") -> Signal: ...

    @overload
    def send(
        self, name: str, payload: Any = None, *, at: datetime, source: str = "user"
    ) -> str: ...

    def send(
        self, name: str, payload: Any = None, *, at: datetime | None = None, source: str = "user"
    ) -> Signal | str:
        """Inject a signal from outside the graph, as ``source`` (who sends it); return it.

        With ``at`` (an aware datetime) the signal is scheduled instead: it is posted to
        the run's signal store (``store.post(run_id, name, payload, at=at)``), durable,
        and delivered once at or after that time, also after a restart; the message's
        id is returned. Until then a run with nothing else to do waits for it.

        A run that records to a store whose writer is behind (``max_backlog`` signals
        not written yet) refuses outside input: the send raises
        :class:`~reactor.BackpressureError` and nothing is sent, so a producer faster
        than the disk cannot grow the backlog (and what a crash loses) without bound;
        ``await handle.asend(...)`` waits for room instead.

        Raises:
            SignalNameError: ``name`` is in a namespace only the runtime emits
                (``harness:``, ``agent:``, ``state:``, ``provider:``, ``tool:``, ...).
            RunClosedError: The run was closed, has ended or was aborted.
            PayloadError: The log cannot hold ``payload`` (nothing is sent).
            BackpressureError: The run's store has ``max_backlog`` signals not yet
                written (nothing is sent; try again, or use :meth:`asend`).
            ValueError: ``at`` is given but the run records to no store, or it is not
                an aware datetime.
        """
        namespace = reserved_namespace(name)
        if namespace is not None:
            raise SignalNameError(
                f"Cannot send {name!r}: '{namespace}:' signals come from the runtime only, "
                "so outside input cannot forge an agent's result or a state change. Send "
                "your own names (declare them with reactive(external=[...])), change the "
                "state through the store, and answer prompts with reply().",
                name=name,
            )
        run = self._run
        if run.closed:
            state = run.status or "closing"
            raise RunClosedError(
                f"Run {run.run_id} takes no more input ({state}); send signals before "
                "close(), end_when or abort()."
            )
        check_payload(payload, "payload")
        if at is not None:
            record = run.options.record
            if record is None:
                raise ValueError(
                    f"handle.send({name!r}, at=...) keeps the message in the run's signal "
                    "store until it is due, and this run records to none: start it with "
                    "record=store (MemorySignalStore() for this process only)."
                )
            message_id = record.post(run.run_id, name, payload, source=source, at=at)
            run.outside.expect(message_id, name, payload, at, source)  # waited for from now
            return message_id
        record = run.options.record
        if record is not None:
            full = record.room()
            if full is not None:
                full.cancel()  # nobody waits for it: the caller is told instead
                raise BackpressureError(
                    f"Run {run.run_id} refused {name!r}: its store has the most signals "
                    "not yet written it queues (max_backlog), and the signal was not sent. "
                    "Send it again in a moment, or `await handle.asend(...)`, which waits "
                    "for room.",
                    run_id=run.run_id,
                )
        return run.bus.publish(name, freeze_payload(payload), source, None, 0)

    async def asend(self, name: str, payload: Any = None, *, source: str = "user") -> Signal:
        """:meth:`send`, waiting while the run's store is behind instead of refusing.

        ``await handle.asend(...)`` in a producer's loop paces it to what the store
        writes: every signal it sends is recorded, and memory stays bounded.

        Raises:
            SignalNameError, RunClosedError, PayloadError: As :meth:`send`.
        """
        record = self._run.options.record
        while record is not None and (room := record.room()) is not None:
            await room
        return self.send(name, payload, source=source)

    def send_to(self, agent: str, payload: Any = None) -> Signal:
        """Send a message to one agent: ``inbox:<agent>``, which only that agent receives.

        The agent gets it as an activation if it activates on ``inbox:<agent>``, else
        from ``await ctx.receive()``.

        Raises:
            AgentNotFoundError: The graph has no such agent.
            RunClosedError: The run takes no more input.
            PayloadError: The log cannot hold ``payload`` (nothing is sent).
        """
        names = [agent_run.name for agent_run in self._run.agents]
        if agent not in names:
            raise AgentNotFoundError(
                f"Run {self.run_id} has no agent {agent!r} (agents: {', '.join(names)}); "
                "send_to takes the name of one of them.",
                agent=agent,
            )
        return self.send(inbox_signal(agent), payload)

    def prompts(self) -> list[PendingPrompt]:
        """The questions the run is waiting on a person to answer, oldest first."""
        return self._run.asking.pending()

    async def next_prompt(self, timeout: float | None = None) -> PendingPrompt:  # noqa: ASYNC109
        """Wait for a question to answer: the oldest pending prompt, once there is one.

        ::

            while True:
                prompt = await handle.next_prompt()  # RunFinishedError once it ends
                handle.reply(prompt.prompt_id, answer_for(prompt))

        Args:
            timeout: Seconds to wait at most (``None``: until a prompt or the end).

        Raises:
            RunFinishedError: The run ended (or failed) before asking anything more.
            PromptTimeoutError: No prompt came within ``timeout`` seconds.
        """
        run, loop = self._run, asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        while True:
            pending = run.asking.pending() if not self._task.done() else []
            if pending:
                return pending[0]
            if self._task.done():
                raise RunFinishedError(
                    f"Run {self.run_id} ended ({run.status or 'stopped'}) without a pending "
                    "prompt; await handle.result() for its outcome.",
                    run_id=self.run_id,
                    status=run.status,
                )
            woken = asyncio.Event()
            wake = _waker(woken)
            subscription = run.bus.subscribe([SESSION_PROMPT, HARNESS_END], wake)
            self._task.add_done_callback(wake)
            try:
                left = None if deadline is None else deadline - loop.time()
                async with asyncio.timeout(left):
                    await woken.wait()
            except TimeoutError:
                raise PromptTimeoutError(
                    f"Run {self.run_id} asked nothing within {timeout}s; wait longer "
                    "(timeout=None waits until a prompt or the end of the run).",
                    prompt_id="",
                ) from None
            finally:
                subscription.cancel()
                self._task.remove_done_callback(wake)

    def reply(self, prompt_id: str, answer: Any, *, source: str = "user") -> None:
        """Answer a pending prompt: emits ``session:reply`` and resumes the asker.

        ``source`` is who answered (``"user"``, or a user id in a service).

        Raises:
            PromptNotFoundError: No pending prompt has that id (unknown, answered, or
                timed out).
            ReplyValidationError: The answer is not one of the prompt's choices, or
                does not fit its ``output``; the prompt stays pending.
            PayloadError: The log cannot hold ``answer``; the prompt stays pending.
        """
        check_payload(answer, "answer")
        self._run.asking.reply(prompt_id, answer, source=source)

    def close(self) -> None:
        """Accept no more input; the run finishes once in-flight work is done."""
        self._run.close()

    def abort(self, reason: str = "aborted", *, source: str = "user") -> None:
        """Stop now, as ``source`` (who aborts it), for ``reason``.

        The log says who and why: ``session:abort {reason}`` from ``source``, then the
        run ends ``aborted`` with that reason; in-flight activations are cancelled
        (their provider calls too). Aborting a run that has ended changes nothing.

        Raises:
            PayloadError: The log cannot hold ``reason`` (the run goes on, unchanged).
        """
        check_payload(reason, "reason")
        if self._task.done():
            return
        run = self._run
        if not run.outside.abort(reason, source):
            run.stop("aborted", reason)  # stopping already: what is in flight is cancelled

    async def suspend(self, reason: str = "suspended") -> None:
        """Stop the run without ending it, to resume it later (a deploy, a shutdown).

        As if its process had stopped, but cleanly: ``harness:suspended {reason}`` is
        recorded last (no ``harness:end``), in-flight activations are dropped unseen and
        the log is flushed; the run stays ``running`` (or ``waiting``) in its store, and
        ``graph.resume(run_id, record=store)`` continues it after that signal, running
        again what was in flight. Awaiting :meth:`result` afterwards raises
        :class:`~reactor.RunSuspendedError`.

        Raises:
            RunClosedError: The run is not recorded (there would be nothing to resume).
            PayloadError: The log cannot hold ``reason`` (the run goes on, unchanged).
        """
        check_payload(reason, "reason")
        run = self._run
        if run.options.record is None:
            raise RunClosedError(
                f"Run {self.run_id} is not recorded, so it cannot be suspended and resumed "
                "later; start it with record=a signal store, or abort() it."
            )
        if self._task.done():
            return
        run.suspend(reason)
        if not run.suspended:  # it has just ended
            return
        self._task.cancel()
        await asyncio.wait([self._task])
        if not self._task.cancelled():
            self._task.exception()  # RunSuspendedError: result() raises it, if awaited
        run.scheduler.drop_deferred()  # the task was cancelled before it started them
        await run.flush_recording()  # also when the task was cancelled before it ran
        await self._close_channels()

    async def wait(self) -> None:
        """Wait for the run to finish, without its result (:meth:`result` then returns at once).

        Unlike awaiting :meth:`result`, a waiter that is cancelled leaves the run
        running: whoever waits can then decide what happens to it (suspend it, abort it).
        """
        await asyncio.wait([self._task])

    async def result(self) -> RunResult:
        """Wait for the run to finish and return its result.

        Raises:
            RunSuspendedError: The run was suspended (:meth:`suspend`).
        """
        try:
            return await self._task
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if self._run.suspended and self._task.cancelled() and not (task and task.cancelling()):
                raise RunSuspendedError(  # suspended before it had begun
                    f"Run {self.run_id} was suspended: it stopped without ending, and its "
                    "log says where. Resume it with graph.resume(run_id, record=store) "
                    "(or `reactor resume RUN`) to get its result.",
                    run_id=self.run_id,
                ) from None
            raise
        finally:
            if self._task.done():
                await self._close_channels()

    async def _close_channels(self) -> None:
        current = asyncio.current_task()  # a channel that suspends or awaits the run
        # Most channels have returned by now (the service's attaches and returns).
        channels = [t for t in self._channels if t is not current and not t.done()]
        self._channels = []
        if channels:
            _, late = await asyncio.wait(channels, timeout=_CHANNEL_GRACE)
            for task in late:
                task.cancel()

    def __await__(self) -> Generator[Any, None, RunResult]:
        return self.result().__await__()

    def __repr__(self) -> str:
        state = "done" if self.done else ("closed" if self.closed else "open")
        return f"<RunHandle {self.run_id} {state}>"


def _waker(event: asyncio.Event) -> Callable[[object], None]:
    """A callback (a bus handler, a task's done callback) that sets ``event``."""

    def wake(_: object) -> None:
        event.set()

    return wake


async def _serve(channel: Channel, handle: RunHandle) -> None:
    """Run one channel; its failure is logged, never the run's."""
    try:
        await channel.attach(handle)
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        log("reactor.run", "error", "channel failed", channel=repr(channel), error=repr(exc))
