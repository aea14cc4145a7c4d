"""From triggers to running activations: guards, concurrency modes, limits, tasks.

Each agent's ``activate_on`` patterns are a bus subscription whose handler evaluates
the guard while the trigger is dispatched and records a pending activation. After the
trigger has been dispatched to everyone (so the store reflects it), the run's
after-dispatch hook checks ``end_when`` and then hands the pending activations to
:meth:`Scheduler.start_pending`, which starts, queues or skips each according to the
agent's ``concurrency`` and the run's limits. Activations are tasks the scheduler
owns: between :meth:`Scheduler.open` and :meth:`Scheduler.closed` they run, and the run
awaits :meth:`Scheduler.idle` until none is left, as a ``TaskGroup`` would (without one
per run, and without a coroutine of its own: thousands of runs may be in flight).
"""

from __future__ import annotations

import asyncio
import contextvars
from collections import deque
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from reactor._activation.admitting import batch_seqs
from reactor._activation.agentrun import Activation, AgentRun
from reactor._engine.admitter import Gate, Ledger
from reactor._engine.pacing import Paced, Room
from reactor._engine.result import RunStatus, loop_limit_error
from reactor._recording.log import causal_chain
from reactor._signals.names import error_info
from reactor._signals.offloop import set_pace
from reactor._signals.sharedkeys import shared_keys
from reactor._signals.signal import Signal

_loop = asyncio.get_running_loop

if TYPE_CHECKING:
    from reactor._activation.activator import Activator
    from reactor._activation.resume import ResumePlan
    from reactor._engine.options import RunOptions
    from reactor._providers.replay import ReplayProvider
    from reactor._signals.bus import SignalBus

__all__ = ["Scheduler", "SchedulerHost"]


_NO_GATES: dict[AgentRun, Gate] = {}
"""The gates of a run with no ``admit=`` agent: most runs (shared, never written)."""
# The payloads of every run's activations and skips (see reactor._signals.sharedkeys).
_ACTIVATED = shared_keys("AgentActivated")
_SKIPPED = shared_keys("AgentSkipped")


class SchedulerHost(Protocol):
    """What the scheduler needs of its run."""

    @property
    def bus(self) -> SignalBus:
        """The run's bus."""
        ...

    @property
    def options(self) -> RunOptions:
        """The run's options (limits, ``on_end``)."""
        ...

    @property
    def ending(self) -> bool:
        """Whether the run takes no new activations."""
        ...

    @property
    def reason(self) -> str:
        """Why the run is stopping, once it is."""
        ...

    def stop(
        self,
        status: RunStatus,
        reason: str,
        *,
        error: BaseException | None = None,
        cancel: bool = True,
    ) -> None:
        """End the run."""
        ...

    def failed(self, agent_run: AgentRun, exc: BaseException, signal: Signal) -> None:
        """Handle an agent's failure (``signal`` is its ``agent:<name>:failed``)."""
        ...

    @property
    def replay(self) -> ReplayProvider | None:
        """The recording's answers, during a replay (each step waits for its turn)."""
        ...

    def settle(self, edit: Mapping[str, Any]) -> None:
        """Write a fork's edit (what was in flight has settled)."""
        ...


