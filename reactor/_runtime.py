"""The run engine: turns signals into agent activations until the run ends.

One :class:`Run` per execution of a graph. Each agent's ``activate_on`` patterns are a
bus subscription whose handler evaluates the guard while the trigger is dispatched
and records a pending activation. After the trigger has been dispatched to everyone
(so the store reflects it), an after-dispatch hook checks ``end_when`` and then starts
or skips the pending activations. Activations are tasks of one ``TaskGroup``; the run
completes when the group is empty (quiescence) or is stopped.

Every stop (``end_when``, failure with ``fail_fast``, loop limit, timeout, abort)
goes through :meth:`Run.stop`, which cancels in-flight activations directly; the
main task is only cancelled from outside.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from reactor._activation import Activator
from reactor._agentrun import Activation, AgentRun
from reactor._bus import SignalBus
from reactor._context import AgentContext, RunView
from reactor._diagnostics import log
from reactor._options import RunOptions
from reactor._patterns import compile_pattern
from reactor._recording import Recording, RunInfo, normalize_tags
from reactor._replay import ReplayProvider
from reactor._result import RunMetrics, RunResult, RunStatus, causal_chain, loop_limit_error
from reactor._signal import Signal
from reactor.exceptions import RecordingError, RunTimeoutError
from stores._create import create_store
from stores._store import Store

if TYPE_CHECKING:
    from reactor._graph import Reactive
    from reactor._provider import ProviderRequest
    from reactor.typing import Provider

__all__ = ["Run"]


class Run:
    """One execution of a graph: create, :meth:`begin`, then await :meth:`execute`."""

    def __init__(self, graph: Reactive, options: RunOptions, *, live: bool = False) -> None:
        self.graph = graph
        self.options = options
        self.live = live
        self.run_id = f"run_{uuid.uuid4().hex[:16]}"
        self.bus = SignalBus(options.history_limit, run_id=self.run_id)
        self.store: Store[Any] = create_store(graph.state)
        self.agents = [AgentRun(agent) for agent in graph.agents.values()]
        self.status: RunStatus | None = None
        self.reason = ""
        self.error: BaseException | None = None
        self.ending = False
        self.closed = False
        self.end_signal: Signal | None = None
        self.activations = 0
        self.input_tokens = 0
        self.output_tokens = 0
        self.cost_usd = 0.0
        self._pending: list[tuple[AgentRun, Signal]] = []
        self._inflight: dict[asyncio.Task[None], Activation] = {}
        self._deferred: list[tuple[Activation, Coroutine[Any, Any, None]]] = []
        self._group: asyncio.TaskGroup | None = None
        self._main: asyncio.Task[Any] | None = None
        self._wake: asyncio.Event | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._started = 0.0
        self._end_payload: dict[str, Any] | None = None
        replay = options.replay
        self.replay: ReplayProvider | None = (
            ReplayProvider(replay) if isinstance(replay, Recording) else replay
        )
        self._recorded_requests: set[str] = set()
        self._end_check = self._compile_end_when(graph.end_when)
        self._by_name = {agent_run.name: agent_run for agent_run in self.agents}
        self._activator = Activator(self)

    # -- lifecycle ---------------------------------------------------------------

    def begin(self) -> None:
        """Wire the run and emit ``harness:start`` (synchronously)."""
        self._started = time.perf_counter()
        self.store.bind(self.bus)
        info = RunInfo(
            run_id=self.run_id,
            graph=self.graph.name,
            tags=normalize_tags(self.options.tags),
            started_at=time.time(),
            target=self.options.target,
        )
        record = self.options.record
        if record is not None:
            record.start_run(info)
            self.bus.subscribe("**", record.append)
        for reporter in self.options.reporters:
            start = getattr(reporter, "start", None)
            if start is not None:
                start(info)
        # Neighbouring agents with the same activate_on share one subscription (a
        # fan-out of 1,000 agents is one receiver, not 1,000); the order is unchanged.
        groups: list[tuple[tuple[Any, ...], list[Callable[[Signal], None]]]] = []
        for agent_run in self.agents:
            handler = self._trigger_handler(agent_run)
            patterns = agent_run.agent.activate_on
            if groups and groups[-1][0] == patterns:
                groups[-1][1].append(handler)
            else:
                groups.append((patterns, [handler]))
        for patterns, handlers in groups:
            self.bus.subscribe(patterns, handlers[0] if len(handlers) == 1 else _each(handlers))
        for reporter in self.options.reporters:
            self.bus.subscribe(reporter.patterns, reporter.on_signal)
        self.bus.add_after_dispatch(self._after_dispatch)
        self.bus.emit(
            "harness:start",
            {"input": self.options.input, "state": self.store.snapshot()},
            source="harness",
        )

    async def execute(self) -> RunResult:
        """Run until quiescence (or until closed, for a live run) or a stop."""
        self._main = asyncio.current_task()
        self._wake = asyncio.Event()
        if self.closed or self.ending:
            self._wake.set()
        if self.options.timeout is not None:
            self._timer = asyncio.get_running_loop().call_later(
                self.options.timeout, self._on_timeout
            )
        try:
            async with asyncio.TaskGroup() as group:
                self._group = group
                deferred, self._deferred = self._deferred, []
                for activation, coroutine in deferred:
                    self._spawn(activation, coroutine)
                if self.live:
                    await self._wake.wait()
        except asyncio.CancelledError:
            self._set_status("aborted", "the run was cancelled from outside")
            self._finish()
            raise
        finally:
            if self._timer is not None:
                self._timer.cancel()
        self._finish()
        await self._flush_recording()
        return self.result()

    async def _flush_recording(self) -> None:
        record = self.options.record
        if record is None:
            return
        try:
            await asyncio.to_thread(record.flush)
        except RecordingError as exc:
            log("reactor.run", "error", "recording incomplete", run_id=self.run_id, error=str(exc))

    def record_request(self, request: ProviderRequest) -> None:
        """Keep a provider request's details with the recording (once per hash)."""
        record = self.options.record
        if record is None or request.request_hash in self._recorded_requests:
            return
        self._recorded_requests.add(request.request_hash)
        keep = getattr(record, "record_request", None)
        if keep is not None:
            keep(self.run_id, request.request_hash, request.fingerprint())

    def _finish(self) -> None:
        if self._end_payload is not None:
            return
        self._set_status("completed", "quiescence: nothing left to do")
        self.ending = True
        self.closed = True
        self._end_payload = {
            "status": self.status,
            "reason": self.reason,
            "duration_ms": self.duration_ms(),
            "activations": self.activations,
        }
        self.bus._publish("harness:end", self._end_payload, "harness", None, 0)
        self.store.unbind()

    def duration_ms(self) -> float:
        """Milliseconds since the run began."""
        return round((time.perf_counter() - self._started) * 1000, 3)

    def result(self) -> RunResult:
        """Build the :class:`RunResult` (call after :meth:`execute`)."""
        by_agent: dict[str, int] = {}
        for agent_run in self.agents:
            by_agent[agent_run.name] = agent_run.launched
        state = self.store.snapshot()
        if self.graph.single:
            output = self.agents[0].last_output
        elif self.end_signal is not None and isinstance(self.graph.end_when, str):
            output = self.end_signal.payload
        else:
            output = state
        assert self.status is not None
        assert self._end_payload is not None
        return RunResult(
            status=self.status,
            output=output,
            state=state,
            signals=self.bus.history,
            error=self.error,
            metrics=RunMetrics(
                duration_ms=self._end_payload["duration_ms"],
                activations=self.activations,
                activations_by_agent=by_agent,
                input_tokens=self.input_tokens,
                output_tokens=self.output_tokens,
                cost_usd=round(self.cost_usd, 6),
            ),
            run_id=self.run_id,
            reason=self.reason,
            graph=self.graph.name,
        )

    # -- stopping ----------------------------------------------------------------

    def _set_status(
        self, status: RunStatus, reason: str, error: BaseException | None = None
    ) -> None:
        if self.status is None:
            self.status, self.reason, self.error = status, reason, error

    def stop(
        self,
        status: RunStatus,
        reason: str,
        *,
        error: BaseException | None = None,
        cancel: bool = True,
    ) -> None:
        """End the run: no new activations; in-flight ones cancelled if ``cancel``."""
        self._set_status(status, reason, error)
        self.ending = True
        self.close()
        if cancel:
            current = asyncio.current_task() if self._main is not None else None
            for task, activation in list(self._inflight.items()):
                if task is not current:
                    self._cancel(task, activation)

    def close(self) -> None:
        """Accept no more input; a live run finishes once in-flight work is done."""
        self.closed = True
        if self._wake is not None:
            self._wake.set()

    def _on_timeout(self) -> None:
        timeout = self.options.timeout
        self.stop(
            "timeout",
            f"timed out after {timeout}s",
            error=RunTimeoutError(
                f"The run exceeded its timeout of {timeout}s; in-flight activations were "
                "cancelled. Raise timeout= or make the slow agents faster."
            ),
        )

    # -- dispatch ----------------------------------------------------------------

    def _trigger_handler(self, agent_run: AgentRun) -> Callable[[Signal], None]:
        agent = agent_run.agent
        limit = agent.max_activations
        guard = agent.when
        expression = agent.when_expression
        pending = self._pending

        def on_trigger(signal: Signal) -> None:
            if self.ending:
                self._skip(agent_run, signal, "ended")
                return
            if limit is not None and agent_run.launched >= limit:
                self._skip(agent_run, signal, "limit")
                return
            if guard is not None:
                try:
                    if expression is not None:
                        allowed = self._activator.evaluate(agent_run, expression, signal)
                    else:
                        allowed = guard(self._context(agent_run, signal))  # type: ignore[operator]
                except Exception as exc:
                    self._guard_failed(agent_run, signal, exc)
                    return
                if not allowed:
                    self._skip(agent_run, signal, "guard")
                    return
            pending.append((agent_run, signal))

        return on_trigger

    def _after_dispatch(self, signal: Signal) -> None:
        check = self._end_check
        if check is not None and not self.ending:
            try:
                met = check(signal)
            except Exception as exc:
                self.stop(
                    "failed",
                    f"end_when raised {type(exc).__name__}: {exc}",
                    error=exc,
                )
            else:
                if met:
                    self._end(signal)
        pending = self._pending
        if pending:
            batch = pending.copy()
            pending.clear()
            for agent_run, trigger in batch:
                self._request(agent_run, trigger)

    def _end(self, signal: Signal) -> None:
        self.end_signal = signal
        reason = f"end_when held after {signal.name}"
        self.bus.emit("harness:ending", {"reason": reason}, source="harness")
        self.stop("ended", reason, cancel=self.options.on_end == "cancel")

    def _compile_end_when(self, end_when: Any) -> Callable[[Signal], bool] | None:
        if end_when is None:
            return None
        if isinstance(end_when, str) or not callable(end_when):
            matcher = compile_pattern(end_when)
            return lambda signal: matcher(signal.name)

        def check(signal: Signal) -> bool:
            view = RunView(
                signal, self.store, lambda: self.bus.history, self.options.input, self.run_id
            )
            return bool(end_when(view))

        return check

    # -- activations -------------------------------------------------------------

    def _request(self, agent_run: AgentRun, trigger: Signal) -> None:
        mode = agent_run.agent.concurrency
        if self.ending:
            self._skip(agent_run, trigger, "ended")
        elif agent_run.running == 0 or mode == "parallel":
            self._launch(agent_run, trigger)
        elif mode == "serial":
            agent_run.queue.append(trigger)
        elif mode == "skip":
            self._skip(agent_run, trigger, "busy")
        else:
            while agent_run.queue:
                self._skip(agent_run, agent_run.queue.popleft(), "superseded")
            agent_run.queue.append(trigger)

    def _launch(self, agent_run: AgentRun, trigger: Signal) -> None:
        main = self._main
        if self.ending or (main is not None and main.cancelling()):
            self._skip(agent_run, trigger, "ended")
            return
        agent = agent_run.agent
        if agent.max_activations is not None and agent_run.launched >= agent.max_activations:
            self._skip(agent_run, trigger, "limit")
            return
        options = self.options
        depth = trigger.depth + 1
        if options.max_activations is not None and self.activations >= options.max_activations:
            self._loop_limit("max_activations", options.max_activations, agent_run, trigger)
            return
        if options.max_depth is not None and depth > options.max_depth:
            self._loop_limit("max_depth", options.max_depth, agent_run, trigger)
            return
        self.activations += 1
        agent_run.launched += 1
        agent_run.running += 1
        signal = self.bus._publish(
            agent_run.activated,
            {"agent": agent_run.name, "trigger": trigger.name},
            agent_run.name,
            trigger.id,
            depth,
        )
        activation = Activation(agent_run, trigger, signal)
        coroutine = self._activator.activate(activation)
        if self._group is None:
            self._deferred.append((activation, coroutine))
        else:
            self._spawn(activation, coroutine)

    def _spawn(self, activation: Activation, coroutine: Coroutine[Any, Any, None]) -> None:
        assert self._group is not None
        task = self._group.create_task(coroutine)
        activation.task = task
        self._inflight[task] = activation
        if self.ending and self.options.on_end == "cancel":
            self._cancel(task, activation)

    def _cancel(self, task: asyncio.Task[None], activation: Activation) -> None:
        task.cancel()
        if not activation.started:
            # A task cancelled before its first step never runs its body, so account
            # for it here: it was announced (activated) and must be closed too.
            agent_run = activation.agent_run
            self.bus.emit(
                agent_run.cancelled,
                {"agent": agent_run.name, "reason": self.reason, "duration_ms": 0.0},
                source=agent_run.name,
                cause=activation.signal,
            )
            self.release(activation)

    def release(self, activation: Activation) -> None:
        """Account for a finished activation and start the next queued trigger, if any."""
        agent_run = activation.agent_run
        agent_run.running -= 1
        if activation.task is not None:
            self._inflight.pop(activation.task, None)
        queue = agent_run.queue
        if queue and agent_run.running == 0:
            self._request(agent_run, queue.popleft())

    def _skip(self, agent_run: AgentRun, trigger: Signal, reason: str) -> None:
        self.bus.emit(
            agent_run.skipped,
            {"agent": agent_run.name, "trigger": trigger.name, "reason": reason},
            source="harness",
            cause=trigger,
        )

    def _guard_failed(self, agent_run: AgentRun, trigger: Signal, exc: Exception) -> None:
        self.bus.emit(
            agent_run.failed,
            {"agent": agent_run.name, "error": _error(exc), "duration_ms": 0.0},
            source=agent_run.name,
            cause=trigger,
        )
        self.failed(agent_run, exc)

    def failed(self, agent_run: AgentRun, exc: BaseException) -> None:
        """Handle an agent failure: stop the run if ``fail_fast``."""
        log(
            "reactor.run",
            "warning",
            "agent failed",
            agent=agent_run.name,
            run_id=self.run_id,
            error=repr(exc),
        )
        if self.options.fail_fast:
            self.stop(
                "failed",
                f"agent {agent_run.name!r} failed: {type(exc).__name__}: {exc}",
                error=exc,
            )

    def _loop_limit(self, limit: str, value: int, agent_run: AgentRun, trigger: Signal) -> None:
        chain = causal_chain(self.bus.history, trigger)
        error = loop_limit_error(limit, value, chain, agent_run.name)
        self._skip(agent_run, trigger, "limit")
        self.stop("loop_limit", str(error), error=error)

    # -- helpers for the activator -----------------------------------------------

    def _context(self, agent_run: AgentRun, signal: Signal) -> AgentContext:
        return AgentContext(
            agent_run.name,
            self.run_id,
            signal,
            self.options.input,
            self.store,
            self._ctx_emit,
            lambda: self._activator.bound(agent_run),
        )

    def _ctx_emit(self, ctx: AgentContext, name: str, payload: Any) -> Signal:
        agent_run = self._agent_run(ctx.agent)
        if name in agent_run.agent.emits:
            if ctx.emitted is None:
                ctx.emitted = set()
            ctx.emitted.add(name)
        elif name not in agent_run.undeclared:
            agent_run.undeclared.add(name)
            log(
                "reactor.run",
                "warning",
                "undeclared emit",
                agent=ctx.agent,
                signal=name,
                hint=f"add {name!r} to the agent's emits=[...] so the graph knows about it",
            )
        return self.bus.emit(name, payload, source=ctx.agent)

    def _agent_run(self, name: str) -> AgentRun:
        return self._by_name[name]

    @property
    def provider(self) -> Provider | None:
        """The run's default provider."""
        return self.options.provider


def _each(handlers: list[Callable[[Signal], None]]) -> Callable[[Signal], None]:
    def dispatch(signal: Signal) -> None:
        for handler in handlers:
            handler(signal)

    return dispatch


def _error(exc: BaseException) -> dict[str, str]:
    return {"type": type(exc).__name__, "message": str(exc)}
