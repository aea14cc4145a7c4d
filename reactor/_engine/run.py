"""The run engine: turns signals into agent activations until the run ends.

One :class:`Run` per execution of a graph. It owns the run's bus and store, wires the
agents' triggers to its :class:`~reactor._engine.scheduler.Scheduler`, checks ``end_when``
after each signal has been dispatched, and gives activations what they need of it
(:class:`~reactor._activation.activator.RunServices`). Activations are the scheduler's tasks;
the run completes when none is left (quiescence) or it is stopped.

Every stop (``end_when``, failure with ``fail_fast``, loop limit, timeout, abort)
goes through :meth:`Run.stop`, which cancels in-flight activations directly; the
main task is only cancelled from outside.
"""

from __future__ import annotations

import asyncio
import functools
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, cast

from reactor._activation.activator import Activator
from reactor._activation.agentrun import Activation, AgentRun
from reactor._activation.fold import LogFold
from reactor._activation.resume import ResumePlan
from reactor._activation.timers import TIMERS, Timers
from reactor._agents.asking import Asking
from reactor._agents.sandbox import template_values
from reactor._engine.collector import run_finished, run_started
from reactor._engine.costs import Costs
from reactor._engine.opening import Forked, announce, first_signal, last_signal
from reactor._engine.options import RunOptions
from reactor._engine.outside import OutsideInput
from reactor._engine.result import AgentFailure, Fingerprints, RunMetrics, RunResult, RunStatus
from reactor._engine.routes import routes_of
from reactor._engine.runspec import GraphSpec, end_check, graph_fingerprints, watchers
from reactor._engine.scheduler import Scheduler
from reactor._engine.snapshots import snapshots_for
from reactor._engine.subruns import RunExtras
from reactor._providers.replay import ReplayProvider
from reactor._recording.inbox import Posted
from reactor._recording.info import new_run_id
from reactor._recording.recording import Recording
from reactor._recording.store import flush_run
from reactor._signals.bus import SignalBus
from reactor._signals.diagnostics import log
from reactor._signals.door import storable_text
from reactor._signals.names import HARNESS_END, HARNESS_ENDING, INBOX_PREFIX, inbox_agent
from reactor._signals.settings import settings
from reactor._signals.sharedkeys import shared_keys
from reactor._signals.signal import Signal
from reactor.exceptions import BudgetExceededError, RunSuspendedError, RunTimeoutError
from stores import Store, create_store

if TYPE_CHECKING:
    from reactor._providers.base import Provider, ProviderRequest, Usage

__all__ = ["Run"]


_NO_SCOPE: Mapping[str, Any] = MappingProxyType({})
"""The scope of the runs given none (shared: nothing writes it)."""
_ENDED = shared_keys("HarnessEnd")
"""The payload of every run's ``harness:end`` (see ``reactor._signals.sharedkeys``)."""