class Scheduler:
    """Starts, queues, skips and cancels the activations of one run."""

    # One per run: slots, not a dict of attributes (thousands of runs may be in flight).
    __slots__ = (
        "_deferred",
        "_edit",
        "_error",
        "_gates",
        "_held",
        "_idle",
        "_main",
        "_open",
        "_replay",
        "_room",
        "_tasks",
        "activations",
        "activator",
        "agents",
        "bus",
        "host",
        "inflight",
        "pending",
    )

    def __init__(self, host: SchedulerHost, agents: Sequence[AgentRun], activator: Activator):
        self.host = host
        self.agents = agents
        self.activator = activator
        self.bus = host.bus  # the run's, for its whole life: read once, not through the host
        self._replay = host.replay
        self.activations = 0
        self.pending: list[tuple[AgentRun, Signal]] = []
        self.inflight: dict[asyncio.Task[None], Activation] = {}
        self._deferred: list[tuple[Activation, Coroutine[Any, Any, None]]] | None = None
        self._open = False
        self._main: asyncio.Task[Any] | None = None
        self._tasks = 0  # activation tasks not finished yet
        self._idle: asyncio.Future[None] | None = None  # set when _tasks drops to 0
        self._error: BaseException | None = None
        self._held: list[tuple[AgentRun, Signal]] | None = None  # a fork settling
        self._edit: Mapping[str, Any] | None = None
        record = host.options.record
        # A recorded run's activations wait for their store between steps (backpressure).
        self._room: Room | None = None if record is None else record.room
        self._gates = self._admission(agents)

    def _admission(self, agents: Sequence[AgentRun]) -> dict[AgentRun, Gate]:
        """A gate for each agent declared with ``admit=`` (``reactor._engine.admitter``)."""
        admitting = [agent_run for agent_run in agents if agent_run.agent.admit]
        if not admitting:
            return _NO_GATES
        ledger = Ledger.of(admitting)
        if ledger.keep_for:
            ledger.follow(self.bus)
        replay = self._replay
        replayed = replay.recording if replay is not None else None
        patience = replay.order_timeout if replay is not None else 0.0
        gates = {
            agent_run: Gate(self, agent_run, ledger, replayed, patience) for agent_run in admitting
        }
        if replayed is not None:  # recorded decisions are repeated in their turns
            for gate in gates.values():
                if gate.recorded is not None and gate.recorded.decisions:
                    self.bus.subscribe("**", gate.replay_turn)
        return gates

    @property
    def ending(self) -> bool:
        """Whether the run takes no new activations."""
        return self.host.ending

    def hold_open(self, holding: bool) -> None:
        """A gate has triggers waiting (the run is not idle), or no longer has."""
        if holding:
            self._tasks += 1
        else:
            self._finished()

    def stop_admission(self) -> None:
        """The run stops: the triggers waiting for admission are skipped (``ended``)."""
        for gate in self._gates.values():
            gate.stop()

    # -- running the tasks (like a TaskGroup) ------------------------------------

    def open(self, main: asyncio.Task[Any] | None) -> None:
        """Start running activations as tasks (those launched before now at once).

        ``main`` is the run's task. The run then awaits :meth:`idle` while it returns a
        future, and calls :meth:`closed`; if it is cancelled meanwhile (or anything
        else stops it), it awaits :meth:`closing` instead: the activations are
        cancelled and waited for, then the cancellation (or the exception) goes on.
        """
        self._main = main
        self._open = True
        deferred, self._deferred = self._deferred, None
        for activation, coroutine in deferred or ():
            self._spawn(activation, coroutine)
        if self.host.ending:  # stopped (an abort, say) before it began: none of them runs
            self.cancel_all()
        self._settled()

    def drop_deferred(self) -> None:
        """Forget the activations waiting for the run to start (it stopped before it did)."""
        deferred, self._deferred = self._deferred, None
        for _, coroutine in deferred or ():
            coroutine.close()

    def idle(self) -> asyncio.Future[None] | None:
        """A future that is done when no activation is left (``None``: none is now)."""
        if not self._tasks:
            return None
        self._idle = idle = _loop().create_future()
        return idle

    def closed(self) -> None:
        """No activation is left: stop running them; an activation's ``BaseException`` goes on.

        Raises:
            BaseException: What an activation raised that no agent's failure is.
        """
        self._idle = None
        self._open = False
        error, self._error = self._error, None
        if error is not None:
            raise error

    async def closing(self, stopped: BaseException) -> None:
        """The run was stopped by ``stopped``: cancel the activations and wait for them.

        Returns when they are all done (a second cancellation meanwhile is absorbed: the
        first goes on); the caller then raises ``stopped``, unless an activation raised
        a ``BaseException`` of its own, which this raises instead.
        """
        self.cancel_all()
        self.stop_admission()
        cancelled = isinstance(stopped, asyncio.CancelledError)
        while self._tasks:
            self._idle = _loop().create_future()
            try:
                await self._idle
            except asyncio.CancelledError:
                if not cancelled:
                    cancelled = True
                    self.cancel_all()
        self.closed()

    def _finished(self) -> None:
        """An activation's task ends (it released itself, or was cancelled unstarted)."""
        self._tasks -= 1
        if self._tasks:
            return
        if self._edit is not None:
            self._settled()
        idle = self._idle
        if idle is not None and not idle.done():
            idle.set_result(None)

    def crashed(self, error: BaseException) -> None:
        """An activation raised what no agent's failure is (a ``BaseException``).

        The run stops, and once its activations are done the error goes on (activate
        absorbs the agents' exceptions). Its task ends with the error: it is
        marked seen, so asyncio does not report it as never retrieved.
        """
        task = asyncio.current_task()
        if task is not None:
            _loop().call_soon(_seen, task)
        if self._error is None:
            self._error = error
            self.host.stop("failed", f"an activation raised {type(error).__name__}", error=error)

    # -- triggers ----------------------------------------------------------------

    def trigger(self, agent_run: AgentRun, signal: Signal) -> None:
        """``signal`` matched the agent's ``activate_on``: check it may run, then queue it.

        Called while the signal is dispatched, so the guard sees the state it caused.
        """
        if self.host.ending:
            self.skip(agent_run, signal, "ended")
            return
        agent = agent_run.agent
        limit = agent.max_activations
        if limit is not None and agent_run.launched >= limit:
            self.skip(agent_run, signal, "limit")
            return
        if agent.when is not None:
            try:
                passed = self.activator.allowed(agent_run, signal)
            except Exception as exc:
                self._guard_failed(agent_run, signal, exc)
                return
            if not passed:
                self.skip(agent_run, signal, "guard")
                return
        self.pending.append((agent_run, signal))

    def resume(self, plan: ResumePlan) -> None:
        """Pick up a resumed run's work: rerun what was in flight, then what was undecided.

        The counters go on from the log (limits count over the whole run). An activation
        that was in flight runs again under its recorded ``activated`` signal (there is
        no second one); a signal that some agent had not decided on is dispatched to it
        again, in ``seq`` order.
        """
        self.activations = plan.activations
        by_name = {agent_run.name: agent_run for agent_run in self.agents}
        for agent_run in self.agents:
            agent_run.launched = plan.launched.get(agent_run.name, 0)
        batches = _batches(plan)
        for flight in plan.in_flight:
            agent_run = by_name[flight.agent]
            agent_run.running += 1
            batch = batches(flight.signal)
            activation = Activation(agent_run, flight.trigger, flight.signal, flight.answers, batch)
            activation.index = flight.index
            self._start(activation)
        for signal, agent in plan.undecided:
            self.trigger(by_name[agent], signal)
        self.start_pending()

    # -- a fork settling ---------------------------------------------------------

    def hold(self, edit: Mapping[str, Any]) -> None:
        """Start nothing new until what is in flight has finished; then write ``edit``.

        A fork's order (see ``reactor._graph.forking``): the activations in flight at
        its point settle, then its edit is written, then what was triggered meanwhile
        starts, each agent once, by its latest trigger (the others are skipped as
        ``coalesced``): the edit's ``state:<key>:changed`` and a trigger pending at the
        fork's point make one activation, which sees the edited state.
        """
        self._held, self._edit = [], edit

    def _settled(self) -> None:
        """Once nothing is in flight, write the edit and let go of what was held."""
        if self._edit is None or self._tasks or not self._open:
            return
        edit, self._edit = self._edit, None
        # Now (the run must not end first), outside any activation's context: the edit
        # is the user's, a root of the log.
        contextvars.Context().run(self._let_go, edit)

    def _let_go(self, edit: Mapping[str, Any]) -> None:
        self.host.settle(edit)
        held, self._held = self._held or [], None
        held += self.pending
        self.pending.clear()
        latest: dict[AgentRun, Signal] = {}
        for agent_run, trigger in held:
            earlier = latest.get(agent_run)
            if earlier is not None:
                self.skip(agent_run, earlier, "coalesced")
            latest[agent_run] = trigger
        for agent_run, trigger in latest.items():
            self.request(agent_run, trigger)

    def start_pending(self) -> None:
        """Start (or queue, or skip) the activations the last signal asked for."""
        pending = self.pending
        if pending and self._held is not None:  # a fork settling: they wait
            self._held += pending
            pending.clear()
            return
        if pending:
            batch = pending.copy()
            pending.clear()
            for agent_run, trigger in batch:
                self.request(agent_run, trigger)

    # -- activations -------------------------------------------------------------

    def request(self, agent_run: AgentRun, trigger: Signal) -> None:
        """Start an activation, or queue or skip it by the agent's ``concurrency``."""
        mode = agent_run.agent.concurrency
        gate = self._gates.get(agent_run) if self._gates else None
        if self.host.ending:
            self.skip(agent_run, trigger, "ended")
        elif gate is not None:
            gate.offer(trigger)
        elif agent_run.running == 0 or mode == "parallel":
            self.launch(agent_run, trigger, None)
        elif mode == "skip":
            self.skip(agent_run, trigger, "busy")
        else:
            queue = agent_run.queue
            if queue is None:
                queue = agent_run.queue = deque()
            while mode == "latest" and queue:
                self.skip(agent_run, queue.popleft(), "superseded")
            queue.append(trigger)

    def launch(
        self, agent_run: AgentRun, trigger: Signal, batch: tuple[Signal, ...] | None
    ) -> Activation | None:
        """Start an activation of ``agent_run`` on ``trigger`` unless the run refuses it.

        ``batch``: the triggers admission delivers with it (``ctx.batch``), their
        ``seq`` listed in its ``activated``. ``None``: the run refused it (it is ending,
        or a limit is reached) and skipped the trigger.
        """
        host = self.host
        main = self._main
        if host.ending or (main is not None and main.cancelling()):
            self.skip(agent_run, trigger, "ended")
            return None
        agent = agent_run.agent
        if agent.max_activations is not None and agent_run.launched >= agent.max_activations:
            self.skip(agent_run, trigger, "limit")
            return None
        options = host.options
        depth = trigger.depth + 1
        most = options.max_activations
        if most is not None and self.activations >= most:
            self._loop_limit("max_activations", most, agent_run, trigger)
            return None
        deepest = options.max_depth
        if deepest is not None and depth > deepest:
            self._loop_limit("max_depth", deepest, agent_run, trigger)
            return None
        self.activations += 1
        agent_run.launched += 1
        agent_run.running += 1
        payload = _ACTIVATED()
        payload["agent"] = agent_run.name
        payload["trigger"] = trigger.name
        if batch is not None:
            payload["batch"] = [signal.seq for signal in batch]
        signal = self.bus.publish(agent_run.activated, payload, agent_run.name, trigger.id, depth)
        activation = Activation(agent_run, trigger, signal, batch=batch)
        self._start(activation)
        return activation

    def _start(self, activation: Activation) -> None:
        coroutine = self.activator.activate(activation)
        if not self._open:
            if self._deferred is None:
                self._deferred = []
            self._deferred.append((activation, coroutine))
        else:
            self._spawn(activation, coroutine)

    def _spawn(self, activation: Activation, coroutine: Coroutine[Any, Any, None]) -> None:
        context = self.activator.task_context(activation)
        replay = self._replay
        room = self._room
        if replay is not None:
            steps = replay.step_turn(activation.agent_run.name, activation.index)
            room = room if steps is None else _either(steps, room)
        if room is not None:
            context.run(set_pace, room)  # a sync handler's thread waits too
            coroutine = Paced(coroutine, room)
        # No done callback: the activation accounts for itself as it ends (release, and
        # crashed for what no agent's failure is), a callback and a loop turn fewer.
        task = _loop().create_task(coroutine, context=context)
        self._tasks += 1
        activation.task = task
        self.inflight[task] = activation
        if self.host.ending and self.host.options.on_end == "cancel":
            self._cancel(task, activation)

    def cancel_all(self) -> None:
        """Cancel every in-flight activation but the calling one."""
        current = asyncio.current_task() if self._main is not None else None
        for task, activation in list(self.inflight.items()):
            if task is not current:
                self._cancel(task, activation)

    def _cancel(self, task: asyncio.Task[None], activation: Activation) -> None:
        task.cancel()
        if not activation.started:
            # A task cancelled before its first step never runs its body, so account
            # for it here: it was announced (activated) and must be closed too.
            agent_run = activation.agent_run
            self.bus.emit(
                agent_run.cancelled,
                {"agent": agent_run.name, "reason": self.host.reason, "duration_ms": 0.0},
                source=agent_run.name,
                cause=activation.signal,
            )
            self.release(activation)

    def release(self, activation: Activation) -> None:
        """Account for a finished activation and start the next queued trigger, if any."""
        agent_run = activation.agent_run
        agent_run.running -= 1
        task = activation.task
        inflight = self.inflight
        counted = task is not None and inflight.pop(task, None) is not None
        if not inflight:  # a dict keeps its table when emptied: not while the run waits
            inflight.clear()
        queue = agent_run.queue
        if queue and agent_run.running == 0:
            self.request(agent_run, queue.popleft())
        elif self._gates:
            gate = self._gates.get(agent_run)
            if gate is not None:
                gate.finished(activation)
        if counted:  # after what was queued behind it has started
            self._finished()

    def skip(
        self, agent_run: AgentRun, trigger: Signal, reason: str, by: Signal | None = None
    ) -> None:
        """Emit ``agent:<name>:skipped`` for ``trigger`` (``by``: the trigger that took it)."""
        payload = _SKIPPED()
        payload["agent"] = agent_run.name
        payload["trigger"] = trigger.name
        payload["reason"] = reason
        if by is not None:
            payload["superseded_by"] = by.seq
        self.bus.emit(agent_run.skipped, payload, source="harness", cause=trigger)

    def _guard_failed(self, agent_run: AgentRun, trigger: Signal, exc: Exception) -> None:
        signal = self.bus.emit(
            agent_run.failed,
            {"agent": agent_run.name, "error": error_info(exc), "duration_ms": 0.0},
            source=agent_run.name,
            cause=trigger,
        )
        self.host.failed(agent_run, exc, signal)

    def _loop_limit(self, limit: str, value: int, agent_run: AgentRun, trigger: Signal) -> None:
        chain = causal_chain(self.bus.history, trigger)
        error = loop_limit_error(limit, value, chain, agent_run.name)
        self.skip(agent_run, trigger, "limit")
        self.host.stop("loop_limit", str(error), error=error)


def _batches(plan: ResumePlan) -> Callable[[Signal], tuple[Signal, ...] | None]:
    """The ``ctx.batch`` of a resumed activation: its ``activated`` lists their ``seq``."""
    by_seq: dict[int, Signal] | None = None

    def batch(activated: Signal) -> tuple[Signal, ...] | None:
        nonlocal by_seq
        seqs = batch_seqs(activated)
        if seqs is None:
            return None
        if by_seq is None:  # read once, and only when a resumed activation had a batch
            by_seq = {signal.seq: signal for signal in plan.recording.signals}
        return tuple(by_seq[seq] for seq in seqs if seq in by_seq)

    return batch


def _seen(task: asyncio.Task[None]) -> None:
    if task.done() and not task.cancelled():
        task.exception()


def _either(first: Room | None, second: Room | None) -> Room | None:
    """A wait for ``first``, then for ``second`` (a replay's turn, then the store's room)."""
    if first is None or second is None:
        return first or second
    return lambda: first() or second()