class Run:
    """One execution of a graph: create, :meth:`begin`, then await :meth:`execute`."""

    # Thousands of runs may be in flight at once: slots keep each one small.
    __slots__ = (
        "__weakref__",
        "_asking",
        "_end_check",
        "_end_payload",
        "_extras",
        "_known",
        "_main",
        "_recorder",
        "_routes",
        "_started",
        "_template_scope",
        "_timer",
        "_timers",
        "_wake",
        "agents",
        "bus",
        "closed",
        "costs",
        "end_signal",
        "ending",
        "error",
        "failures",
        "forked",
        "graph",
        "input",
        "live",
        "options",
        "outside",
        "provider",
        "reason",
        "replay",
        "resumed",
        "run_id",
        "scheduler",
        "scope",
        "status",
        "store",
        "suspended",
        "target",
        "target_hash",
        "template_run_id",
    )

    def __init__(
        self,
        graph: GraphSpec,
        options: RunOptions,
        *,
        live: bool = False,
        target: str | None = None,
        target_hash: str | None = None,
        resume: ResumePlan | None = None,
        forked: Forked | None = None,
    ) -> None:
        settings()  # the environment's REACTOR_* values are checked before any run begins
        self.graph = graph
        self.options = options
        self.input: Any = options.input
        self.provider: Provider | None = options.provider
        # Most runs have no scope: they share one empty mapping, read-only.
        self.scope: Mapping[str, Any] = options.scope or _NO_SCOPE
        self._template_scope: Mapping[str, Any] | None = None if options.scope else _NO_SCOPE
        self.live = live
        self.target = target or options.target
        self.target_hash = target_hash
        self.resumed = resume
        self.forked = forked
        self.run_id = resume.run_id if resume else options.run_id or new_run_id()
        self.bus = SignalBus(options.history_limit, run_id=self.run_id)
        if resume is not None:
            self.bus.preload(resume.recording.signals)
        self.store: Store[Any] = create_store(graph.state)
        self.agents = [AgentRun(agent) for agent in graph.agents.values()]
        self.status: RunStatus | None = None
        self.reason = ""
        self.error: BaseException | None = None
        self.ending = False
        self.closed = False
        self.end_signal: Signal | None = None
        self.failures: tuple[AgentFailure, ...] = ()  # most runs have none: no list each
        self.costs = Costs.of_run(self.run_id, options, graph.agents.values(), resume)
        self._main: asyncio.Task[Any] | None = None
        self._wake: asyncio.Event | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._started = 0.0
        self._end_payload: dict[str, Any] | None = None
        replay = options.replay  # a recording is replayed by a ReplayProvider of it
        self.replay = ReplayProvider(replay) if isinstance(replay, Recording) else replay
        # The run_id templates render: the recorded run's during a replay, so that a
        # replay's prompts are the recorded prompts and find their recorded answers.
        replayed = self.replay.recording.run_id if self.replay is not None else None
        self.template_run_id = replayed or self.run_id
        self._extras: RunExtras | None = None  # MCP servers, child runs: made when asked
        # The run's parts reach it through a weak proxy: no cycle, so a finished run is
        # freed as soon as nobody holds it, not at the garbage collector's next pass.
        services = cast("Run", weakref.proxy(self))
        self.outside = OutsideInput(  # a replay releases the recorded outside input
            services,
            options.record,
            self.replay.recording if self.replay is not None else None,
        )
        self._asking: Asking | None = None  # most runs ask nobody anything
        self._timers: Timers | None = None  # nor sleep
        self.suspended = False
        self._end_check = end_check(
            graph.end_when, self.store, self.bus, options.input, self.run_id
        )
        self.scheduler = Scheduler(services, self.agents, Activator(services))

    # -- lifecycle ---------------------------------------------------------------

    def begin(self, waiting: Sequence[Posted] = ()) -> None:
        """Wire the run, emit its first signal, deliver ``waiting`` (posted before it began)."""
        self._started = time.perf_counter()
        self.store.bind(self.bus)
        resumed, forked, options = self.resumed, self.forked, self.options
        if resumed is not None:
            self.store.restore(resumed.state)
        origin = (self.target, self.target_hash)
        announce(self.run_id, self.graph.name, options, origin, resumed, forked)
        if self.replay is not None:
            self.replay.follow(self.bus)  # recorded events go in their recorded turns
        self._routes = routes_of(self.graph, [agent_run.agent for agent_run in self.agents])
        self._known = self._routes.known
        self._recorder = self.outside.recorder()
        replayed = self.replay.recording if self.replay is not None else None
        snapshots = snapshots_for(self.bus, replayed, options.record, self._fold_maker())
        if snapshots is not None:
            self._recorder = snapshots.recorder(self._recorder)
        # An unrecorded run's router has nothing to do for a name no agent activates on.
        unrouted = self._routes.unrouted if self._recorder is None else ()
        self.bus.set_router(self._route, unrouted=unrouted)
        for reporter in options.reporters:
            self.bus.subscribe(reporter.patterns, reporter.on_signal)
        for watcher in watchers():
            self.bus.subscribe("**", watcher)
        # The hook has work only while activations are pending, unless it also checks
        # end_when or releases a replay's recorded outside input.
        pending = self.scheduler.pending
        if self._end_check is None and self.replay is None:
            self.bus.set_after_dispatch(self._after_dispatch, only_if=pending)
        else:
            self.bus.set_after_dispatch(self._after_dispatch)
        prints = graph_fingerprints(self.graph, self.agents)
        first_signal(self.bus, self.store, options, prints, resumed, forked)
        if resumed is not None:
            self.asking.preload(resumed.pending_prompts)
            self.timers.preload(resumed.sections.get(TIMERS))
            for agent_run in self.agents:
                for message in resumed.mailboxes.get(agent_run.name, ()):
                    agent_run.mailbox().put(message)
            if forked is not None and forked.state:  # settle, then the edit, then new work
                self.scheduler.hold(dict(forked.state))
            self.scheduler.resume(resumed)
        self.outside.watch(self.run_id, waiting)

    def _fold_maker(self) -> Callable[[], LogFold]:
        """What makes the fold snapshots fold the log into (holding no reference to the run)."""
        if self.resumed is not None:
            fold = self.resumed.fold
            return lambda: fold
        names = [agent_run.name for agent_run in self.agents]
        return functools.partial(LogFold, names, self._routes, self.run_id)

    def _route(self, signal: Signal) -> None:
        """Record ``signal``, and give it to the agents its name activates.

        A message to an agent (``inbox:<agent>``) that does not activate it goes to the
        agent's mailbox, for ``ctx.receive()``.
        """
        if self._recorder is not None:
            self._recorder(signal)
        name = signal.name
        indexes = self._known.get(name)  # the table's answer, without a call for most names
        if indexes is None:
            indexes = self._routes(name)
        if indexes:
            agents, trigger = self.agents, self.scheduler.trigger
            for index in indexes:
                trigger(agents[index], signal)
        elif name.startswith(INBOX_PREFIX):
            addressee = inbox_agent(name)
            for agent_run in self.agents:
                if agent_run.name == addressee:
                    agent_run.mailbox().put(signal.payload)

    async def execute(self) -> RunResult:
        """Run until quiescence (or until closed, for a live run) or a stop."""
        self._arm()
        run_started()
        try:
            due: float | None = None
            scheduler = self.scheduler
            while True:
                # Activations run as the scheduler's tasks; the run waits for them here,
                # in its own frame (no context manager's coroutine per run in flight).
                scheduler.open(self._main)
                try:
                    if self._wake is not None or due is not None:
                        await self._outside_wait(due)
                    idle = scheduler.idle()
                    while idle is not None:
                        await idle
                        idle = scheduler.idle()
                except BaseException as stopped:
                    await scheduler.closing(stopped)
                    raise
                scheduler.closed()
                due = self._next_due()
                if due is None:
                    break
        except asyncio.CancelledError:
            if self.suspended:
                self._detach()
                await self.flush_recording()
                raise RunSuspendedError(
                    f"Run {self.run_id} was suspended: it stopped without ending, and its "
                    "log says where. Resume it with graph.resume(run_id, record=store) "
                    "(or `reactor resume RUN`) to get its result.",
                    run_id=self.run_id,
                ) from None
            self._set_status("aborted", "the run was cancelled from outside")
            self._finish()
            raise
        finally:
            run_finished()
            if self._timer is not None:
                self._timer.cancel()
            if self._extras is not None:
                await self._extras.aclose()
        self._finish()
        if self.options.record is not None:
            await self.flush_recording()
        return self.result()

    def _arm(self) -> None:
        """The run's task, a live run's wake-up, and its timeout."""
        self._main = asyncio.current_task()
        if self.live:  # only a live run waits to be closed
            self._wake = asyncio.Event()
            if self.closed or self.ending:
                self._wake.set()
        if self.options.timeout is not None:
            self._timer = asyncio.get_running_loop().call_later(
                self.options.timeout, self._on_timeout
            )

    async def _outside_wait(self, due: float | None) -> None:
        """A live run waits to be closed; another, for a message posted with ``at=``."""
        if self._wake is not None:
            await self._wake.wait()
        elif due is not None:
            await self.outside.nap(due)

    def _next_due(self) -> float | None:
        """At quiescence: when to look again (``None``: the run is over).

        A replay may still have recorded outside input to give, a message posted for
        later may be due.
        """
        if self.ending:
            return None
        due = 0.0 if self.outside.at_quiescence() else self.outside.scheduled()
        return None if due is None or self.ending else due

    async def flush_recording(self) -> None:
        """Wait until the store has written the run; a run not fully written fails."""
        record = self.options.record
        error = None if record is None else await flush_run(record, self.run_id)
        if error is not None and not self.suspended:  # a suspended run's log is a prefix
            self.status, self.error = "failed", error
            self.reason = f"recording failed: {error.unwritten} signals were not written"

    # -- services of the activations (see reactor._activation.activator.RunServices) --------

    @property
    def template_scope(self) -> Mapping[str, Any]:
        """The scope as templates see it: plain data, made when a template first reads it.

        A run whose agents render no template (a reaction's handler) never converts it.
        """
        if self._template_scope is None:
            self._template_scope = template_values(self.scope)
        return self._template_scope

    @property
    def asking(self) -> Asking:
        """The run's questions to people."""
        if self._asking is None:
            unanswered = self.replay.unanswered if self.replay is not None else None
            self._asking = Asking(self.bus, self.run_id, self.outside.note_delivery, unanswered)
        return self._asking

    @property
    def timers(self) -> Timers:
        """The run's durable timers (``ctx.sleep``); a replay's fire in their recorded turns."""
        if self._timers is None:
            self._timers = Timers.of(self.bus, self.template_run_id, self.replay)
        return self._timers

    @property
    def extras(self) -> RunExtras:
        """What the run starts only when its agents ask: MCP servers, child runs."""
        if self._extras is None:
            self._extras = RunExtras(self.bus, self.options, self.run_id)
        return self._extras

    def record_request(self, request: ProviderRequest) -> None:
        """Keep what a provider was asked, for the result and the recording (once per hash)."""
        self.costs.record_request(request)

    def count_usage(
        self, usage: Usage, cost_usd: float | None, agent: str = "", model: str | None = None
    ) -> None:
        """Add a provider call's tokens and cost to the run's metrics."""
        self.costs.count_usage(usage, cost_usd, agent, model)

    def check_budget(self, agent: str, provider: Provider, request: ProviderRequest) -> None:
        """Refuse a model call that would start over the run's or the agent's budget."""
        self.costs.check_budget(agent, provider, request)

    def _finish(self) -> None:
        if self._end_payload is not None:
            return
        self._set_status("completed", "quiescence: nothing left to do")
        self.ending = True
        self.closed = True
        self.outside.stop()
        payload = self._end_payload = _ENDED()
        payload["status"] = self.status
        payload["reason"] = self.reason
        payload["duration_ms"] = self.duration_ms()
        payload["activations"] = self.scheduler.activations
        payload["failures"] = len(self.failures)
        self.bus.publish(HARNESS_END, payload, "harness", None, 0)
        self._detach()

    def _detach(self) -> None:
        """Nothing calls back into the run any more: it is freed when nobody holds it."""
        self.store.unbind()
        if self._asking is not None:
            self._asking.close()
        self.bus.set_router(None)
        self.bus.set_after_dispatch(None)

    def suspend(self, reason: str = "suspended") -> None:
        """Record ``harness:suspended {reason}`` last (no ``harness:end``): a resume goes on.

        Then cancel the run's task: it flushes the log and raises ``RunSuspendedError``.
        """
        if self._end_payload is not None or self.suspended:
            return
        last_signal(self.bus, self._recorder, reason)  # in flight is dropped, unseen
        self.suspended = True
        self._recorder = None
        self.closed = True
        self.outside.stop()

    def duration_ms(self) -> float:
        """Milliseconds since the run began."""
        return round((time.perf_counter() - self._started) * 1000, 3)

    def result(self) -> RunResult:
        """Build the :class:`RunResult` (call after :meth:`execute`)."""
        by_agent = {agent_run.name: agent_run.launched for agent_run in self.agents}
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
                activations=self.scheduler.activations,
                activations_by_agent=by_agent,
                input_tokens=self.costs.input_tokens,
                output_tokens=self.costs.output_tokens,
                cost_usd=None if self.costs.cost_usd is None else round(self.costs.cost_usd, 6),
            ),
            run_id=self.run_id,
            reason=self.reason,
            graph=self.graph.name,
            requests=Fingerprints(self.costs.requests),
            failures=tuple(self.failures),
            children=self._extras.children if self._extras is not None else {},
        )

    # -- stopping ----------------------------------------------------------------

    def _set_status(
        self, status: RunStatus, reason: str, error: BaseException | None = None
    ) -> None:
        if self.status is None:  # a reason may quote an exception: the log must hold it
            self.status, self.reason, self.error = status, storable_text(reason), error

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
        self.scheduler.stop_admission()
        if cancel:
            self.scheduler.cancel_all()

    def close(self) -> None:
        """Accept no more input; a live run finishes once in-flight work is done."""
        self.closed = True
        self.outside.wake()
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

    def release(self, activation: Activation) -> None:
        """Account for a finished activation (and start what was queued behind it)."""
        self.scheduler.release(activation)

    def crashed(self, error: BaseException) -> None:
        """An activation raised a ``BaseException``: the run stops, and the error goes on."""
        self.scheduler.crashed(error)

    def settle(self, edit: Mapping[str, Any]) -> None:
        """A fork's edit, once what was in flight at its point has settled (actor ``user``)."""
        if not self.ending:
            self.store.update(dict(edit), actor="user")

    def failed(self, agent_run: AgentRun, exc: BaseException, signal: Signal) -> None:
        """Count an agent's failure (``signal``); stop the run if ``fail_fast``."""
        self.failures = (*self.failures, AgentFailure(agent_run.name, exc, signal.id))
        log(
            "reactor.run",
            "warning",
            "agent failed",
            agent=agent_run.name,
            run_id=self.run_id,
            error=repr(exc),
        )
        if self.options.fail_fast or isinstance(exc, BudgetExceededError):
            self.stop(
                "failed",
                f"agent {agent_run.name!r} failed: {type(exc).__name__}: {exc}",
                error=exc,
            )

    # -- after each signal -------------------------------------------------------

    def _after_dispatch(self, signal: Signal) -> None:
        if self.replay is not None:  # recorded outside input whose turn has come
            self.outside.after_dispatch()
        check = self._end_check
        if check is not None and not self.ending:
            try:
                met = check(signal)
            except Exception as exc:
                self.stop("failed", f"end_when raised {type(exc).__name__}: {exc}", error=exc)
            else:
                if met:
                    self._end(signal)
        scheduler = self.scheduler
        if scheduler.pending:
            scheduler.start_pending()

    def _end(self, signal: Signal) -> None:
        self.end_signal = signal
        reason = f"end_when held after {signal.name}"
        self.bus.emit(HARNESS_ENDING, {"reason": reason}, source="harness", cause=signal)
        self.stop("ended", reason, cancel=self.options.on_end == "cancel")
